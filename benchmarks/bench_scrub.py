"""Scrub throughput (MB/s, one core) on ordinary code and on secret-dense tool output.

Reports the median of ``--repeat`` passes over:

- code: every ``*.py`` file under ``src/swemill`` (few secrets: the common case, where the
  literal needles let most rules skip the text);
- planted: a transcript of the test suite's planted secrets repeated to ~1 MB (every rule
  fires).

    .venv/bin/python benchmarks/bench_scrub.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _median_mb_s(texts: list[str], repeat: int) -> tuple[float, int]:
    from swemill.corpus.scrub import scrub

    size = sum(len(t.encode()) for t in texts)
    times, redacted = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        redacted = sum(scrub(t).redacted for t in texts)
        times.append(time.perf_counter() - start)
    return size / 2**20 / statistics.median(times), redacted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "corpus"))
    from test_scrub import PLANTED  # the same planted secrets the tests check

    code = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "src" / "swemill").rglob("*.py"))]
    transcript = "\n\n".join(text for _, _, text in PLANTED)
    planted = [transcript] * max(1, 2**20 // len(transcript))
    for name, texts in (("code", code), ("planted", planted)):
        rate, redacted = _median_mb_s(texts, args.repeat)
        size = sum(len(t) for t in texts) / 2**20
        print(f"{name:8s} {size:6.2f} MB  median {rate:6.1f} MB/s  redactions {redacted}")


if __name__ == "__main__":
    main()
