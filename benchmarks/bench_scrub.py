"""Scrub recall and false positives on a planted-secrets corpus, and throughput (MB/s, one core).

Accuracy (``swemill.corpus.planted``): 216 generated secrets of 27 kinds set in code, configs,
logs and shell sessions must all go (recall), and ordinary code (17 standard-library modules
that handle passwords, tokens, URLs and addresses, plus generated look-alikes: hashes, ids,
versions, tokenizer markers) should stay (the share of clean lines changed, and why).

Throughput: the median of ``--repeat`` passes over:

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
    from swemill.corpus.redact import scrub

    size = sum(len(t.encode()) for t in texts)
    times, redacted = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        redacted = sum(scrub(t).redacted for t in texts)
        times.append(time.perf_counter() - start)
    return size / 2**20 / statistics.median(times), redacted


def accuracy() -> None:
    from collections import Counter

    from swemill.corpus.planted import clean_lines, planted
    from swemill.corpus.redact import scrub

    corpus = planted()
    missed = [p for p in corpus if p.secret in scrub(p.text).text]
    kinds = Counter(p.kind for p in corpus)
    print(f"recall   {len(corpus) - len(missed)}/{len(corpus)} planted secrets of {len(kinds)} "
          f"kinds ({100 * (1 - len(missed) / len(corpus)):.1f}%)")
    for p in missed:
        print(f"  missed {p.kind}: {p.text[:100]!r}")
    lines = clean_lines()
    why: Counter[str] = Counter()
    for line in lines:
        result = scrub(line)
        if result.text != line:
            why.update(result.counts)
    changed = sum(1 for line in lines if scrub(line).text != line)
    print(f"clean    {changed}/{len(lines)} lines changed ({100 * changed / len(lines):.3f}%): "
          f"{dict(why)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    accuracy()
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
