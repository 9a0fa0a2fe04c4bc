#!/usr/bin/env bash
# The test command: sets up .venv (torch, triton, build tools) on a fresh machine, builds and
# installs mixed_attn from this checkout, then runs the whole test suite. GPU tests skip cleanly
# without a GPU; the CUDA (and, where hipcc exists, HIP) sources are compiled either way.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MIXED_ATTN_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  # System packages stay visible so a machine's own (CUDA) torch is used where there is one.
  python3 -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q torch==2.13.0
fi
"$PY" -m pip install -q pytest numpy "scikit-build-core>=0.10" cmake ninja triton
"$PY" -m pip install -q --no-build-isolation --no-deps .
"$PY" -m pytest -q tests "$@"
