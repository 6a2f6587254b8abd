#!/usr/bin/env bash
# Runs the whole suite, slow tests included. pytest exits 5 when it collects nothing: that is a
# failure here (a suite that runs no test proves nothing).
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 "$@"
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
