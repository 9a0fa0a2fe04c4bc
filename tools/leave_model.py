"""Step 3f's model against measured steps, on the CPU (no GPU needed).

    python tools/leave_model.py [--cases B,D,E,F,K] [--leave 0,22,33,44,55,66,88] [JSON ...]

For each bench_mixed case (page 16, an H200's description) and each N, the planner's estimate of
the split step with N SMs left to the decode (plan.cc step 3f; step_cost.h, overlapped_step_us),
as a ratio to its estimate with none (a plan in mode auto records it: est_split_ns; with none
that is the two halves one after the other), and the N the policy picks. Given bench_mixed JSONs
holding ma_split_leaveN rows (and ma_split_leave0), the measured ratios beside the estimated
ones: what a refit of kOverlapDecodeRatePerSm / kOverlapDecodeRateMax compares (session 27 fitted
them by hand on an H100; benchmarks/RESULTS.md)."""

import argparse
import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from common import CASES_BY_NAME  # noqa: E402

from mixed_attn.plan_info import field, make_config  # noqa: E402
from mixed_attn.testing import batch_indptrs  # noqa: E402

H200 = dict(device_kind=1, device_arch=90, num_sms=132, device_sm90_extend=1, device_tma_encoder=1)
MODE_SPLIT, MODE_AUTO = 0, 2


def plan(case, **request):
    ext = [e for _, e in case.extend_rows] + [1] * len(case.decode_seq_lens)
    pre = [p for p, _ in case.extend_rows] + [s - 1 for s in case.decode_seq_lens]
    meta = torch.zeros(1 << 22, dtype=torch.int32)
    cfg = make_config("cpu", 16, case.num_qo_heads, case.num_kv_heads, case.head_dim, **H200, **request)
    return torch.ops.mixed_attn.plan(*batch_indptrs(ext, pre, 16, tensors=True), meta, cfg)


def measured(paths):
    """{(case, N): ms} from bench_mixed JSONs (the mean where several runs hold a row): the
    ma_split_leaveN rows, and ma_split rows whose recorded plan names the N the policy chose."""
    runs = {}
    for path in paths:
        for c in json.load(open(path))["cases"]:
            for row, r in c["rows"].items():
                if "ms" not in r:
                    continue
                if row.startswith("ma_split_leave"):
                    n = int(row[len("ma_split_leave") :])
                elif row == "ma_split" and "extend_leave_sms" in (r.get("plan") or {}):
                    n = r["plan"]["extend_leave_sms"]
                else:
                    continue
                runs.setdefault((c["name"], n), []).append(r["ms"])
    return {k: sum(v) / len(v) for k, v in runs.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="*", help="bench_mixed JSONs with ma_split_leaveN rows")
    ap.add_argument("--cases", default="A,B,C,D,E,F,G,I,J,K")
    ap.add_argument("--leave", default="0,16,22,33,42,44,52,55,66,88")
    args = ap.parse_args()
    leaves = [int(n) for n in args.leave.split(",")]
    ms = measured(args.json)
    print("| case | policy N | " + " | ".join(f"N={n}" for n in leaves) + " |")
    print("|---|---:|" + "---:|" * len(leaves))
    for name in args.cases.split(","):
        case = CASES_BY_NAME[name]
        chosen = field(plan(case, mode=MODE_SPLIT), "extend_leave_sms")
        est = {n: field(plan(case, mode=MODE_AUTO, extend_leave_sms=n), "est_split_ns") for n in leaves}
        cells = []
        for n in leaves:
            cell = f"{est[n] / est[0]:.3f}" if est[0] else "-"
            if (name, n) in ms and (name, 0) in ms:
                cell += f" ({ms[name, n] / ms[name, 0]:.3f})"
            cells.append(cell)
        print(f"| {name} | {chosen} | " + " | ".join(cells) + " |")
    print("\nestimated step / estimated step with none (measured ratio in parentheses, where given)")


if __name__ == "__main__":
    main()
