"""One case of bench_decode on the GPU, three launches (Nsight Compute profiles the third).

    python tools/pending/one_decode.py ours|fi CASE
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
from bench_decode import CASES, flashinfer_decode, make_case  # noqa: E402

from mixed_attn.testing import OpPlan, op_forward  # noqa: E402

who, name = sys.argv[1], sys.argv[2]
c = CASES[name]
b = make_case(**c)
out = torch.empty_like(b.q)
if who == "ours":
    lse = torch.empty(b.q.shape[0], c["Hq"], device="cuda")
    plan = OpPlan(b.qo_indptr, b.kv_indptr, b.seq_lens, c.get("page", 16), c["Hq"], c["Hkv"], c["D"],
                  kv_dtype=b.k_cache.dtype, ctas_per_sm=2)
    slots = max(plan.num_partials, 1)
    po = torch.empty(slots, c["Hq"], c["D"], device="cuda")
    pl = torch.empty(slots, c["Hq"], device="cuda")
    fn = lambda: op_forward(plan, b.q, b.k_cache, b.v_cache, b.kv_indices, out, lse, None, po, pl)  # noqa: E731
else:
    fn, why = flashinfer_decode(b.q, b.k_cache, b.v_cache, b.kv_indices, b.kv_indptr, b.seq_lens,
                                c.get("page", 16), out)
    assert fn is not None, why
for _ in range(3):  # ncu profiles the third launch
    fn()
torch.cuda.synchronize()
