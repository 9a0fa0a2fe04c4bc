#!/usr/bin/env bash
# CI: the C++ / CUDA / HIP sources under csrc/ and tools/ (*.h *.cc *.cpp *.cu *.cuh) are formatted
# as .clang-format says; the files .clang-format-ignore lists (generated ones) are left out.
# clang-format comes from pip, pinned (its output changes between releases), into the venv of
# PYTHON (default .venv/bin/python) when that venv does not have this version yet.
#   bash scripts/check_format.sh          check (clang-format --dry-run --Werror), list what differs
#   bash scripts/check_format.sh --fix    rewrite the files in place
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT_VERSION=23.1.5
PY=${PYTHON:-.venv/bin/python}
CF="$(dirname "$PY")/clang-format"
if ! "$CF" --version 2>/dev/null | grep -q "version $CLANG_FORMAT_VERSION\b"; then
  "$PY" -m pip install -q "clang-format==$CLANG_FORMAT_VERSION"
fi
# Tracked files where this is a git checkout, else every file on disk.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list=$(git ls-files -- 'csrc/*.h' 'csrc/*.cc' 'csrc/*.cpp' 'csrc/*.cu' 'csrc/*.cuh' \
                         'tools/*.h' 'tools/*.cc' 'tools/*.cpp' 'tools/*.cu' 'tools/*.cuh')
else
  list=$(find csrc tools -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cpp' -o -name '*.cu' \
                                    -o -name '*.cuh' \) | sort)
fi
ignored=$(grep -v '^\s*\(#\|$\)' .clang-format-ignore || true)
files=()
for f in $list; do
  grep -qxF "$f" <<<"$ignored" || files+=("$f")
done
[ ${#files[@]} -gt 0 ] || { echo "check_format: no sources found" >&2; exit 1; }
if [ "${1:-}" = --fix ]; then
  "$CF" -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit
fi
if ! "$CF" --dry-run --Werror "${files[@]}"; then
  echo "check_format: the files above are not formatted as .clang-format says;" \
       "run: bash scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted (clang-format $CLANG_FORMAT_VERSION)"
