"""Bank-conflict check of the decode ring's 16-byte-unit swizzle (tc_common.cuh, swizzle()), by
enumerating every 8-lane phase of its three read patterns (decode_v_ldmatrix.patch's claim):

  QK   (both kernels): lanes g in {2p, 2p + 1} x t4 in 0..3 read row (16-key base) + g at chunk
       4 cg + t4;
  VRows (narrow kernel, fp8): lanes g in {2q, 2q + 1} x t4 read row 2 t4 + e at chunk
       (kChunks / 8) g + h;
  ldmatrix.trans (16-bit V, the patch): 8 lanes give rows 0..7 at one chunk.

A phase is conflict-free when its 8 16-byte accesses fall in 8 distinct bank groups (row *
kChunks + swizzled chunk, mod 8). Prints, for each row size, the present and the patch's swizzle
(copied from the sources by hand: keep them in step) and how many swizzles pass all three; and
the TMA engine's 128-byte swizzle (chunk ^ row within 128-byte rows: a 16-chunk row lands as two
8-chunk boxes), which a ring filled by tensor copies would have to read: it fails QK's pattern
(lanes 2p and 2p + 1 read the same four chunks of rows that differ in bit 0), so such a ring
reads K by ldmatrix too, or (decode_tma_ring.patch) takes even chunks for one chunk group and odd
ones for the next in QK's reads: tma_checks() checks that order (and that it covers every chunk).

    python tools/pending/decode_swizzle_check.py
"""

import itertools


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


def tma_checks(k):
    """decode_tma_ring.patch's layout: a row of k chunks is k / 8 column blocks of 128 bytes, chunk c
    of row r at bank group (c % 8) ^ (r % 8) (the TMA engine's 128-byte swizzle, 1024-byte aligned
    blocks); the QK reads of chunk group cg take chunk 8 (cg // 2) + 2 t4 + cg % 2 in lane column t4."""

    def bank(r, c):
        return (c % 8) ^ (r % 8)

    def qk_chunk(cg, t4):
        return 8 * (cg // 2) + 2 * t4 + cg % 2

    qk = all(
        len({(qk_chunk(cg, t4) // 8, bank(base + g, qk_chunk(cg, t4))) for g in (2 * p, 2 * p + 1) for t4 in range(4)})
        == 8
        and len({bank(base + g, qk_chunk(cg, t4)) for g in (2 * p, 2 * p + 1) for t4 in range(4)}) == 8
        for base in (0, 8)
        for p in range(4)
        for cg in range(k // 4)
    )
    # every d of the row read exactly once per row over the chunk groups
    cover = sorted(qk_chunk(cg, t4) for cg in range(k // 4) for t4 in range(4)) == list(range(k))
    ldm = all(len({bank(r, c) for r in range(8)}) == 8 for c in range(k))
    return qk and cover, ldm


def present(k, r):
    if k == 8:
        return (((r >> 1) & 1) << 1) | ((((r >> 2) ^ r) & 1) << 2)
    if k == 16:
        return ((r >> 1) & 1) | ((((r >> 2) ^ r) & 1) << 2)
    return ((r >> 1) & 3) | ((r & 1) << 2)


def patched(k, r):
    if k == 8:
        return ((r >> 2) & 1) | (((r >> 1) & 1) << 1) | ((((r >> 2) ^ r) & 1) << 2)
    if k == 16:
        return ((r >> 1) & 1) | (((r >> 2) & 1) << 1) | ((((r >> 2) ^ r) & 1) << 2)
    return ((r >> 1) & 3) | ((r & 1) << 2)


if __name__ == "__main__":
    print("chunks  swizzle                    (QK, VRows, ldmatrix)")
    for k in (8, 16, 32):
        for name, f in (("present", present), ("patched", patched)):
            s = [f(k, r) for r in range(8)]
            print(f"{k:6d}  {name} {s}  {checks(k, s)}")
        n = sum(all(checks(k, s)) for s in itertools.product(range(8), repeat=8) if s[0] == 0)
        print(f"{k:6d}  swizzles with s(0) = 0 passing all three: {n}")
    print(f"TMA 128-byte swizzle (8-chunk boxes): {checks(8, list(range(8)))}")
    print("TMA layout, QK chunk order of decode_tma_ring.patch (KvRing::qk_chunk), ldmatrix.trans V:")
    for k in (8, 16, 32):
        print(f"{k:6d}  (QK, ldmatrix) {tma_checks(k)}")
