"""Lab probe for issue 14 (docs/overlap_design.md, "Session 19"): does an extend CTA stream
extra HBM bytes beside its own K/V copies without slowing its math?

Needs a build with -DMA_SM90_LAB_STREAM=1 (csrc/cuda/extend/sm90/lab_stream.cuh): the sm_90a
kernel's producer then issues MA_LAB_STREAM_COPIES bulk copies of 16 KB after each K/V tile, from
pseudo-random places of the whole K cache into scratch shared memory no one reads. The cache here
is padded with spare pages to CACHE_GB (far past the 50 MB L2), so those reads come from HBM.

Per case and copy count: the extend time, its slowdown against no copies, and the bytes the
copies moved (K/V tiles of the launch x copies x 16 KB, the tiles counted from the plan the way the
kernel walks them) per ms of the launch: the aggregate and per-SM stream rate beside the extend.
The fused step needs case B's decode half (about 2.15 GB) under B's extend: ~2.8 TB/s.

--nonblock (session 20's variant, MA_LAB_STREAM_NONBLOCK=1): a copy whose slot is still busy is
not issued and the tile's remaining copies are dropped, so the producer never waits on its own
stream; the bytes then come from the kernel's count of the copies it issued
(ma_lab_stream_issued, read after one launch). Build with -DMA_SM90_LAB_STREAM_SLOTS=N and
-DMA_SM90_LAB_STREAM_KB=K for another ring, and pass the same --kb here.
"""

import argparse
import ctypes
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from bench_extend import CASES, bench_ms  # noqa: E402
from mixed_attn.plan_info import field  # noqa: E402
from mixed_attn.testing import OpExtend, make_batch  # noqa: E402

STREAM_BYTES = 16384  # kLabStreamBytes (--kb)
KV_TILE_KEYS = 128  # the sm_90a kernel's kBlockN at head dim 128


def kv_tiles(ext, prefix, tile_tokens, head_groups):
    """K/V tiles the launch copies: every (query tile, head group) item over its causal range."""
    total = 0
    for q0 in range(0, ext, tile_tokens):
        kv_hi = prefix + min(ext, q0 + tile_tokens)
        total += math.ceil(kv_hi / KV_TILE_KEYS)
    return total * head_groups


def copy_ms():
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return bench_ms(lambda: dst.copy_(src))


def issued_copies(read, fn):
    """Copies the kernel issued in one launch of fn (its counter, reset first)."""
    count = ctypes.c_ulonglong(0)
    assert read(None, 1) == 0
    fn()
    torch.cuda.synchronize()
    assert read(ctypes.byref(count), 0) == 0
    return count.value


def probe_case(lib, name, copy_counts, cache_gb, sms, read=None):
    ext, prefix, hq, hkv, d, *page = CASES[name]
    assert d == 128, "the probe is built at head dim 128 only"
    page_size = page[0] if page else 16
    page_bytes = page_size * hkv * d * 2
    spare = max(64, int(cache_gb * 2**30 / page_bytes))
    b = make_batch([ext], [prefix], hq, hkv, d, page_size, device="cuda", seed=0, spare_pages=spare)
    out = torch.empty_like(b.q)
    info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, page_size, hq, hkv, d)
    tiles = kv_tiles(ext, prefix, field(info, "extend_tile_tokens"), hkv)  # GQA groups pack whole: hkv items

    def fn():
        lib.run(info, meta, b.q, b.k_cache, b.v_cache, b.kv_indices, out)

    base = None
    for copies in copy_counts:
        os.environ["MA_LAB_STREAM_COPIES"] = str(copies)
        fn()
        torch.cuda.synchronize()
        ms = bench_ms(fn)
        base = base or ms
        gb = tiles * copies * STREAM_BYTES / 1e9
        if read is not None:  # the bytes the copies actually moved
            gb = issued_copies(read, fn) * STREAM_BYTES / 1e9
        print(
            f"{name:6s} {copies:6d} {ms:8.3f} {ms / base:7.3f} {gb:7.3f} {gb / ms:6.2f} {gb / ms * 1e3 / sms:8.1f}",
            flush=True,
        )
    os.environ.pop("MA_LAB_STREAM_COPIES", None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="B,D")
    ap.add_argument("--copies", default="0,1,2,3,4,6")
    ap.add_argument("--cache-gb", type=float, default=1.0, help="K cache size (V the same)")
    ap.add_argument("--nonblock", action="store_true", help="a busy slot drops the tile's remaining copies")
    ap.add_argument("--kb", type=int, default=16, help="the build's MA_SM90_LAB_STREAM_KB")
    args = ap.parse_args()
    global STREAM_BYTES
    STREAM_BYTES = args.kb * 1024
    read = None
    if args.nonblock:
        import mixed_attn

        os.environ["MA_LAB_STREAM_NONBLOCK"] = "1"
        read = ctypes.CDLL(os.path.join(os.path.dirname(mixed_attn.__file__), "_C.so")).ma_lab_stream_issued
        read.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib = OpExtend()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # The HBM copy ceiling in the same run.
    print(f"copy 1 GiB: {2 * 2**30 / copy_ms() / 1e6:.0f} GB/s (read + write; copy_ms is in ms)")
    print(f"{'case':6s} {'copies':>6s} {'ms':>8s} {'/ none':>7s} {'GB':>7s} {'TB/s':>6s} {'GB/s/SM':>8s}")
    for name in args.cases.split(","):
        probe_case(lib, name, [int(c) for c in args.copies.split(",")], args.cache_gb, sms, read)


if __name__ == "__main__":
    main()
