import os
import sys

import pytest
import torch

# Tests run against the installed package; fall back to the source tree (after
# scripts/build_inplace.sh) when it is not installed.
try:
    import mixed_attn  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

# Interpreted Triton on machines without a GPU (must be set before triton is imported).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
