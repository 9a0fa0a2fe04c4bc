"""Shared pieces of the mixed_attn benchmarks: cases, byte/FLOP counts, steps (the cases' rows
built by mixed_attn.testing.make_batch), timing, ceilings, environment description and table
formatting.

Torch-only on purpose (Triton and mixed_attn are imported lazily, inside the functions that
need them), so focused micro-benchmarks (bench_decode.py, bench_extend.py) can import the case
definitions on any machine:

    from common import BASELINE_CASES, make_step, Timer, measure_ceilings

Conventions
-----------
* A case is one mixed step: extend rows (prefix_len, extend_len) first, then decode rows
  (seq_len, one new token each): sglang's order (decodes last).
* Decode KV bytes = sum over decode rows of seq_len * Hkv * D * 2 (K and V) * elem_bytes: the
  least a decode kernel must read. Extend FLOPs = 4 * D * Hq * (attended (query, key) pairs,
  causal): two matmuls (QK^T, PV) of 2 FLOPs per multiply-add.
* floor = decode bytes / read-only bandwidth + extend FLOPs / matmul rate (serial floor; the
  copy-bandwidth version uses the copy figure instead). All ceilings are measured in the same
  process (measure_ceilings).
"""

import dataclasses
import datetime
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time

import torch

# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """One mixed step. extend_rows: ((prefix_len, extend_len), ...); decode_seq_lens: seq_len of
    each decode row (its cached prefix plus the one new token)."""

    name: str
    label: str
    num_qo_heads: int
    num_kv_heads: int
    head_dim: int
    extend_rows: tuple = ()
    decode_seq_lens: tuple = ()
    note: str = ""

    @property
    def shape(self):
        return f"{self.num_qo_heads}/{self.num_kv_heads}/{self.head_dim}"

    @property
    def title(self):
        return f"{self.name} {self.shape}: {self.label}"

    def rows(self):
        """(prefix_len, extend_len) of every row, extend rows first, decode rows last."""
        return list(self.extend_rows) + [(s - 1, 1) for s in self.decode_seq_lens]

    @property
    def num_rows(self):
        return len(self.extend_rows) + len(self.decode_seq_lens)

    @property
    def num_tokens(self):
        return sum(e for _, e in self.extend_rows) + len(self.decode_seq_lens)

    def decode_kv_bytes(self, elem_bytes=2):
        return sum(self.decode_seq_lens) * self.num_kv_heads * self.head_dim * 2 * elem_bytes

    def extend_kv_bytes(self, elem_bytes=2):
        """KV an extend kernel must read at least once (each row's whole sequence)."""
        tokens = sum(p + e for p, e in self.extend_rows)
        return tokens * self.num_kv_heads * self.head_dim * 2 * elem_bytes

    def extend_flops(self, window_left=-1):
        pairs = sum(attended_pairs(p, e, window_left) for p, e in self.extend_rows)
        return 4.0 * self.head_dim * self.num_qo_heads * pairs

    def cache_bytes(self, elem_bytes=2, page_size=16):
        pages = sum(-(-(p + e) // page_size) for p, e in self.rows())
        return pages * page_size * self.num_kv_heads * self.head_dim * 2 * elem_bytes

    def scaled(self, factor, name=None, max_decode_rows=None, heads=None):
        """A smaller copy (lengths divided by factor) for CPU smoke runs."""
        s = lambda n: max(1, int(n // factor))  # noqa: E731
        dec = tuple(max(2, s(x)) for x in self.decode_seq_lens)
        if max_decode_rows is not None:
            dec = dec[:max_decode_rows]
        hq, hkv, d = heads or (self.num_qo_heads, self.num_kv_heads, self.head_dim)
        return Case(name or self.name, f"{self.label} (/{factor})", hq, hkv, d,
                    tuple((s(p) if p else 0, s(e)) for p, e in self.extend_rows), dec, self.note)


def attended_pairs(prefix_len, extend_len, window_left=-1):
    """(query, key) pairs a causal extend row attends to: query i (at prefix_len + i) sees keys
    0..prefix_len+i, or only the last window_left+1 of them."""
    if window_left < 0:
        return extend_len * prefix_len + extend_len * (extend_len + 1) // 2
    return sum(min(prefix_len + i + 1, window_left + 1) for i in range(extend_len))


def uniform_lens(n, lo, hi, seed):
    # Case E's seed is chosen so its decode rows hold 841,487 tokens: baselines.md's floorD of
    # 0.811 ms at 4.25 TB/s (its own draw is not recorded), so its peer numbers compare.
    r = random.Random(seed)
    return tuple(r.randint(lo, hi) for _ in range(n))


K = 1024
# The eight cases of /work/shared/baselines.md, exactly (page size 16, bf16, pages scattered).
BASELINE_CASES = [
    Case("A", "1x512 new + 128 dec @4k", 32, 8, 128, ((0, 512),), (4 * K,) * 128),
    Case("B", "1x4096 new over 4k prefix + 64 dec @8k", 32, 8, 128, ((4 * K, 4 * K),), (8 * K,) * 64),
    Case("C", "1x256 new + 256 dec @2k", 32, 8, 128, ((0, 256),), (2 * K,) * 256),
    Case("D", "1x1024 new over 16k prefix + 32 dec @32k", 32, 8, 128, ((16 * K, 1 * K),),
         (32 * K,) * 32),
    Case("E", "1024 new over 1000 + 2048 new + 96 dec @ U(512..16k)", 32, 8, 128,
         ((1000, 1024), (0, 2048)), uniform_lens(96, 512, 16 * K, seed=13699)),
    Case("F", "1x2048 new + 128 dec @8k", 8, 1, 128, ((0, 2 * K),), (8 * K,) * 128),
    Case("G", "1x2048 new + 64 dec @4k", 16, 8, 256, ((0, 2 * K),), (4 * K,) * 64),
    Case("H", "decode only, 128 dec @4k", 32, 8, 128, (), (4 * K,) * 128),
]
# Others that tell something the eight do not.
EXTRA_CASES = [
    Case("I", "long: 1x2048 new over 64k prefix + 8 dec @128k", 32, 8, 128, ((64 * K, 2 * K),),
         (128 * K,) * 8, note="long contexts"),
    Case("J", "64 small extends (32 new over 2k) + 64 dec @4k", 32, 8, 128,
         ((2 * K, 32),) * 64, (4 * K,) * 64, note="many small extends"),
    Case("K", "head dim 64: 1x1024 new + 128 dec @4k", 32, 8, 64, ((0, 1 * K),), (4 * K,) * 128,
         note="head dim 64"),
    Case("L", "2 dec @128k (few long rows: split-KV must fill the GPU)", 32, 8, 128, (),
         (128 * K,) * 2, note="few long decodes"),
]
ALL_CASES = BASELINE_CASES + EXTRA_CASES
CASES_BY_NAME = {c.name: c for c in ALL_CASES}

# Tiny versions for machines without a GPU (the CPU implementation, smoke tests).
CPU_CASES = [
    Case("A", "1x32 new + 4 dec @200 (CPU-sized A)", 8, 2, 64, ((0, 32),), (200,) * 4),
    Case("B", "1x32 new over 70 prefix + 3 dec @300 (CPU-sized B)", 8, 2, 64, ((70, 32),),
         (300,) * 3),
    Case("H", "decode only, 8 dec @256 (CPU-sized H)", 8, 2, 64, (), (256,) * 8),
]

# ---------------------------------------------------------------------------------------------
# Peer numbers from /work/shared/baselines.md (H200, 2026-11-30): reference, NOT re-measured.
# ---------------------------------------------------------------------------------------------
REFERENCE_SOURCE = "/work/shared/baselines.md (same H200 model, 2026-11-30)"
REFERENCE_COLUMNS = {
    "sgl_fold": "sglang Triton extend over every row",
    "sgl_split": "sglang Triton extend + split-KV decode",
    "sgl_ext": "sglang extend half",
    "sgl_dec": "sglang decode half",
    "vllm_uni": "vLLM unified attention, one launch",
    "vllm_split": "vLLM unified attention, split launch",
    "fi_fa2_all": "FlashInfer FA2 prefill over every row",
    "fi_fa3_all": "FlashInfer FA3 prefill over every row",
    "fi_dec": "FlashInfer decode (tensor cores), decode rows",
    "fi_fa2_ext": "FlashInfer FA2 prefill, extend rows",
    "fi_fa3_ext": "FlashInfer FA3 prefill, extend rows",
    "fi_fa3_split": "FlashInfer FA3 extend then decode",
    "fi_pod": "FlashInfer POD fused prefill+decode",
    "fi_batchattn": "FlashInfer persistent BatchAttention",
}
_N = None
REFERENCE_MS = {
    # sgl: fold split ext dec | vllm: uni split | FI: fa2_all fa3_all dec fa2_ext fa3_ext
    #                                              fa3_split pod batchattn
    "A": (8.61, 0.914, 0.078, 0.878, 0.796, 0.832,
          0.607, 2.54, 0.507, 0.068, 0.018, 0.521, 0.520, 0.508),
    "B": (10.51, 3.24, 2.38, 0.847, 2.54, 2.45,
          2.14, 3.25, 0.505, 1.34, 0.822, 1.302, 1.767, 1.718),
    "C": (8.68, 0.721, 0.075, 0.699, 0.776, 0.711,
          0.519, 2.68, 0.513, 0.037, 0.013, 0.522, 0.520, 0.506),
    "D": (18.54, 3.61, 2.22, 1.39, 3.55, 4.30,
          3.11, 5.26, 0.978, 0.860, 0.559, 1.514, 1.720, 1.749),
    "E": (14.20, 1.43, 0.381, 1.03, 1.87, 1.66,
          1.81, 4.14, 0.867, 0.237, 0.147, 1.004, 0.969, 1.023),
    "F": (4.33, 0.330, 0.107, 0.220, 0.470, 0.660,
          0.406, 1.27, 0.146, 0.105, 0.038, 0.180, 0.227, 0.169),
    "G": (3.69, 0.963, 0.322, 0.634, 0.957, 1.05,
          0.780, 1.42, 0.507, 0.185, 0.135, 0.634, 0.581, 1.083),
    "H": (8.61, 0.884, _N, 0.879, _N, _N, 0.507, 2.50, 0.509, _N, _N, _N, _N, 0.504),
}


def reference_for(case_name):
    """{column: ms} of the peers measured in baselines.md for this case ({} for other cases)."""
    vals = REFERENCE_MS.get(case_name)
    if vals is None:
        return {}
    assert len(vals) == len(REFERENCE_COLUMNS), case_name
    return {k: v for k, v in zip(REFERENCE_COLUMNS, vals) if v is not None}


def reference_best(case_name):
    """(column, ms) of the fastest whole-step peer configuration in baselines.md."""
    ref = reference_for(case_name)
    whole = ["sgl_split", "vllm_uni", "vllm_split", "fi_fa2_all", "fi_fa3_all", "fi_fa3_split",
             "fi_pod", "fi_batchattn"]
    cand = {k: ref[k] for k in whole if k in ref}
    if case_name == "H" and "fi_dec" in ref:
        cand["fi_dec"] = ref["fi_dec"]
    if not cand:
        return None, None
    k = min(cand, key=cand.get)
    return k, cand[k]


# ---------------------------------------------------------------------------------------------
# Steps: the tensors of one case on a device
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Step:
    case: Case
    q: torch.Tensor            # [T, Hq, D]
    k: torch.Tensor            # [T, Hkv, D] new keys (for runs that save)
    v: torch.Tensor            # [T, Hkv, D]
    k_cache: torch.Tensor      # [num_pages, page_size, Hkv, D]
    v_cache: torch.Tensor
    kv_indices: torch.Tensor   # [total pages] int32, device
    qo_indptr: torch.Tensor    # [B+1] int32, host
    kv_indptr: torch.Tensor    # [B+1] int32, host
    seq_lens: torch.Tensor     # [B] int32, host
    page_size: int
    rows: list                 # (prefix_len, extend_len)

    @property
    def num_extend_rows(self):
        return len(self.case.extend_rows)

    @property
    def device(self):
        return self.q.device

    def sub(self, first, last):
        """Rows first..last-1 as a step of their own (views, indptrs rebased)."""
        qo, kv = self.qo_indptr, self.kv_indptr
        q0, q1, p0, p1 = int(qo[first]), int(qo[last]), int(kv[first]), int(kv[last])
        return Step(self.case, self.q[q0:q1], self.k[q0:q1], self.v[q0:q1], self.k_cache,
                    self.v_cache, self.kv_indices[p0:p1], (qo[first:last + 1] - q0).contiguous(),
                    (kv[first:last + 1] - p0).contiguous(), self.seq_lens[first:last].contiguous(),
                    self.page_size, self.rows[first:last])

    def extend_part(self):
        return self.sub(0, self.num_extend_rows) if self.num_extend_rows else None

    def sliced(self, max_q):
        """The same attention with every row of more than max_q new tokens cut into rows of at most
        max_q (consecutive query tokens; chunk j of a row over prefix p sees p + its end keys, the
        first pages of the row's own page list): every row decode-class, same q, same out layout.
        A row of e new tokens is the same attention as its chunks, since chunk j's tokens are
        causal over the keys before them (issue 14: an extend half served by the decode kernel)."""
        qo, kv, P = self.qo_indptr.tolist(), self.kv_indptr.tolist(), self.page_size
        pages = self.kv_indices.cpu()
        new_qo, new_kv, new_seq, new_rows, new_pages = [0], [0], [], [], []
        for b, (p, e) in enumerate(self.rows):
            for c0 in range(0, max(e, 1), max_q):
                c1 = min(e, c0 + max_q)
                seq = p + c1
                n = -(-seq // P)
                new_pages.append(pages[kv[b]:kv[b] + n])
                new_qo.append(new_qo[-1] + (c1 - c0))
                new_kv.append(new_kv[-1] + n)
                new_seq.append(seq)
                new_rows.append((p + c0, c1 - c0))
            assert new_qo[-1] == qo[b + 1]
        i32 = dict(dtype=torch.int32)
        return Step(self.case, self.q, self.k, self.v, self.k_cache, self.v_cache,
                    torch.cat(new_pages).to(self.kv_indices.device), torch.tensor(new_qo, **i32),
                    torch.tensor(new_kv, **i32), torch.tensor(new_seq, **i32), P, new_rows)

    def decode_part(self):
        n = len(self.rows)
        return self.sub(self.num_extend_rows, n) if n > self.num_extend_rows else None


def make_step(case, device, dtype=torch.bfloat16, kv_dtype=None, page_size=16, seed=0,
              spare_pages=7):
    """The case's rows (extend rows first) as a mixed_attn.testing.make_batch: random q/k/v and
    a random cache (randn, never zeros; in kv_dtype, default dtype) whose pages are scattered at
    random over the pool, generated on the device (a GPU fills gigabytes in milliseconds)."""
    ma, why = import_mixed_attn()
    if ma is None:
        raise NotAvailable(why)
    from mixed_attn.testing import make_batch

    rows = case.rows()
    b = make_batch([e for _, e in rows], [p for p, _ in rows], case.num_qo_heads, case.num_kv_heads,
                   case.head_dim, page_size, dtype=dtype, kv_dtype=kv_dtype, device=device, seed=seed,
                   spare_pages=spare_pages)
    return Step(case, b.q, b.k, b.v, b.k_cache, b.v_cache, b.kv_indices, b.qo_indptr, b.kv_indptr,
                b.seq_lens, page_size, rows)


def gather_row_kv(step, b, dtype=None):
    """Row b's keys and values in position order: [seq_len, Hkv, D] each."""
    p0, p1 = int(step.kv_indptr[b]), int(step.kv_indptr[b + 1])
    s = int(step.seq_lens[b])
    pages = step.kv_indices[p0:p1].long()
    Hkv, D = step.k_cache.shape[2], step.k_cache.shape[3]
    kk = step.k_cache.index_select(0, pages).reshape(-1, Hkv, D)[:s]
    vv = step.v_cache.index_select(0, pages).reshape(-1, Hkv, D)[:s]
    if dtype is not None:
        kk, vv = kk.to(dtype), vv.to(dtype)
    return kk, vv


def reference_output(step, sm_scale=None, max_elems=1 << 27):
    """fp32 attention of every row (causal, no window/cap/sinks) for the sanity column.

    Query chunks keep each score block under max_elems floats, so long rows fit in memory.
    """
    Hq, D = step.q.shape[1], step.q.shape[2]
    Hkv = step.k_cache.shape[2]
    G = Hq // Hkv
    scale = sm_scale or 1.0 / math.sqrt(D)
    out = torch.empty(step.q.shape, dtype=torch.float32, device=step.device)
    for b, (p, e) in enumerate(step.rows):
        q0 = int(step.qo_indptr[b])
        kk, vv = gather_row_kv(step, b, torch.float32)          # [S, Hkv, D]
        S = p + e
        kk = kk.permute(1, 0, 2)                                  # [Hkv, S, D]
        vv = vv.permute(1, 0, 2)
        chunk = max(1, min(e, max_elems // max(1, Hq * S)))
        for c0 in range(0, e, chunk):
            c1 = min(e, c0 + chunk)
            qq = step.q[q0 + c0:q0 + c1].float().reshape(c1 - c0, Hkv, G, D).permute(1, 2, 0, 3)
            s = torch.einsum("hgqd,hkd->hgqk", qq, kk) * scale     # [Hkv, G, c, S]
            pos = torch.arange(p + c0, p + c1, device=step.device)[:, None]
            keys = torch.arange(S, device=step.device)[None, :]
            s.masked_fill_(keys > pos, float("-inf"))
            o = torch.einsum("hgqk,hkd->hgqd", torch.softmax(s, dim=-1), vv)
            out[q0 + c0:q0 + c1] = o.permute(2, 0, 1, 3).reshape(c1 - c0, Hq, D)
    return out


def kernel_us(fn, n=20):
    """Mean GPU time (us) of each kernel one call of fn launches, by kernel name: torch.profiler
    over n calls after one warm call (launch gaps are not in it)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    total = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] = total.get(e.name, 0.0) + e.device_time
    return {name: us / n for name, us in total.items()}


def rel_err(out, ref):
    """||out - ref|| / ||ref|| in fp32 (NaN when out holds NaN: an unwritten element)."""
    o = out.float()
    if torch.isnan(o).any():
        return float("nan")
    return float((o - ref).norm() / ref.norm().clamp_min(1e-30))


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------


class NotAvailable(Exception):
    """A benchmark row that cannot run here; the message says why (printed as 'n/a: ...')."""


class Timer:
    """Median time of a callable, in ms.

    GPU: CUDA events around each call; before each call the L2 is flushed by writing a 256 MB
    buffer (outside the timed region), so every call reads its inputs from HBM. flush_kind="read"
    flushes by reading the buffer instead: the L2 then holds clean lines, where the written ones
    are written back inside the next timed call (about 11 us of HBM traffic on an H200, session 22:
    bench_decode's rows against the kernels' profiler times). graph=True
    captures the callable in a CUDA graph once and times its replays (the launch gaps shrink to
    what one graph launch costs). CPU: time.perf_counter around each call.
    The number of timed calls adapts to the callable: about budget_ms of work, within
    [min_reps, max_reps], after warmup calls.
    """

    def __init__(self, device, budget_ms=200.0, min_reps=10, max_reps=200, warmup=3,
                 flush_bytes=256 << 20, flush_kind="write"):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.budget_ms, self.min_reps, self.max_reps, self.warmup = (
            budget_ms, min_reps, max_reps, warmup)
        if flush_kind not in ("write", "read"):
            raise ValueError(f"flush_kind must be 'write' or 'read', got {flush_kind!r}")
        self.flush_kind = flush_kind
        self.flush_buf = (torch.ones(flush_bytes // 4, dtype=torch.float32, device=self.device)
                          if self.cuda else None)

    def flush(self):
        if self.flush_buf is None:
            return
        if self.flush_kind == "read":
            self.flush_buf.sum()
        else:
            self.flush_buf.fill_(1)

    def time(self, fn, graph=False, flush=True):
        """Returns dict(ms=median, min, p90, reps)."""
        if not self.cuda:
            if graph:
                raise NotAvailable("CUDA graphs need a GPU")
            for _ in range(self.warmup):
                fn()
            t0 = time.perf_counter()
            fn()
            est = (time.perf_counter() - t0) * 1e3
            reps = self._reps(est)
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e3)
            return _stats(ts)

        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize(self.device)
        if (time.perf_counter() - t0) * 1e3 < 100:  # slow callables are warm after one call
            for _ in range(self.warmup - 1):
                fn()
        call = fn
        if graph:
            call = self._capture(fn)
            call()
        torch.cuda.synchronize(self.device)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        call()
        e1.record()
        torch.cuda.synchronize(self.device)
        reps = self._reps(e0.elapsed_time(e1))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            if flush:
                self.flush()
            starts[i].record()
            call()
            ends[i].record()
        torch.cuda.synchronize(self.device)
        return _stats([s.elapsed_time(e) for s, e in zip(starts, ends)])

    def _reps(self, est_ms):
        if est_ms * self.min_reps > 1000.0:  # a very slow row: about one second, at least 3 calls
            return max(3, int(1000.0 / est_ms))
        return int(min(self.max_reps, max(self.min_reps, self.budget_ms / max(est_ms, 1e-3))))

    def _capture(self, fn):
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream(self.device).wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        self._graph = g  # keep it (and its memory pool) alive while timing
        return g.replay


def _stats(ts):
    ts = sorted(ts)
    return {"ms": statistics.median(ts), "min": ts[0], "p90": ts[int(0.9 * (len(ts) - 1))],
            "reps": len(ts)}


def host_time_us(fn, reps=200, warmup=20):
    """Median host wall time of fn in microseconds (for host-only work such as plan())."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


# ---------------------------------------------------------------------------------------------
# Ceilings
# ---------------------------------------------------------------------------------------------

_STREAM_KERNEL = None


def _stream_read_kernel():
    """A Triton kernel that reads a float32 buffer once and writes one float per program."""
    # tl is bound as a module global (not a closure variable): Triton's compiler resolves the
    # names a kernel uses in its module's globals.
    global _STREAM_KERNEL, tl
    if _STREAM_KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def stream_read(x_ptr, out_ptr, BLOCK: tl.constexpr, ITERS: tl.constexpr):
            # No mask: the caller sizes the buffer to whole programs, so loads vectorise.
            pid = tl.program_id(0).to(tl.int64)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            base = pid * BLOCK * ITERS
            for i in range(ITERS):
                offs = base + i * BLOCK + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + offs)
            tl.store(out_ptr + pid, tl.sum(acc, axis=0))

        _STREAM_KERNEL = stream_read
    return _STREAM_KERNEL


_PAGED_KERNEL = None


def _paged_read_kernel():
    """A Triton kernel that reads the K and V pages an index list names, PAGES of them a program,
    each page's words in BLOCK-wide loads, and writes one int32 (the wrapped sum) a program."""
    global _PAGED_KERNEL, tl
    if _PAGED_KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def paged_read(k_ptr, v_ptr, idx_ptr, out_ptr, n_pages, PAGE_WORDS: tl.constexpr, BLOCK: tl.constexpr,
                       PAGES: tl.constexpr):
            pid = tl.program_id(0)
            acc = tl.zeros([BLOCK], dtype=tl.int32)
            for j in range(PAGES):
                i = pid * PAGES + j
                ok = (tl.zeros([BLOCK], dtype=tl.int32) + i) < n_pages  # the last program's tail
                page = tl.load(idx_ptr + tl.minimum(i, n_pages - 1)).to(tl.int64)
                for c in range(PAGE_WORDS // BLOCK):
                    offs = page * PAGE_WORDS + c * BLOCK + tl.arange(0, BLOCK)
                    acc += tl.load(k_ptr + offs, mask=ok, other=0) + tl.load(v_ptr + offs, mask=ok, other=0)
            tl.store(out_ptr + pid, tl.sum(acc, axis=0))

        _PAGED_KERNEL = paged_read
    return _PAGED_KERNEL


def paged_read_fn(k_cache, v_cache, kv_indices):
    """A paged-read ceiling: (fn, out, bytes). fn reads, once each, the K and V pages kv_indices
    names, in its order (a row's pages in turn), one program a few pages, no attention math:
    the bytes and the access pattern of a decode over these pages (pages of a few KB scattered
    over a pool, where the read-only ceiling streams one buffer). out holds one int32 a program
    (the wrapped sum of its words, for a check); bytes counts the words read."""
    num_pages = k_cache.shape[0]
    k = k_cache.contiguous().view(torch.uint8).reshape(num_pages, -1)
    v = v_cache.contiguous().view(torch.uint8).reshape(num_pages, -1)
    page_bytes = k.shape[1]
    if page_bytes % 4 != 0 or (page_bytes // 4) & (page_bytes // 4 - 1) != 0:
        raise ValueError(f"paged read: a page of {page_bytes} bytes is not a power-of-two number of words")
    k, v = k.view(torch.int32), v.view(torch.int32)
    words = page_bytes // 4
    block = min(words, 1024)
    pages = max(1, 32768 // words)  # ~128 KB of K and V a program
    idx = kv_indices.to(device=k.device, dtype=torch.int32).contiguous()
    n = idx.numel()
    grid = ((n + pages - 1) // pages,)
    out = torch.empty(grid[0], dtype=torch.int32, device=k.device)
    kern = _paged_read_kernel()

    def fn():
        kern[grid](k, v, idx, out, n, PAGE_WORDS=words, BLOCK=block, PAGES=pages, num_warps=4)
    return fn, out, 2 * n * page_bytes


def measure_ceilings(device, quick=False, log=print):
    """Copy bandwidth (read+write bytes), read-only bandwidth and bf16 matmul rate, measured here.

    Returns a dict: copy_tbs, read_tbs (best read-only figure), read_triton_tbs, read_sum_tbs,
    matmul_tflops, and how each was measured. Each entry is None (with an *_error) on failure.
    """
    device = torch.device(device)
    cuda = device.type == "cuda"
    timer = Timer(device, budget_ms=60 if quick else 200, min_reps=5, max_reps=50)
    res = {}
    gib = 1 << 30
    nbytes = (2 * gib if not quick else gib // 2) if cuda else 32 << 20

    def big(nb):  # random on the GPU (fast there); a constant on the CPU, where normal_ is slow
        x = torch.empty(nb // 4, dtype=torch.float32, device=device)
        return x.normal_() if cuda else x.fill_(1.25)

    # Copy: dst.copy_(src), counting the bytes read and the bytes written.
    try:
        src = big(nbytes)
        dst = torch.empty_like(src)
        t = timer.time(lambda: dst.copy_(src), flush=False)["ms"]
        res["copy_tbs"] = 2 * nbytes / (t * 1e-3) / 1e12
        res["copy_method"] = f"dst.copy_(src) of {nbytes / gib:.2f} GiB, read+write bytes"
        del src, dst
    except Exception as e:  # noqa: BLE001
        res["copy_tbs"], res["copy_error"] = None, _short(e)
    # Read-only: torch.sum over a big buffer, and a Triton streaming-read kernel.
    rbytes = (4 * gib if not quick else gib) if cuda else 64 << 20
    try:
        x = big(rbytes)
        t = timer.time(lambda: x.sum(), flush=False)["ms"]
        res["read_sum_tbs"] = rbytes / (t * 1e-3) / 1e12
        res["read_sum_method"] = f"torch.sum over {rbytes / gib:.2f} GiB fp32"
        if cuda:
            try:
                kern = _stream_read_kernel()
                BLOCK, ITERS = 4096, 8
                n = x.numel()
                assert n % (BLOCK * ITERS) == 0, "the read buffer must be whole programs"
                grid = (n // (BLOCK * ITERS),)
                part = torch.empty(grid[0], dtype=torch.float32, device=device)
                fn = lambda: kern[grid](x, part, BLOCK=BLOCK, ITERS=ITERS, num_warps=8)  # noqa
                t = timer.time(fn, flush=False)["ms"]
                res["read_triton_tbs"] = rbytes / (t * 1e-3) / 1e12
                res["read_triton_method"] = (f"Triton streaming-read kernel over "
                                             f"{rbytes / gib:.2f} GiB")
            except Exception as e:  # noqa: BLE001
                res["read_triton_tbs"], res["read_triton_error"] = None, _short(e)
        del x
    except Exception as e:  # noqa: BLE001
        res["read_sum_tbs"], res["read_sum_error"] = None, _short(e)
    reads = [v for v in (res.get("read_triton_tbs"), res.get("read_sum_tbs")) if v]
    res["read_tbs"] = max(reads) if reads else None
    # Matmul: bf16 N^3 on random data (zeros run measurably faster).
    n = (8192 if not quick else 4096) if cuda else 256
    mdt = torch.bfloat16 if cuda else torch.float32  # CPU bf16 matmul is very slow
    try:
        a = torch.randn(n, n, device=device, dtype=mdt)
        b = torch.randn(n, n, device=device, dtype=mdt)
        t = timer.time(lambda: a @ b, flush=False)["ms"]
        res["matmul_tflops"] = 2.0 * n ** 3 / (t * 1e-3) / 1e12
        res["matmul_method"] = f"{n}^3 {str(mdt).replace('torch.', '')} matmul, random data"
        del a, b
    except Exception as e:  # noqa: BLE001
        res["matmul_tflops"], res["matmul_error"] = None, _short(e)
    if cuda:
        torch.cuda.empty_cache()
    return res


def triton_cdiv(a, b):
    return -(-a // b)


def ceilings_line(c):
    f = lambda v, u: (f"{v:.2f} {u}" if v >= 0.1 else f"{v:.3g} {u}") if v else "n/a"  # noqa
    return (f"copy {f(c.get('copy_tbs'), 'TB/s')} (read+write), read-only "
            f"{f(c.get('read_tbs'), 'TB/s')} (Triton stream {f(c.get('read_triton_tbs'), 'TB/s')}, "
            f"torch.sum {f(c.get('read_sum_tbs'), 'TB/s')}), "
            f"{'fp32' if 'float32' in c.get('matmul_method', '') else 'bf16'} matmul "
            f"{f(c.get('matmul_tflops'), 'TFLOP/s')}")


def floors_ms(case, ceilings, elem_bytes=2):
    """(floor with the read-only bandwidth, floor with the copy bandwidth, overlapped floor), ms."""
    dec_b = case.decode_kv_bytes(elem_bytes)
    flops = case.extend_flops()
    mm = ceilings.get("matmul_tflops")
    out = []
    for bw in (ceilings.get("read_tbs"), ceilings.get("copy_tbs")):
        if not bw or not mm:
            out.append(None)
        else:
            out.append(dec_b / (bw * 1e12) * 1e3 + flops / (mm * 1e12) * 1e3)
    rd = ceilings.get("read_tbs")
    out.append(max(dec_b / (rd * 1e12), flops / (mm * 1e12)) * 1e3 if rd and mm else None)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------------


def git_commit(override=None):
    if override:
        return override
    env = os.environ.get("MIXED_ATTN_COMMIT")
    if env:
        return env
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                           timeout=10)
        if r.returncode == 0:
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                   cwd=here, capture_output=True, text=True, timeout=10)
            return r.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except Exception:  # noqa: BLE001
        pass
    return "unknown (no git here; pass --commit)"


def describe_env(commit=None):
    cuda = torch.cuda.is_available()
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(commit),
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "num_sms": torch.cuda.get_device_properties(0).multi_processor_count if cuda else None,
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
        "cpu_threads": torch.get_num_threads(),
    }
    try:
        import triton
        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        env["triton"] = None
    return env


def env_line(env):
    dev = env["gpu"] or f"NO GPU (CPU, {env['cpu_threads']} threads)"
    return (f"{env['date']} | commit {env['commit']} | {dev} | torch {env['torch']} | "
            f"triton {env['triton']}")


NO_GPU_BANNER = ("NO GPU: torch.cuda.is_available() is False. Running a small CPU version "
                 "(tiny shapes, the CPU implementation); its times say nothing about GPU "
                 "performance.")

# ---------------------------------------------------------------------------------------------
# Output helpers
# ---------------------------------------------------------------------------------------------


def _short(e, n=110):
    s = f"{type(e).__name__}: {e}".replace("\n", " ")
    return s if len(s) <= n else s[: n - 3] + "..."


short_error = _short


def fmt_ms(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_pct(v):
    return "-" if v is None else f"{100 * v:.0f}%"


def text_table(header, rows, min_width=None):
    """A fixed-width text table (list of lists of str)."""
    cols = len(header)
    w = [len(h) for h in header]
    for r in rows:
        for i in range(cols):
            w[i] = max(w[i], len(str(r[i])))
    if min_width:
        w = [max(x, min_width) for x in w]
    line = lambda r: "  ".join(str(c).ljust(w[i]) if i == 0 else str(c).rjust(w[i])  # noqa: E731
                               for i, c in enumerate(r))
    return "\n".join([line(header), "  ".join("-" * x for x in w)] + [line(r) for r in rows])


def md_table(header, rows):
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    out = ["| " + " | ".join(esc(h) for h in header) + " |",
           "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


class Progress:
    """tqdm on a terminal when installed, else a plain line every 25% (a captured log keeps
    every tqdm redraw, which would bury the tables at its end)."""

    def __init__(self, total, desc):
        self.total, self.desc, self.n, self._step = total, desc, 0, 0.25
        self._next = self._step
        try:
            if not sys.stderr.isatty():
                raise ImportError("not a terminal")
            from tqdm import tqdm
            self._bar = tqdm(total=total, desc=desc, leave=False, file=sys.stderr,
                             dynamic_ncols=True)
        except Exception:  # noqa: BLE001
            self._bar = None
            self._t0 = time.perf_counter()

    def update(self, k=1, **postfix):
        self.n += k
        if self._bar is not None:
            self._bar.update(k)
            if postfix:
                self._bar.set_postfix(**postfix, refresh=False)
        elif self.total and self.n / self.total >= self._next - 1e-9:
            while self.n / self.total >= self._next - 1e-9:
                self._next += self._step
            extra = " ".join(f"{k}={v}" for k, v in postfix.items())
            print(f"  [{self.desc}] {self.n}/{self.total} ({100 * self.n / self.total:.0f}%) "
                  f"{time.perf_counter() - self._t0:.1f}s {extra}", file=sys.stderr, flush=True)

    def close(self):
        if self._bar is not None:
            self._bar.close()


def write_text(path, text):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def start_run(name, args):
    """Common start of the benchmark scripts: the clock, where to run, and the environment line
    (printed, with a plain banner when there is no GPU). Returns (t_start, gpu, device, env)."""
    t_start = time.perf_counter()
    gpu = torch.cuda.is_available() and not args.cpu
    device = torch.device("cuda" if gpu else "cpu")
    env = describe_env(args.commit)
    if not gpu:
        env["gpu"] = None
    print(f"{name} | {env_line(env)}", flush=True)
    if not gpu:
        print(NO_GPU_BANNER, flush=True)
    return t_start, gpu, device, env


def default_out_dir(name):
    """$OUT (the device machine's output folder) when set, else /tmp/mixed_attn_bench."""
    return os.environ.get("OUT") or os.path.join("/tmp", "mixed_attn_bench")


def import_mixed_attn():
    """(module, None) or (None, reason). Falls back to the source tree's python/ folder (after
    scripts/build_inplace.sh) when the package is not installed."""
    try:
        import mixed_attn
        return mixed_attn, None
    except ImportError:
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
        if os.path.isdir(os.path.join(src, "mixed_attn")) and src not in sys.path:
            sys.path.insert(0, src)
    try:
        import mixed_attn
        return mixed_attn, None
    except Exception as e:  # noqa: BLE001
        return None, ("mixed_attn not importable (" + _short(e, 90) + "; build with "
                      "scripts/build_inplace.sh and set PYTHONPATH=python)")


def last_page_lens(kv_indptr, seq_lens, page_size):
    """Keys in each row's last page (FlashInfer's paged_kv_last_page_len), int32, on seq_lens'
    device: what FlashInfer's paged wrappers take next to kv_indptr in plan()."""
    seq = torch.as_tensor(seq_lens, dtype=torch.int32)
    npages = (kv_indptr[1:] - kv_indptr[:-1]).to(seq.device)
    return (seq - (npages - 1) * page_size).to(torch.int32)
