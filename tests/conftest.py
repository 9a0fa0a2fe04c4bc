import os
import sys

import pytest
import torch

# Tests run against the installed package; fall back to the source tree (after
# scripts/build_inplace.sh) when it is not installed. Under MIXED_ATTN_TEST_INSTALLED=1 (the wheel
# mode of scripts/test.sh) there is no fallback: mixed_attn must be the installed wheel.
_SRC_PKG = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "python"))
if os.environ.get("MIXED_ATTN_TEST_INSTALLED") == "1":
    import mixed_attn

    _where = os.path.realpath(os.path.dirname(mixed_attn.__file__))
    # An install is a site-packages folder, or a `pip install --target` folder that
    # scripts/gpu_wheel_check.sh names (the GPU machine's python is itself a venv).
    _target = os.environ.get("MIXED_ATTN_TEST_TARGET_DIR")
    _installed = "site-packages" in _where or (
        _target and _where.startswith(os.path.realpath(_target) + os.sep))
    if _where.startswith(_SRC_PKG + os.sep) or not _installed:
        raise RuntimeError(f"MIXED_ATTN_TEST_INSTALLED=1 but mixed_attn was imported from {_where}, "
                           "not from an installed wheel")
else:
    try:
        import mixed_attn  # noqa: F401
    except ImportError:
        sys.path.insert(0, _SRC_PKG)

# Interpreted Triton on machines without a GPU (must be set before triton is imported).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
