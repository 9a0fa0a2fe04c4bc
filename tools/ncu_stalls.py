"""Summarise Nsight Compute's per-instruction stall samples of one kernel (lab tool, issue 13).

    ncu --import REP --page source --csv --print-source sass > ours_sass.csv
    python3 tools/ncu_stalls.py ours_sass.csv [other_sass.csv ...] [--top 12]

For each CSV (the source page of a report collected with `--section SourceCounters`), prints the
samples and executed instructions, the stall reasons' shares, the samples of the instruction
classes that tell a warp-specialised attention kernel's time apart (waits for wgmma completion,
wgmma issues, exponentials, mbarrier try-wait loops, shuffles, local memory), and the
instructions with the most samples. Several CSVs side by side compare lab builds of one kernel
(tools/pending/ncu_extend.sh writes them).
"""

import argparse
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"

# Instruction classes by SASS opcode (substring of the Source column).
CLASSES = [
    ("wgmma wait (WARPGROUP.DEPBAR)", ("WARPGROUP.DEPBAR",)),
    ("wgmma issue (HGMMA)", ("HGMMA",)),
    ("wgmma arrive / fence", ("WARPGROUP.ARRIVE", "FENCE.VIEW.ASYNC")),
    ("exponentials (MUFU.EX2)", ("MUFU.EX2",)),
    ("mbarrier try-wait (SYNCS.PHASECHK)", ("SYNCS.PHASECHK",)),
    ("named / CTA barriers (BAR)", ("BAR.SYNC", "BAR.ARV", "BAR.RED")),
    ("shuffles (SHFL)", ("SHFL",)),
    ("local memory (LDL / STL)", ("LDL", "STL")),
    ("copies (LDGSTS / UTMALDG)", ("LDGSTS", "UTMALDG", "UBLKCP")),
]


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # Row 0 names the kernel; row 1 is the header.
    header = rows[1]
    col = {name: i for i, name in enumerate(header)}

    def num(row, name):
        try:
            return float(row[col[name]].replace(",", ""))
        except (KeyError, IndexError, ValueError):
            return 0.0

    data = rows[2:]
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    return {
        "kernel": rows[0][1] if len(rows[0]) > 1 else rows[0][0],
        "rows": [
            (r[col["Source"]].strip(), num(r, SAMPLES), num(r, EXECUTED), {k[6:]: num(r, k) for k in reasons})
            for r in data
        ],
    }


def summarise(path, top):
    k = read(path)
    rows = k["rows"]
    total = sum(s for _, s, _, _ in rows) or 1.0
    executed = sum(e for _, _, e, _ in rows)
    print(f"== {path}\n   {k['kernel'][:110]}")
    print(f"   {total:.0f} samples, {executed:.3g} warp instructions executed, {len(rows)} SASS lines")
    by_reason = {}
    for _, _, _, reasons in rows:
        for name, v in reasons.items():
            by_reason[name] = by_reason.get(name, 0.0) + v
    ranked = sorted(by_reason.items(), key=lambda kv: -kv[1])[:10]
    print("   reasons: " + "  ".join(f"{name} {v / total:.1%}" for name, v in ranked))
    for label, opcodes in CLASSES:
        s = sum(smp for src, smp, _, _ in rows if any(op in src for op in opcodes))
        e = sum(ex for src, _, ex, _ in rows if any(op in src for op in opcodes))
        print(f"   {label:38s} {s:8.0f} samples ({s / total:5.1%})  {e:12.0f} executed")
    print(f"   top {top} instructions by samples (line, share, main reasons, executed):")
    order = sorted(range(len(rows)), key=lambda i: -rows[i][1])[:top]
    for i in sorted(order):
        src, s, e, reasons = rows[i]
        main = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
        why = " ".join(f"{name}:{v:.0f}" for name, v in main if v)
        print(f"   {i:5d} {s / total:6.2%} {src[:56]:56s} {why}  ex={e:.0f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)
    for path in args.csv:
        summarise(path, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
