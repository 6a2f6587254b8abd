"""Exact and near-duplicate removal, with a near-dup index that persists across runs.

Exact: sha256 of normalised text (whitespace collapsed, optionally lower-cased and stripped
to letters and digits — data-juicer's ``document_deduplicator`` options). Near: MinHash
signatures (datasketch) of token shingles, bucketed by LSH bands (parameter names follow
data-juicer's ``document_minhash_deduplicator``). Every kept row's signature is saved under
``index/dedup/run_id=<id>/`` in the store, so a later run over the same source drops the
near-duplicates of earlier runs' rows. A candidate from LSH is confirmed by its estimated
Jaccard similarity before it counts as a duplicate.

The band count and width come from datasketch's ``MinHashLSH`` optimiser, weighted towards
recall (candidates are verified, so a false candidate only costs a comparison). The bands
themselves live in sorted numpy arrays rather than in ``MinHashLSH``'s tables: reloading
100k saved signatures took ~12 s through ``MinHashLSH.insert`` and takes ~2 s this way,
half of it reading the Parquet (``benchmarks/bench_dedup.py``, 2 shared cores).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
from datasketch import MinHash, MinHashLSH

from swemill.core.errors import ConfigError, StoreError
from swemill.store import Store
from swemill.store.layout import DEDUP_INDEX

__all__ = [
    "normalize_text",
    "text_hash",
    "ExactDedup",
    "MinHashConfig",
    "DupMatch",
    "NearDupIndex",
    "shingles",
]

_SPACE = re.compile(r"\s+")
_NON_CHAR = re.compile(r"[^\w]|_", re.UNICODE)
_TOKEN = re.compile(r"\w+|[^\w\s]")
_SCHEME = "affine32"


def normalize_text(text: str, *, lowercase: bool = True, ignore_non_character: bool = False) -> str:
    out = _SPACE.sub(" ", text).strip()
    if lowercase:
        out = out.lower()
    if ignore_non_character:
        out = _NON_CHAR.sub("", out)
    return out


def text_hash(text: str, *, lowercase: bool = True, ignore_non_character: bool = False) -> str:
    norm = normalize_text(text, lowercase=lowercase, ignore_non_character=ignore_non_character)
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


@dataclass(slots=True)
class ExactDedup:
    """Within one run: the first row with a given normalised text wins."""

    lowercase: bool = True
    ignore_non_character: bool = False
    seen: dict[str, str] = field(default_factory=dict)

    def check_and_add(self, row_id: str, text: str) -> str | None:
        """The id of an earlier row with the same normalised text, else None (and remember)."""
        digest = text_hash(
            text, lowercase=self.lowercase, ignore_non_character=self.ignore_non_character
        )
        first = self.seen.get(digest)
        if first is None:
            self.seen[digest] = row_id
        return first


@dataclass(frozen=True, slots=True)
class MinHashConfig:
    tokenization: Literal["token", "space", "character"] = "token"
    """``token``: words and single punctuation marks (suits code); ``space``: split on
    whitespace; ``character``: character n-grams."""
    window_size: int = 5
    """Shingle length, in tokens (or characters)."""
    lowercase: bool = True
    num_permutations: int = 128
    jaccard_threshold: float = 0.7
    seed: int = 1

    def __post_init__(self) -> None:
        if self.window_size < 1 or self.num_permutations < 16:
            raise ConfigError("minhash: window_size >= 1 and num_permutations >= 16 are needed")
        if not 0.0 < self.jaccard_threshold <= 1.0:
            raise ConfigError(f"minhash: jaccard_threshold {self.jaccard_threshold} not in (0, 1]")

    def signature_settings(self) -> dict[str, str]:
        """What must match for stored signatures to be comparable with new ones."""
        keep = ("tokenization", "window_size", "lowercase", "num_permutations", "seed")
        return {k: str(v) for k, v in asdict(self).items() if k in keep} | {"scheme": _SCHEME}


def shingles(text: str, config: MinHashConfig) -> set[bytes]:
    if config.lowercase:
        text = text.lower()
    n = config.window_size
    if config.tokenization == "character":
        units: list[str] | str = _SPACE.sub(" ", text)
        sep = ""
    else:
        units = text.split() if config.tokenization == "space" else _TOKEN.findall(text)
        sep = " "
    if not units:
        return set()
    if len(units) <= n:
        return {sep.join(units).encode()}
    return {sep.join(units[i : i + n]).encode() for i in range(len(units) - n + 1)}


@dataclass(frozen=True, slots=True)
class DupMatch:
    """The earlier row a new row duplicates."""

    row_id: str
    run_id: str
    kind: Literal["exact", "near"]
    jaccard: float

    @property
    def reason(self) -> str:
        return f"{self.kind}_duplicate"


def _index_schema(config: MinHashConfig) -> pa.Schema:
    fields = [
        ("row_id", pa.string()),
        ("origin_run", pa.string()),  # not "run_id": that name is the Hive partition key
        ("sha256", pa.string()),
        ("hashvalues", pa.list_(pa.uint32(), config.num_permutations)),
    ]
    meta = {f"swemill.minhash.{k}": v for k, v in config.signature_settings().items()}
    return pa.schema(fields, metadata=meta)


_EMPTY = np.iinfo(np.uint32).max  # every slot of an empty shingle set's signature


class _Bands:
    """LSH buckets: one uint64 key per band; loaded rows sorted, new rows in dicts."""

    def __init__(self, config: MinHashConfig) -> None:
        lsh = MinHashLSH(
            threshold=config.jaccard_threshold,
            num_perm=config.num_permutations,
            weights=(0.1, 0.9),  # favour recall: every candidate is verified afterwards
        )
        self.ranges: list[tuple[int, int]] = list(lsh.hashranges)
        rng = np.random.default_rng(0x5EED)
        self._mult = [rng.integers(1, 2**63, e - s, dtype=np.uint64) | 1 for s, e in self.ranges]
        self._keys = [np.empty(0, np.uint64) for _ in self.ranges]
        self._pos = [np.empty(0, np.int64) for _ in self.ranges]
        self._extra: list[dict[int, list[int]]] = [{} for _ in self.ranges]

    def keys(self, sigs: np.ndarray) -> np.ndarray:
        """``(n, bands)`` keys: a multiply-add hash of each band (wraps mod 2**64)."""
        sigs = np.atleast_2d(sigs).astype(np.uint64)
        out = np.empty((sigs.shape[0], len(self.ranges)), np.uint64)
        for j, (s, e) in enumerate(self.ranges):
            out[:, j] = (sigs[:, s:e] * self._mult[j]).sum(axis=1, dtype=np.uint64)
        return out

    def add_bulk(self, sigs: np.ndarray, first_pos: int) -> None:
        keys = self.keys(sigs)
        pos = np.arange(first_pos, first_pos + len(sigs), dtype=np.int64)
        for j in range(len(self.ranges)):
            k = np.concatenate([self._keys[j], keys[:, j]])
            p = np.concatenate([self._pos[j], pos])
            order = np.argsort(k)
            self._keys[j], self._pos[j] = k[order], p[order]

    def add_one(self, sig: np.ndarray, pos: int) -> None:
        for j, key in enumerate(self.keys(sig)[0].tolist()):
            self._extra[j].setdefault(key, []).append(pos)

    def query(self, sig: np.ndarray) -> set[int]:
        found: set[int] = set()
        for j, key in enumerate(self.keys(sig)[0]):
            lo = np.searchsorted(self._keys[j], key, side="left")
            hi = np.searchsorted(self._keys[j], key, side="right")
            found.update(self._pos[j][lo:hi].tolist())
            found.update(self._extra[j].get(int(key), ()))
        return found


class NearDupIndex:
    """Exact + MinHash LSH index over every kept row, this run's and earlier runs'.

    ``load(store, run_id)`` reads the saved signatures of every *other* run (a resumed run
    must not find its own rows from the interrupted attempt); ``check_and_add`` answers for
    one row and remembers it when it is new; ``save`` writes the new rows as one shard of
    ``index/dedup/run_id=<run_id>/``.
    """

    def __init__(self, run_id: str = "", config: MinHashConfig | None = None) -> None:
        self.run_id = run_id
        self.config = config or MinHashConfig()
        self.counts: Counter[str] = Counter()
        self._bands = _Bands(self.config)
        self._perm = MinHash(
            num_perm=self.config.num_permutations, seed=self.config.seed
        ).permutations
        self._keys: list[tuple[str, str]] = []  # (run_id, row_id) per position
        self._digests: list[str] = []
        self._exact: dict[str, int] = {}
        self._base = np.empty((0, self.config.num_permutations), np.uint32)
        self._added: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self._keys)

    @classmethod
    def load(cls, store: Store, run_id: str, config: MinHashConfig | None = None) -> NearDupIndex:
        index = cls(run_id, config)
        tables = []
        for other in store.list_runs(DEDUP_INDEX):
            if other == run_id or not store.complete_shards(DEDUP_INDEX, other):
                continue
            where = store.url_for(f"{DEDUP_INDEX}/run_id={other}")
            tables += [index._checked(t, where) for _, t in store.read_tables(DEDUP_INDEX, other)]
        if tables:
            index._load_table(pa.concat_tables(tables))
        return index

    def _checked(self, table: pa.Table, where: str) -> pa.Table:
        want = _index_schema(self.config).metadata
        got = {k: v for k, v in (table.schema.metadata or {}).items() if k in want}
        if got != want:
            raise StoreError(
                f"dedup index {where} was built with other MinHash settings; "
                "use the same settings or a fresh root"
            )
        return table

    def _load_table(self, table: pa.Table) -> None:
        flat = table.column("hashvalues").combine_chunks().flatten().to_numpy()
        self._base = flat.reshape(table.num_rows, self.config.num_permutations)
        runs, rows = table.column("origin_run").to_pylist(), table.column("row_id").to_pylist()
        self._keys = list(zip(runs, rows, strict=True))
        self._digests = table.column("sha256").to_pylist()
        for pos, digest in enumerate(self._digests):
            self._exact.setdefault(digest, pos)
        self._bands.add_bulk(self._base, 0)

    def _sig_at(self, pos: int) -> np.ndarray:
        n = len(self._base)
        return self._base[pos] if pos < n else self._added[pos - n]

    def signature(self, text: str) -> np.ndarray:
        m = MinHash(
            num_perm=self.config.num_permutations,
            seed=self.config.seed,
            permutations=self._perm,
            scheme=_SCHEME,
        )
        grams = shingles(text, self.config)
        if grams:
            m.update_batch(list(grams))
        return m.hashvalues.astype(np.uint32)

    def _digest(self, text: str) -> str:
        return text_hash(text, lowercase=self.config.lowercase)

    def check(self, text: str, sig: np.ndarray | None = None) -> DupMatch | None:
        """The earlier row ``text`` duplicates (exactly, or above the Jaccard threshold)."""
        exact = self._exact.get(self._digest(text))
        if exact is not None:
            run_id, row_id = self._keys[exact]
            return DupMatch(row_id, run_id, "exact", 1.0)
        sig = self.signature(text) if sig is None else sig
        if sig[0] == _EMPTY:
            return None  # no shingles: only exact matches count
        best: tuple[float, int] | None = None
        for pos in self._bands.query(sig):
            jaccard = float(np.mean(self._sig_at(pos) == sig))
            if jaccard >= self.config.jaccard_threshold and (best is None or jaccard > best[0]):
                best = (jaccard, pos)
        if best is None:
            return None
        run_id, row_id = self._keys[best[1]]
        return DupMatch(row_id, run_id, "near", best[0])

    def check_and_add(self, row_id: str, text: str) -> DupMatch | None:
        """Check one row; a new row is added to the index (saved by :meth:`save`)."""
        self.counts["in"] += 1
        sig = self.signature(text)
        match = self.check(text, sig)
        if match is not None:
            self.counts[f"dropped_{match.reason}"] += 1
            return match
        self.counts["out"] += 1
        pos = len(self._keys)
        self._keys.append((self.run_id, row_id))
        self._digests.append(self._digest(text))
        self._exact.setdefault(self._digests[-1], pos)
        self._added.append(sig)
        if sig[0] != _EMPTY:
            self._bands.add_one(sig, pos)
        return None

    def save(self, store: Store, shard: str = "00000") -> int:
        """Write the rows added since load as one shard of this run's index; returns the count."""
        if not self.run_id:
            raise StoreError("this dedup index has no run id to save under; use NearDupIndex.load")
        first = len(self._base)
        rows = [
            {
                "row_id": self._keys[first + i][1],
                "origin_run": self.run_id,
                "sha256": self._digests[first + i],
                "hashvalues": sig,
            }
            for i, sig in enumerate(self._added)
        ]
        store.write_records(
            DEDUP_INDEX, self.run_id, shard, rows, schema=_index_schema(self.config)
        )
        return len(rows)
