"""After `sweep_extend.py DIR s0,w3`: CMake flags that give each head dim (64, 128) the consumer
warpgroup count (2 or 3) that was faster on cases B + D, counting w3 only if its tests passed.
Usage: python3 scripts/pick_sm90_wgs.py DIR  -> prints e.g. -DMA_SM90_D128_WGS=3 (or nothing)."""
import json
import os
import sys

out = sys.argv[1]
log = open(os.path.join(out, "tests.log")).read()
w3_ok = "==== w3" in log and " passed" in log.split("==== w3")[1].split("====")[0] \
    and "failed" not in log.split("==== w3")[1].split("====")[0]
flags = []
if w3_ok:
    rows = {name: {r["case"]: r["ms"] for r in json.load(open(os.path.join(out, f"sweep_{name}.json")))["rows"]}
            for name in ("s0", "w3")}
    for d, suffix in ((64, "-d64"), (128, "")):
        t2 = rows["s0"]["B" + suffix] + rows["s0"]["D" + suffix]
        t3 = rows["w3"]["B" + suffix] + rows["w3"]["D" + suffix]
        print(f"d{d}: 2 warpgroups {t2:.3f} ms, 3 warpgroups {t3:.3f} ms (B + D)", file=sys.stderr)
        if t3 < 0.98 * t2:
            flags.append(f"-DMA_SM90_D{d}_WGS=3")
else:
    print("w3 did not pass its tests: keeping 2 warpgroups", file=sys.stderr)
print(" ".join(flags))
