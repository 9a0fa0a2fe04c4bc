#!/usr/bin/env bash
# The main job: sets up .venv like scripts/test.sh, builds and installs mixed_attn, then runs a
# demo mixed step (on the GPU when there is one, else on the CPU) and prints what it did.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MIXED_ATTN_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q torch==2.13.0
fi
"$PY" -m pip install -q numpy "scikit-build-core>=0.10" cmake ninja triton
"$PY" -m pip install -q --no-build-isolation --no-deps .
"$PY" -m mixed_attn.demo "$@"
# On a GPU the main job goes on to the benchmark suite (benchmarks/RESULTS.md has the last table).
if "$PY" -c "import torch, mixed_attn, sys; sys.exit(0 if torch.cuda.is_available() and mixed_attn.has_cuda_kernels() else 1)"; then
  "$PY" benchmarks/bench_mixed.py
fi
