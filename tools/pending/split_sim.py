"""A processor-sharing model of a decode launch, to fit a split rule on (session 36).

Each stage-1 CTA streams its split's K/V plus a fixed cost (FIXED_KEYS keys' worth); at most
SLOTS run at once and start in launch order (split, kv head, row) as earlier ones end; the
running ones share BW, none faster than CTA_CAP (a CTA alone on its SM). On an H100 (BW 3.12
TB/s, CTA_CAP ~55 GB/s, FIXED_KEYS ~18-25) it ranks E's measured chunks (benchmarks/RESULTS.md,
session 36: 704 keys 1.123 ms of stage 1, 2048 1.104, 6144 1.102) where the planner's wave rule
(waves x the longest split) prefers the finest; it ignores HBM's loss at low concurrency, which
session 11's equal-length cases show (384 CTAs in 1.45 waves slower than 256 in 0.97), so it is
a tool to read the sweep with, not the rule.
Usage: python3 tools/pending/split_sim.py [CASE] (a bench_mixed case's decode rows; default E)"""

import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
from common import ALL_CASES  # noqa: E402

BW, SLOTS, KEY_BYTES = 3.12e12, 264, 512  # H100 read rate, 132 SMs x 2, one kv head's K+V at d=128


def launch_ms(lens, kv_heads, chunk, fixed_keys, cta_cap, max_splits=32):
    """Modelled time of a launch splitting each row in equal parts of at most `chunk` keys."""
    parts = []
    for keys in lens:
        n = min(max(1, math.ceil(keys / chunk)), max_splits)
        c = math.ceil(keys / n / 16) * 16
        parts.append([min(c, keys - i * c) for i in range(n)])
    ctas = [(p[s] + fixed_keys) * KEY_BYTES for s in range(max(map(len, parts)))
            for _ in range(kv_heads) for p in parts if s < len(p)]
    t, nxt, running = 0.0, min(SLOTS, len(ctas)), ctas[:SLOTS]
    while running:
        rate = min(cta_cap, BW / len(running))
        step = min(running)
        t += step / rate
        running = [b - step for b in running if b - step > 1e-6]
        while len(running) < SLOTS and nxt < len(ctas):
            running.append(ctas[nxt])
            nxt += 1
    return t * 1e3, len(ctas)


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "E"
    case = next(c for c in ALL_CASES if c.name == name)
    for cap in (27.5e9, 55e9):
        for chunk in (704, 1024, 2048, 4096, 6144, 16384):
            cols = "  ".join("F=%d %.4f ms" % (f, launch_ms(case.decode_seq_lens, case.num_kv_heads, chunk, f, cap)[0])
                             for f in (0, 18, 64))
            print(f"cap {cap / 1e9:.0f} GB/s  chunk {chunk:5d}  {cols}")


if __name__ == "__main__":
    main()
