"""Small decode + save cases for `compute-sanitizer --tool memcheck` (keep it quick)."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import test_cuda_decode as t  # noqa: E402

FP8 = torch.float8_e4m3fn
for D, group, page, kv, window in [(64, 1, 1, None, -1), (128, 4, 16, None, 37), (256, 16, 64, None, -1),
                                   (128, 8, 16, FP8, -1), (64, 16, 1, FP8, 100), (256, 2, 16, FP8, -1)]:
    b = t.Batch([1, 70, 300, 1100], group * 2, 2, D, page, kv_dtype=kv, extend_lens=[1, 1, 1, 1])
    for det in (False, True):
        plan = b.plan(window_left=window, deterministic=det, fixed_split_tokens=128, min_split_tokens=64)
        out, lse, _, _ = b.run(plan, window_left=window, sinks=torch.randn(group * 2, device="cuda"))
        assert torch.isfinite(out).all()
    k = torch.randn(4, 2, D, device="cuda", dtype=torch.bfloat16)
    t.drv.save_kv(plan, k, k, b.k_cache, b.v_cache, b.kv_indices_dev)
torch.cuda.synchronize()
print("sanitize cases done")
