#!/usr/bin/env bash
# Writes the commit of this checkout (short hash, "-dirty" when tracked files differ) into
# .device_commit, which scripts/gpu_check.sh reads on the GPU machine, where .git does not
# travel. The file is ignored by git: pass it to the device call with carry=[".device_commit"].
set -euo pipefail
cd "$(dirname "$0")/.."
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- || commit="$commit-dirty"
echo "$commit" > .device_commit
echo "$commit"
