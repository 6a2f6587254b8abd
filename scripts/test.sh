#!/usr/bin/env bash
# Runs the whole suite, slow tests included. pytest exits 5 when it collects nothing: that is a
# failure here (a suite that runs no test proves nothing).
set -uo pipefail
cd "$(dirname "$0")/.."
# The tests run on pytest-xdist workers, one a core up to 4 (2 on CI's machine: the serial suite
# took 32 min there, 19 with two workers); SWEMILL_TEST_WORKERS overrides (0: in this process).
# worksteal: the slow tests (TRL, the zoo slice, the resume kills) are a few long ones.
workers="${SWEMILL_TEST_WORKERS:-$(.venv/bin/python -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')}"
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 -n "$workers" --dist worksteal "$@"
rc=$?
if [ "$rc" = "5" ]; then
  echo "test: pytest collected no tests" >&2
fi
# The whole suite (no arguments, as CI runs it) also checks what `make lint` checks.
if [ "$#" = "0" ]; then
  .venv/bin/ruff check src tests benchmarks testkit || rc=1
  .venv/bin/mypy src testkit/src || rc=1
  .venv/bin/lint-imports || rc=1  # the layers of docs/architecture.md (pyproject.toml)
fi
exit "$rc"
