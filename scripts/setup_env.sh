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
# transformers is pinned: tests/test_transformers_integration.py checks the adapter against the one
# release it supports (psutil: transformers sizes its paged cache from host memory on the CPU).
# Installed only when missing, and a failed install (an offline machine without them) does not
# stop the setup: that test module then skips and names the missing pin.
if ! "$PY" -c "import sys, psutil, transformers; sys.exit(transformers.__version__ != '5.17.0')" \
    2>/dev/null; then
  "$PY" -m pip install -q transformers==5.17.0 psutil ||
    echo "note: could not install transformers==5.17.0 psutil; the transformers tests will skip"
fi
# MIXED_ATTN_SETUP_NO_INSTALL=1 (scripts/test.sh's wheel mode): tools only, the wheel is built next.
if [ -z "${MIXED_ATTN_SETUP_NO_INSTALL:-}" ]; then
  "$PY" -m pip install -q --no-build-isolation --no-deps .
fi
