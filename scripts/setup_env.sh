#!/usr/bin/env bash
# Sourced by scripts/test.sh and scripts/demo.sh: makes .venv (system site packages visible, so a
# machine's own CUDA torch is used; torch==2.13.0 otherwise), installs the build and test tools,
# then builds and installs mixed_attn from this checkout (unless MIXED_ATTN_SETUP_NO_INSTALL=1). Leaves $PY pointing at the venv's python.
VENV=${MIXED_ATTN_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q torch==2.13.0
fi
"$PY" -m pip install -q pytest numpy "scikit-build-core>=0.10" cmake ninja triton
# MIXED_ATTN_SETUP_NO_INSTALL=1 (scripts/test.sh's wheel mode): tools only, the wheel is built next.
if [ -z "${MIXED_ATTN_SETUP_NO_INSTALL:-}" ]; then
  "$PY" -m pip install -q --no-build-isolation --no-deps .
fi
