#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine: uv, the project's virtual environment
# (from uv.lock), and bubblewrap for the default sandbox. Safe to run again and again.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v uv >/dev/null 2>&1; then
  echo "setup: installing uv from PyPI" >&2
  python3 -m pip install --quiet --disable-pip-version-check uv \
    || python3 -m pip install --quiet --user --disable-pip-version-check uv
  export PATH="$HOME/.local/bin:$PATH"
fi

if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing bubblewrap with apt" >&2
    (apt-get install -y -qq bubblewrap >/dev/null 2>&1) \
      || (apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null)
  else
    echo "setup: bubblewrap (bwrap) is missing; install it with: sudo apt-get install -y bubblewrap" >&2
  fi
fi

# serve (starlette + uvicorn) is the environment server; ray and spark (~80 MB wheel, ~456 MB sdist) are needed by the scale-out tests; probe
# (torch) gets its own .venv-probe below, because the lock's torch is the multi-GB CUDA build.
EXTRAS=(--extra s3 --extra aws --extra openai --extra anthropic --extra ray --extra spark --extra serve)
uv sync --frozen "${EXTRAS[@]}" --group dev --quiet
bash scripts/setup_probe.sh
