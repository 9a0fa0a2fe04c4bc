#!/usr/bin/env bash
# Issue 13, head dim 64 (58% of the matmul rate against the goal's 65%): three consumer warpgroups
# with the S/PV overlap kept (MA_SM90_D64_OVERLAP3=1, FA3's head-dim-64 shape) against the default
# (three without it), B-d64 / D-d64 timed in one process per build with FA3's rows beside the
# first; then the extend tests at head dim 64 on the overlap build. ~5 minutes warm.
# Carry [".peers", ".device_commit"] (compiles the same kernels' spills as the default: ptxas).
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -d .peers/flashinfer ] || { echo "carry .peers"; exit 1; }
touch csrc/cuda/extend/sm90/*
VARIANTS="none;-DMA_SM90_D64_OVERLAP3=1" HEAD_DIMS="64 -DMIXED_ATTN_FP8=OFF" CASES=${CASES:-B-d64,D-d64} \
  bash tools/pending/bf16_gap.sh
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONPATH=$PWD/python
timeout ${TEST_S:-100} python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_extend.py -k "64" 2>&1 | tail -3
