"""Near-dup index: reload time for N saved signatures, and per-row check cost.

Writes N random signatures as one index shard (as a finished run would), then reports the
median time of ``NearDupIndex.load`` and of ``check_and_add`` on code-like rows.

    .venv/bin/python benchmarks/bench_dedup.py [--rows 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import numpy as np

    from swemill.corpus.dedup import MinHashConfig, NearDupIndex, _index_schema
    from swemill.store import Store

    store = Store.open(tempfile.mkdtemp(prefix="bench-dedup-"))
    cfg = MinHashConfig()
    rng = np.random.default_rng(0)
    sigs = rng.integers(0, 2**32 - 1, (args.rows, cfg.num_permutations), dtype=np.uint32)
    rows = [
        {"row_id": f"r{i}", "origin_run": "old", "sha256": f"{i:064x}", "hashvalues": sigs[i]}
        for i in range(args.rows)
    ]
    store.write_records("index/dedup", "old", "00000", rows, schema=_index_schema(cfg))

    loads = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        index = NearDupIndex.load(store, "new")
        loads.append(time.perf_counter() - start)
    words = ["def", "return", "self", "x", "=", "(", ")", ":", "if", "for", "in", "data", "1"]
    texts = [" ".join(random.choice(words) for _ in range(400)) for _ in range(300)]
    start = time.perf_counter()
    for i, text in enumerate(texts):
        index.check_and_add(f"t{i}", text)
    per_row = (time.perf_counter() - start) / len(texts)
    print(f"load {args.rows} signatures: median {statistics.median(loads):.2f} s")
    print(f"check_and_add (400-token rows): {per_row * 1000:.2f} ms/row")
    print(f"counts {dict(index.counts)}")


if __name__ == "__main__":
    main()
