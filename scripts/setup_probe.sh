#!/usr/bin/env bash
# The acceptance probe's own virtual environment, .venv-probe: swemill (editable) with the
# `probe` extra (transformers, TRL, PEFT, datasets) at the versions uv.lock pins, plus a CPU
# build of torch. It is kept apart from .venv because the lock's torch is the CUDA build
# from PyPI (several GB with its nvidia-* wheels), which a CPU-only CI has no use for.
#
# torch comes from a local CPU wheel when one is found (SWEMILL_TORCH_WHEEL, else the newest
# /opt/wheels/torch-*+cpu-cp311-*.whl), otherwise from the PyTorch CPU index. A stamp of the
# inputs makes a second run a no-op. SWEMILL_NO_PROBE=1 skips all of this (the probe tests
# then skip, saying why).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${SWEMILL_NO_PROBE:-}" = "1" ]; then
  echo "setup: SWEMILL_NO_PROBE=1, not building .venv-probe" >&2
  exit 0
fi

VENV=${SWEMILL_PROBE_VENV:-.venv-probe}
CPU_INDEX=${SWEMILL_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
TORCH_WHEEL=${SWEMILL_TORCH_WHEEL:-$(ls /opt/wheels/torch-*+cpu-cp311-*.whl 2>/dev/null \
  | sort -V | tail -n 1 || true)}

# The lock's pins for the probe extra, less torch and the CUDA stack it drags in.
REQS=$(uv export --frozen --extra probe --no-dev --no-emit-project --no-hashes --no-annotate \
  --quiet | grep -vE '^(#|torch==|triton==|nvidia-|cuda-)')
STAMP=$(printf '%s\n%s\n%s\n' "$REQS" "$TORCH_WHEEL" "$(uv --version)" | sha256sum | cut -c1-16)

if [ -f "$VENV/.swemill-probe-stamp" ] && [ "$(cat "$VENV/.swemill-probe-stamp")" = "$STAMP" ] \
  && [ -x "$VENV/bin/python" ]; then
  exit 0
fi

echo "setup: building $VENV (torch CPU, transformers, TRL, PEFT)" >&2
[ -x "$VENV/bin/python" ] || uv venv --quiet --python 3.11 "$VENV"
REQ_FILE=$(mktemp)
trap 'rm -f "$REQ_FILE"' EXIT
printf '%s\n' "$REQS" >"$REQ_FILE"
if [ -n "$TORCH_WHEEL" ]; then
  uv pip install --quiet --python "$VENV/bin/python" -r "$REQ_FILE" "$TORCH_WHEEL"
else
  uv pip install --quiet --python "$VENV/bin/python" -r "$REQ_FILE" torch \
    --index-url "$CPU_INDEX" --extra-index-url https://pypi.org/simple \
    --index-strategy unsafe-best-match
fi
uv pip install --quiet --python "$VENV/bin/python" --no-deps -e .
echo "$STAMP" >"$VENV/.swemill-probe-stamp"
