#!/usr/bin/env bash
# Here (not on the GPU machine), once per session: FlashInfer 0.7.4 from ../shared/peers into the
# ignored .peers/ (../shared/peers/README.md), with the prebuilt sm_90a modules of the head dims
# given (default 128; each is ~10 MB of the 64 MiB a device call carries) and tvm_ffi's compiled
# core, which the shared copy lacks (from the same apache-tvm-ffi wheel, cp312, on the local
# package index). Device calls then carry [".peers"] and export
#   PYTHONPATH=$PWD/.peers:$PWD/python FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws MAX_JOBS=16
# usage: bash tools/setup_peers.sh [head dims, e.g. "128 64"]
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared/peers}
PY=${PYTHON:-python3}
grep -qx "/.peers/" .git/info/exclude 2>/dev/null || echo /.peers/ >> .git/info/exclude
rm -rf .peers && cp -r "$SHARED/flashinfer-0.7.4" .peers
mkdir -p .peers/flashinfer/data/aot
for d in ${1:-128}; do cp -r "$SHARED"/flashinfer-0.7.4-aot-sm90a/*head_dim_qk_${d}_* .peers/flashinfer/data/aot/; done
if [ ! -e .peers/tvm_ffi/core.cpython-312-x86_64-linux-gnu.so ]; then
  tmp=$(mktemp -d)
  "$PY" -m pip download -q apache-tvm-ffi==0.1.15.post2 --python-version 3.12 --only-binary=:all: --no-deps -d "$tmp"
  "$PY" -m zipfile -e "$tmp"/apache_tvm_ffi-*.whl "$tmp/x"
  cp "$tmp/x/tvm_ffi/core.cpython-312-x86_64-linux-gnu.so" .peers/tvm_ffi/
  rm -rf "$tmp"
fi
du -sh .peers
