#!/usr/bin/env bash
# The test command: sets up .venv on a fresh machine (scripts/setup_env.sh), builds and installs
# mixed_attn from this checkout, then runs the whole test suite. GPU tests skip cleanly without a
# GPU; the CUDA (and, where hipcc exists, HIP) sources are compiled either way.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
"$PY" -m pytest -q tests "$@"
