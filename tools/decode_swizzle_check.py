"""Bank-conflict check of the decode ring's 16-byte-unit swizzle (tc_common.cuh, swizzle()), by
enumerating every 8-lane phase of its three read patterns:

  QK   (both kernels): lanes g in {2p, 2p + 1} x t4 in 0..3 read row (16-key base) + g at chunk
       4 cg + t4;
  VRows (narrow kernel, fp8): lanes g in {2q, 2q + 1} x t4 read row 2 t4 + e at chunk
       (kChunks / 8) g + h;
  ldmatrix.trans (16-bit V): 8 lanes give rows 0..7 at one chunk.

A phase is conflict-free when its 8 16-byte accesses fall in 8 distinct bank groups (row *
kChunks + swizzled chunk, mod 8). Prints, for each row size, the swizzle read from the source
and its result (exit 1 if any pattern conflicts) and, with --count, how many swizzles pass all three; and the TMA
engine's 128-byte swizzle (chunk ^ row), which fails QK's pattern: a ring filled by tensor copies
must reorder QK's chunks (session 32's decode_tma_ring.patch, measured slower in session 33).

    python tools/decode_swizzle_check.py [--count]
"""

import itertools
import os
import re
import sys


def checks(k, s):
    vchunks = k // 8

    def qk():
        return all(
            len({((cg * 4 + t4) ^ s[(base + g) % 8]) % 8 for g in (2 * p, 2 * p + 1) for t4 in range(4)}) == 8
            for base in (0, 8)
            for p in range(4)
            for cg in range(k // 4)
        )

    def vrows():
        return all(
            len({((vchunks * g + h) ^ s[(2 * t4 + e) % 8]) % 8 for g in (2 * q, 2 * q + 1) for t4 in range(4)}) == 8
            for e in (0, 1)
            for q in range(4)
            for h in range(vchunks)
        )

    def ldmatrix():
        return all(len({(c ^ s[r]) % 8 for r in range(8)}) == 8 for c in range(k))

    return qk(), vrows(), ldmatrix()


def source_swizzle(k):
    """swizzle<k>() read from csrc/cuda/decode/tc_common.cuh: its return expressions are Python too."""
    src = open(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "csrc", "cuda", "decode", "tc_common.cuh")
    ).read()
    m = re.search(r"if constexpr \(kChunks == %d\) return (.*?);" % k, src)
    if m is None:
        raise ValueError(f"tc_common.cuh: no swizzle for kChunks == {k}")
    return [eval(m.group(1), {}, {"r": r}) for r in range(8)]  # noqa: S307 (our own source)


if __name__ == "__main__":
    ok = True
    print("chunks  swizzle                    (QK, VRows, ldmatrix)")
    for k in (8, 16, 32):
        s = source_swizzle(k)
        result = checks(k, s)
        ok = ok and all(result)
        print(f"{k:6d}  source {s}  {result}")
        if "--count" in sys.argv:
            n = sum(all(checks(k, s)) for s in itertools.product(range(8), repeat=8) if s[0] == 0)
            print(f"{k:6d}  swizzles with s(0) = 0 passing all three: {n}")
    print(f"the TMA engine's 128-byte swizzle (8-chunk rows): {checks(8, list(range(8)))}")
    sys.exit(0 if ok else 1)
