"""The ``rows`` strategy: SWE-bench-shaped rows and SWE-smith instances as candidates.

The two shapes mean opposite things by ``patch``:

* SWE-bench rows (``test_patch`` present): the broken state is ``base_commit`` plus
  ``test_patch``; ``patch`` is the gold fix. Our candidate's base (fixed) tree is therefore
  ``base_commit + test_patch + patch``, carried as ``metadata["base_patch"]``, and the bug
  patch is the reverse of ``patch``.
* SWE-smith instances (``image_name`` present, or a ``swesmith/owner__name.<sha>`` repo):
  ``patch`` is the bug, applied to the base tree; the golden patch is its reverse.

Rows are materialised from a local clone (the base commit must be in it) or a given path
holding the base tree. Every row that cannot be used is counted as a :class:`Drop`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from swemill.core.errors import SourceError, SynthesisError
from swemill.core.records import Candidate, Drop
from swemill.store.parquet import read_parquet
from swemill.synth.materialize import PatchedFiles
from swemill.synth.patches import join_patches, patch_files, reverse_patch
from swemill.synth.strategy import RepoView, SynthReport, candidate_id, git

__all__ = ["Row", "RowShape", "RowsSource", "RowsStrategy", "load_rows"]

RowShape = Literal["swebench", "swesmith"]
_SWESMITH_REPO = re.compile(r"^(?:swesmith/)?(?P<owner>[^/_]+(?:_[^/_]+)*?)__(?P<name>[^/]+?)"
                            r"\.(?P<sha>[0-9a-f]{7,40})$")


class Row(BaseModel):
    """One imported row, either shape, after validation."""

    model_config = ConfigDict(extra="ignore")

    instance_id: str = Field(min_length=1)
    repo: str = Field(min_length=1)
    patch: str = Field(min_length=1)
    shape: RowShape
    base_commit: str | None = None
    test_patch: str = ""
    FAIL_TO_PASS: list[str] = Field(min_length=1)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    problem_statement: str | None = None
    image_name: str | None = None

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        # SWE-bench publishes these as JSON-encoded strings; SWE-smith as lists.
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else []
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON list: {exc.msg}") from None
        return value

    def upstream(self) -> tuple[str, str | None]:
        """``owner/name`` and the base commit (SWE-smith names carry a short sha)."""
        m = _SWESMITH_REPO.match(self.repo)
        if self.shape == "swesmith" and m:
            return f"{m['owner']}/{m['name']}", self.base_commit or m["sha"]
        return self.repo, self.base_commit


def _shape_of(raw: dict[str, Any], shape: str) -> str | None:
    if shape != "auto":
        return shape
    if raw.get("test_patch") is not None:
        return "swebench"
    if raw.get("image_name") or str(raw.get("repo", "")).startswith("swesmith/"):
        return "swesmith"
    return "swebench" if raw.get("base_commit") else None


def _read(path: Path) -> list[Any]:
    try:
        if path.suffix == ".parquet":
            return list(read_parquet(path).to_pylist())
        text = path.read_text(encoding="utf-8")
    except Exception as exc:  # OSError, UnicodeDecodeError, or pyarrow's own for bad Parquet
        raise SourceError(f"cannot read rows from {path}: {exc}") from exc
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SourceError(f"{path} is not JSON: {exc.msg} (line {exc.lineno})") from exc
        if not isinstance(data, list):
            raise SourceError(f"{path} must hold a JSON list of rows")
        return data
    out: list[Any] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            out.append(SourceError(f"line {n}: not JSON ({exc.msg})"))
    return out


def load_rows(path: Path | str, shape: str = "auto") -> tuple[list[Row], list[Drop]]:
    """Rows from a ``.jsonl``, ``.json`` or ``.parquet`` file; each bad row is one Drop.

    Raises SourceError only when the file itself cannot be read.
    """
    if shape not in ("auto", "swebench", "swesmith"):
        raise SourceError(f"unknown row shape {shape!r}; use auto, swebench or swesmith")
    rows: list[Row] = []
    drops: list[Drop] = []
    for n, raw in enumerate(_read(Path(path)), 1):
        item = f"row {n}"
        if isinstance(raw, SourceError) or not isinstance(raw, dict):
            drops.append(Drop(stage="synth.rows", reason="not_an_object", item_id=item,
                              detail=str(raw)[:200]))
            continue
        item = str(raw.get("instance_id") or item)
        kind = _shape_of(raw, shape)
        if kind is None:
            drops.append(Drop(stage="synth.rows", reason="unknown_shape", item_id=item,
                              detail="neither test_patch nor image_name/swesmith repo"))
            continue
        try:
            rows.append(Row.model_validate({**raw, "shape": kind}))
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            drops.append(Drop(stage="synth.rows", reason="invalid_row", item_id=item,
                              detail=f"{where}: {first['msg']}"))
    return rows, drops


class RowsSource(BaseModel):
    """Where rows come from and where their repository lives."""

    rows_path: Path
    repo_dir: Path | None = None
    """A local clone holding each row's base commit, or a plain tree at the base."""
    shape: Literal["auto", "swebench", "swesmith"] = "auto"


