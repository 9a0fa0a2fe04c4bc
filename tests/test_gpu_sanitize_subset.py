"""Small whole-step cases for `compute-sanitizer --tool memcheck` (scripts/gpu_check.sh runs
`pytest -k sanitize` under it). They also run as ordinary GPU tests."""

import pytest
import torch

import mixed_attn
from helpers import assert_close_to_reference, run_op, run_reference
from mixed_attn.reference import FP8
from mixed_attn.testing import make_batch

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and mixed_attn.has_cuda_kernels()),
    reason="needs a CUDA GPU and a build with the CUDA kernels")


@pytest.mark.parametrize("mode", ["split", "fold"])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("head_dim", [64, 256])
def test_sanitize_small_step(mode, page_size, kv_dtype, head_dim):
    ext, pre = [1, 37, 1, 70, 1], [0, 5, 300, 0, 17]
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=head_dim,
                   page_size=page_size, kv_dtype=kv_dtype, device="cuda", seed=head_dim + page_size)
    sinks = torch.randn(8, device="cuda")
    opts = dict(window_left=40, logit_cap=20.0, sinks=sinks)
    out, lse, *_ = run_op(b, mode=mode, **opts)
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)
