#!/usr/bin/env bash
# The main job: sets up .venv and installs mixed_attn like scripts/test.sh, then runs a demo mixed
# step (on the GPU when there is one, else on the CPU) and prints what it did and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
"$PY" -m mixed_attn.demo "$@"
# On a GPU the main job goes on to the benchmark suite (benchmarks/RESULTS.md has the last table).
if "$PY" -c "import torch, mixed_attn, sys; sys.exit(0 if torch.cuda.is_available() and mixed_attn.has_cuda_kernels() else 1)"; then
  "$PY" benchmarks/bench_mixed.py
fi
