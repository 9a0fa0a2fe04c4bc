"""Where an sm_90a extend item's time goes: per (CTA, item) phase timestamps (lab tool, GPU only).

Needs a build with the kernel's timeline stamps (csrc/cuda/extend/sm90/timeline.cuh):
    NINJA_JOBS=16 bash scripts/build_inplace.sh "-DCMAKE_CUDA_FLAGS=-DMA_SM90_TIMELINE=1"
    python3 tools/sm90_timeline.py [--cases P,B] [--persistent 1,0] [--rows 192,128] [--json OUT.json]
Per case, launch kind (persistent or one CTA per item) and tile shape (the kernel's 192 or 128
rows at head dim 128: extend_block_rows) it runs the extend row once warm, reads
the records back through ctypes (ma_sm90_timeline_hd128 in _C.so), and prints, in microseconds,
the median over items of each phase of the consumers and the producer:
    q_wait    consumer start -> the first pass's Q has landed
    first_s   -> the first S tile is in registers
    main      -> the last pass's last P V is done (the keys)
    epilogue  -> the last pass's output is stored
    gap       the end of the CTA's previous item -> this item's consumer start (persistent CTAs)
    p_q, p_kv producer start -> Q issued / first K tile issued
    q_issue   consumer start -> the producer has issued the item's Q (negative: issued before)
    q_copy    the producer has issued Q -> the consumer has seen it land
and the median per-key cost of `main` (us / key), so the fixed part of an item is what the
phases add beyond keys x per-key. The stamps time one thread of each role (consumer warpgroup 1's
first lane, producer thread 0); the other warpgroups may lag by up to the ring's depth.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

# timeline.cuh: Sm90TimelineRecord = 4 x uint32 + (kTlNumEvents + 1) x uint64, kTlNumEvents = 9.
EVENTS = ["p_start", "p_q", "p_kv", "p_end", "c_start", "c_q", "c_first_s", "c_main", "c_end"]
CAPACITY = 1 << 15
ROUNDS = 32


class Record(ctypes.Structure):
    _fields_ = [("cta", ctypes.c_uint32), ("sm", ctypes.c_uint32), ("item", ctypes.c_uint32),
                ("valid", ctypes.c_uint32), ("t", ctypes.c_uint64 * (len(EVENTS) + 1))]


CASES = {"P": ([2048], [0]), "P-512": ([512], [0]), "B": ([4096], [4096]), "D": ([1024], [16384]),
         "fold64": ([2048] + [1] * 64, [0] + [4096] * 64)}


def item_keys(info, meta, head_groups):
    """Keys of each item (tile x head group) of a plan, in item order."""
    from mixed_attn.plan_info import field, unpack_meta

    m = unpack_meta(info, meta.cpu())
    tiles, qo, sl = m["extend_tiles"], m["qo_indptr"], m["seq_lens"]
    tt = field(info, "extend_tile_tokens")
    keys = []
    for row, q0 in tiles.tolist():
        ext = int(qo[row + 1] - qo[row])
        k = int(sl[row]) - ext + min(q0 + tt, ext)
        keys += [k] * head_groups
    return keys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="P,B,fold64")
    ap.add_argument("--persistent", default="1,0")
    ap.add_argument("--rows", default="192", help="tile shapes (extend_block_rows) to time, e.g. 192,128")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import mixed_attn
    from mixed_attn.testing import OpExtend, make_batch

    lib_c = ctypes.CDLL(os.path.join(os.path.dirname(mixed_attn.__file__), "_C.so"))
    try:
        read = lib_c.ma_sm90_timeline_hd128
    except AttributeError:
        sys.exit("this _C.so has no timeline: build with -DMA_SM90_TIMELINE=1 (see the docstring)")
    read.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib = OpExtend()
    hq, hkv, d = 32, 8, 128
    out_rows = []
    for name in args.cases.split(","):
        ext, pre = CASES[name]
        b = make_batch(ext, pre, hq, hkv, d, 16, dtype=torch.bfloat16, device="cuda", seed=0, spare_pages=16)
        out = torch.empty_like(b.q)
        for pers, rows_ in ((int(x), int(r)) for x in args.persistent.split(",") for r in args.rows.split(",")):
            info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, 16, hq, hkv, d, extend_kv_splits=1,
                                  extend_persistent=pers, extend_block_rows=rows_,
                                  extend_item_parts=1)  # whole items: one record per item
            for _ in range(3):
                lib.run(info, meta, b.q, b.k_cache, b.v_cache, b.kv_indices, out)
            torch.cuda.synchronize()
            assert read(None, 0, 1) == 0
            lib.run(info, meta, b.q, b.k_cache, b.v_cache, b.kv_indices, out)
            torch.cuda.synchronize()
            recs = (Record * CAPACITY)()
            assert read(ctypes.addressof(recs), CAPACITY, 0) == 0
            keys = item_keys(info, meta, hq // 4)
            rows = [r for r in recs if r.valid]
            t0 = min(min(r.t[i] for i in range(len(EVENTS)) if r.t[i]) for r in rows)
            per_cta = {}
            for i, r in enumerate(recs):
                if r.valid:
                    per_cta.setdefault(r.cta, []).append((i % ROUNDS, r))
            phases = {k: [] for k in ("q_wait", "first_s", "main", "epilogue", "gap", "p_q", "p_kv", "q_issue",
                                           "q_copy", "per_key")}
            for cta, lst in per_cta.items():
                lst.sort(key=lambda x: x[0])
                prev_end = None
                for _, r in lst:
                    t = dict(zip(EVENTS, r.t))
                    us = lambda a, z: (t[z] - t[a]) / 1000.0  # noqa: E731
                    phases["q_wait"].append(us("c_start", "c_q"))
                    phases["first_s"].append(us("c_q", "c_first_s"))
                    phases["main"].append(us("c_first_s", "c_main"))
                    phases["epilogue"].append(us("c_main", "c_end"))
                    phases["p_q"].append(us("p_start", "p_q"))
                    phases["p_kv"].append(us("p_start", "p_kv"))
                    phases["q_issue"].append((t["p_q"] - t["c_start"]) / 1000.0)  # globaltimer: one clock
                    phases["q_copy"].append(us("p_q", "c_q"))
                    phases["per_key"].append(us("c_first_s", "c_main") / max(1, keys[r.item]))
                    if prev_end is not None:
                        phases["gap"].append((t["c_start"] - prev_end) / 1000.0)
                    prev_end = t["c_end"]
            span = (max(r.t[EVENTS.index("c_end")] for r in rows) - t0) / 1000.0
            med = {k: (statistics.median(v) if v else None) for k, v in phases.items()}
            print(f"{name:7s} rows={rows_} persistent={pers} ctas={len(per_cta):4d} items={len(rows):5d} "
                  f"span {span:8.1f} us  "
                  + "  ".join(f"{k} {v:.4f}" if k == "per_key" else f"{k} {v:.2f}" for k, v in med.items()
                              if v is not None), flush=True)
            out_rows.append(dict(case=name, rows=rows_, persistent=pers, ctas=len(per_cta), items=len(rows),
                                 span_us=span, median=med))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out_rows, f, indent=1)


if __name__ == "__main__":
    main()