class RowsStrategy:
    """Imported rows as candidates; see the module docstring."""

    name = "rows"

    def __init__(self, source: RowsSource, rows: Iterable[Row] | None = None) -> None:
        self.source = source
        self._rows = list(rows) if rows is not None else None
        self.report = SynthReport(self.name)

    def candidates(self, repo: RepoView) -> Iterator[Candidate]:
        self.report = SynthReport(self.name)
        rows = self._rows
        if rows is None:
            rows, drops = load_rows(self.source.rows_path, self.source.shape)
            for d in drops:
                self.report.skip(d.reason, d.item_id, d.detail, keep=True)
        root = self.source.repo_dir or repo.root
        for row in rows:
            if repo.max_candidates is not None and self.report.yielded >= repo.max_candidates:
                return
            try:
                cand = self._candidate(row, root, repo)
            except SynthesisError as exc:
                self.report.skip(_reason(exc), row.instance_id, str(exc)[:300], keep=True)
                continue
            self.report.yielded += 1
            yield cand
        if not self.report.yielded:
            self.report.nothing("no usable row")

    def _candidate(self, row: Row, root: Path, repo: RepoView) -> Candidate:
        name, commit = row.upstream()
        is_git = (root / ".git").exists()
        if is_git:
            commit = _resolve(root, commit or repo.commit)
        if row.shape == "swebench":
            base_patch, golden = join_patches([row.test_patch, row.patch]), row.patch
            bug = reverse_patch(row.patch)
        else:
            base_patch, bug, golden = "", row.patch, reverse_patch(row.patch)
        files = PatchedFiles(root, commit if is_git else None, [base_patch, bug])
        with files:
            if base_patch.strip():
                files.apply(base_patch, "base_patch_does_not_apply")
            changed = files.symbols(golden)
            files.apply(bug, "bug_patch_does_not_apply")
        n_files = len(patch_files(bug))
        return Candidate(
            candidate_id=candidate_id(self.name, row.instance_id, bug),
            repo=name,
            strategy="rows",
            bug_patch=bug,
            golden_patch=golden,
            changed=changed,
            scope="multi" if n_files > 1 else "module",
            fail_to_pass_hint=row.FAIL_TO_PASS,
            pass_to_pass_hint=row.PASS_TO_PASS,
            problem_statement=row.problem_statement,
            metadata={
                "base_commit": commit or repo.commit,
                "base_patch": base_patch,
                "source_instance_id": row.instance_id,
                "row_shape": row.shape,
                **({"image_name": row.image_name} if row.image_name else {}),
            },
        )


def _resolve(root: Path, commit: str | None) -> str:
    if not commit:
        raise SynthesisError("missing_base_commit: the row names no base commit")
    sha = git(root, "rev-parse", "--verify", "-q", f"{commit}^{{commit}}", check=False).strip()
    if not sha:
        raise SynthesisError(f"base_commit_not_in_clone: {commit} is not in {root}")
    return sha


def _reason(exc: SynthesisError) -> str:
    head = str(exc).split(":", 1)[0]
    return head if re.fullmatch(r"[a-z_]+", head) else "unusable_row"
