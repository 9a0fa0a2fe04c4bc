# Sourced by the pending scripts that time FlashInfer beside us, after `set -uo pipefail`: goes to
# the repository root, makes $OUT, exports the build's and FlashInfer's environment (the carried
# .peers: run `bash tools/setup_peers.sh "64 128"` here first and carry [".peers"]) and names the GPU.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[ -d .peers/flashinfer ] || { echo "run tools/setup_peers.sh \"64 128\" here first and carry .peers"; exit 1; }
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 NINJA_JOBS=16 MAX_JOBS=16
export PYTHONPATH=$PWD/.peers:$PWD/python FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws
# The commit the benchmark tables name (.git does not travel; scripts/device_commit.sh writes it).
if [ -z "${MIXED_ATTN_COMMIT:-}" ] && [ -f .device_commit ]; then export MIXED_ATTN_COMMIT="$(cat .device_commit)"; fi
nvidia-smi --query-gpu=name --format=csv,noheader
# The lab build of head dims 64 and 128 without fp8 (~50 s with 16 jobs), its log in $OUT.
build_subset() {
  local start=$(date +%s)
  bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=64;128" -DMIXED_ATTN_FP8=OFF > "$OUT/build.log" 2>&1 \
    || { tail -30 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
}
# memcheck then racecheck over `pytest -x -q` of the given arguments, each under TIMEOUT seconds,
# skipped once the script has run past ${GUARD:-450} s (T0: the script's start); logs in $OUT.
#   sanitize_subset TIMEOUT PYTEST_ARGS...
sanitize_subset() {
  local limit=$1; shift
  for tool in memcheck racecheck; do
    [ $(( $(date +%s) - T0 )) -gt ${GUARD:-450} ] && { echo "skip $tool (time)"; continue; }
    timeout "$limit" compute-sanitizer --tool $tool --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
      "$@" > "$OUT/$tool.txt" 2>&1
    echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/$tool.txt" | tail -3
  done
}
# Applies tools/pending/NAME to the copied tree (.git does not travel: `git apply` works on plain
# files, `patch` where it does not); exits the script when it does not apply. The patched files
# get a fresh mtime, newer than the objects of an earlier build on the machine.
#   apply_pending NAME
apply_pending() {
  git apply "tools/pending/$1" 2>/dev/null || patch -p1 < "tools/pending/$1" || { echo "$1 does not apply"; exit 1; }
}
