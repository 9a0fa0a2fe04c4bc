"""CUDA extend kernel (csrc/cuda/extend*.cu) against the fp64 reference.

The kernel is driven through a small C shim (csrc/cuda/extend_test_shim.cuh)
compiled with nvcc into a shared library and called through ctypes, so these
tests need neither the torch extension nor its build: only a CUDA GPU and
nvcc. Set MA_EXTEND_LIB to a prebuilt library to skip the compile. Every test
draws fresh random inputs, poisons out/lse with NaN and the unused cache slots
with NaN (so a kernel that reads a key outside the row, or leaves an output
unwritten, fails).
"""

import ctypes
import importlib.util
import math
import os
import shutil
import subprocess
import tempfile

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_reference():
    # By file path: importing the mixed_attn package would need the compiled
    # extension, which these tests do not use.
    spec = importlib.util.spec_from_file_location(
        "mixed_attn_reference", os.path.join(ROOT, "python", "mixed_attn", "reference.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


reference_attention = _load_reference().reference_attention

FP8 = torch.float8_e4m3fn
DTYPE_CODE = {torch.float16: 1, torch.bfloat16: 2, FP8: 3}
MODE_SPLIT, MODE_FOLD = 0, 1
NUM_PLAN_FIELDS = 28

HAVE_CUDA = torch.cuda.is_available() and torch.version.cuda is not None
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def build_library(out_dir=None, arch=None, extra_flags=()):
    """Compiles the extend kernel + planner + shim into a shared library; returns its path.

    extra_flags go to every nvcc call (e.g. -DMA_EXTEND_D128_W=4 to try another tile shape).
    """
    out_dir = out_dir or tempfile.mkdtemp(prefix="ma_extend_")
    os.makedirs(out_dir, exist_ok=True)
    if arch is None:
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")
    shim = os.path.join(out_dir, "extend_shim.cu")
    with open(shim, "w") as f:
        f.write('#include "cuda/extend_test_shim.cuh"\n')
    sources = [shim] + [os.path.join(ROOT, "csrc/cuda", n) for n in
                        ("extend.cu", "extend_d64.cu", "extend_d128.cu", "extend_d256.cu")]
    sources.append(os.path.join(ROOT, "csrc/planner/plan.cc"))
    flags = ["-std=c++17", "-O3", "-I" + os.path.join(ROOT, "csrc/include"),
             "-I" + os.path.join(ROOT, "csrc"), f"-gencode=arch=compute_{arch},code=sm_{arch}",
             "-Xcompiler", "-fPIC"] + list(extra_flags)
    procs, objs = [], []
    for src in sources:
        obj = os.path.join(out_dir, os.path.basename(src) + ".o")
        lang = ["-x", "cu"] if src.endswith(".cu") else []
        procs.append(subprocess.Popen([NVCC] + flags + lang + ["-c", src, "-o", obj],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        objs.append(obj)
    for p, src, obj in zip(procs, sources, objs):
        out, _ = p.communicate()
        if p.returncode != 0:  # one retry on its own (parallel nvcc runs have failed transiently)
            lang = ["-x", "cu"] if src.endswith(".cu") else []
            r = subprocess.run([NVCC] + flags + lang + ["-c", src, "-o", obj], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"nvcc failed on {src}:\n{out.decode()}\n{r.stdout}{r.stderr}")
    lib = os.path.join(out_dir, "libma_extend_test.so")
    subprocess.run([NVCC, "-shared", "-o", lib] + objs + ["-lcudart"], check=True)
    return lib


class ExtendLib:
    """ctypes view of the shim: plan with the real planner, run launch_extend."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        L = self.lib
        P = ctypes.c_void_p
        L.ma_ext_plan.argtypes = [P, P, P] + [ctypes.c_int] * 8 + [P, P, ctypes.c_char_p, ctypes.c_int]
        L.ma_ext_plan.restype = ctypes.c_int
        L.ma_ext_meta_capacity.argtypes = [ctypes.c_int64] * 3
        L.ma_ext_meta_capacity.restype = ctypes.c_int64
        L.ma_ext_tile_tokens.argtypes = [ctypes.c_int, ctypes.c_int]
        L.ma_ext_tile_tokens.restype = ctypes.c_int
        L.ma_ext_run.argtypes = [P, P, P, P, P, P]
        L.ma_ext_run.restype = ctypes.c_char_p

    def tile_tokens(self, head_dim, group):
        return self.lib.ma_ext_tile_tokens(head_dim, group)

    def plan(self, qo_indptr, kv_indptr, seq_lens, page_size, hq, hkv, d, window_left=-1,
             mode=MODE_FOLD, tile_tokens=None):
        """Returns (info int64 cpu tensor, meta int32 cuda tensor)."""
        qo = torch.tensor(qo_indptr, dtype=torch.int32)
        kv = torch.tensor(kv_indptr, dtype=torch.int32)
        sl = torch.tensor(seq_lens, dtype=torch.int32)
        B = len(seq_lens)
        if tile_tokens is None:
            tile_tokens = self.tile_tokens(d, hq // hkv)
        cap = self.lib.ma_ext_meta_capacity(B, int(qo[-1]), tile_tokens)
        meta = torch.zeros(cap, dtype=torch.int32)
        info = torch.zeros(NUM_PLAN_FIELDS, dtype=torch.int64)
        err = ctypes.create_string_buffer(512)
        rc = self.lib.ma_ext_plan(qo.data_ptr(), kv.data_ptr(), sl.data_ptr(), B, page_size, hq, hkv, d,
                                  window_left, mode, tile_tokens, meta.data_ptr(), info.data_ptr(), err, 512)
        if rc != 0:
            raise RuntimeError(err.value.decode())
        return info, meta.cuda()

    def run(self, info, meta, q, k_cache, v_cache, kv_indices, out, lse=None, sinks=None, sm_scale=None,
            logit_cap=0.0, window_left=-1, k_scale=1.0, v_scale=1.0, stream=None):
        T, hq, d = q.shape
        hkv = k_cache.shape[2]
        if sm_scale is None:
            sm_scale = 1.0 / math.sqrt(d)
        ptrs = (ctypes.c_void_p * 7)(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(),
                                     kv_indices.data_ptr(), out.data_ptr(),
                                     lse.data_ptr() if lse is not None else 0,
                                     sinks.data_ptr() if sinks is not None else 0)
        ints = (ctypes.c_int64 * 18)(q.stride(0), q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3],
                                     out.stride(0), out.stride(1), lse.stride(0) if lse is not None else 0,
                                     hq, hkv, d, k_cache.shape[1], window_left, DTYPE_CODE[q.dtype],
                                     DTYPE_CODE[k_cache.dtype])
        floats = (ctypes.c_float * 4)(sm_scale, logit_cap, k_scale, v_scale)
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        err = self.lib.ma_ext_run(info.data_ptr(), meta.data_ptr(), ptrs, ints, floats, ctypes.c_void_p(stream))
        if err is not None:
            raise RuntimeError(err.decode())


@pytest.fixture(scope="module")
def lib():
    if not HAVE_CUDA:
        pytest.skip("needs a CUDA GPU")
    path = os.environ.get("MA_EXTEND_LIB")
    if not path:
        if NVCC is None:
            pytest.skip("needs nvcc to build the extend kernel")
        path = build_library()
    return ExtendLib(path)


def make_batch(ext_lens, prefix_lens, hq, hkv, d, page_size, q_dtype, kv_dtype, gen, extra_pages=3):
    """Random q and paged caches with pages scattered; unused slots poisoned with NaN."""
    seq_lens = [p + e for p, e in zip(prefix_lens, ext_lens)]
    pages_per_row = [(s + page_size - 1) // page_size for s in seq_lens]
    num_pages = sum(pages_per_row) + extra_pages
    perm = torch.randperm(num_pages, generator=gen)[: sum(pages_per_row)].to(torch.int32)
    kv_indptr = [0]
    for n in pages_per_row:
        kv_indptr.append(kv_indptr[-1] + n)
    qo_indptr = [0]
    for e in ext_lens:
        qo_indptr.append(qo_indptr[-1] + e)
    T = qo_indptr[-1]
    q = torch.randn(T, hq, d, generator=gen).to(q_dtype)
    store = torch.float32 if kv_dtype == FP8 else kv_dtype
    k_cache = torch.full((num_pages, page_size, hkv, d), float("nan"), dtype=store)
    v_cache = torch.full((num_pages, page_size, hkv, d), float("nan"), dtype=store)
    for b, s in enumerate(seq_lens):
        for j in range(0, s, page_size):
            n = min(page_size, s - j)
            page = int(perm[kv_indptr[b] + j // page_size])
            k_cache[page, :n] = torch.randn(n, hkv, d, generator=gen) * (4.0 if kv_dtype == FP8 else 1.0)
            v_cache[page, :n] = torch.randn(n, hkv, d, generator=gen) * (4.0 if kv_dtype == FP8 else 1.0)
    k_cache = k_cache.to(kv_dtype)
    v_cache = v_cache.to(kv_dtype)
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, qo_indptr=qo_indptr, kv_indptr=kv_indptr,
                kv_indices=perm, seq_lens=seq_lens)


def run_and_check(lib, ext_lens, prefix_lens, hq=4, hkv=2, d=128, page_size=16, q_dtype=torch.bfloat16,
                  kv_dtype=None, window_left=-1, logit_cap=0.0, use_sinks=False, want_lse=True,
                  mode=MODE_FOLD, tile_tokens=None, seed=0):
    kv_dtype = kv_dtype or q_dtype
    gen = torch.Generator().manual_seed(seed)
    b = make_batch(ext_lens, prefix_lens, hq, hkv, d, page_size, q_dtype, kv_dtype, gen)
    k_scale = 0.37 if kv_dtype == FP8 else 1.0
    v_scale = 0.61 if kv_dtype == FP8 else 1.0
    sinks = (torch.randn(hq, generator=gen) * 2.0) if use_sinks else None
    info, meta = lib.plan(b["qo_indptr"], b["kv_indptr"], b["seq_lens"], page_size, hq, hkv, d,
                          window_left=window_left, mode=mode, tile_tokens=tile_tokens)
    dev = "cuda"
    q = b["q"].to(dev)
    kc, vc = b["k_cache"].to(dev), b["v_cache"].to(dev)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((q.shape[0], hq), float("nan"), device=dev) if want_lse else None
    lib.run(info, meta, q, kc, vc, b["kv_indices"].to(dev), out, lse=lse,
            sinks=sinks.to(dev) if sinks is not None else None, logit_cap=logit_cap,
            window_left=window_left, k_scale=k_scale, v_scale=v_scale)
    torch.cuda.synchronize()
    ref_out, ref_lse = reference_attention(
        b["q"], b["k_cache"], b["v_cache"], torch.tensor(b["qo_indptr"]), torch.tensor(b["seq_lens"]),
        torch.tensor(b["kv_indptr"]), b["kv_indices"], page_size, logit_cap=logit_cap,
        window_left=window_left, sinks=sinks, k_scale=k_scale, v_scale=v_scale)
    got = out.double().cpu()
    assert torch.isfinite(got).all(), "out has unwritten (NaN) or non-finite elements"
    rel = ((got - ref_out).norm() / ref_out.norm()).item()
    tol = 1.2e-2 if q_dtype == torch.bfloat16 else 2.5e-3
    assert rel < tol, f"relative error {rel:.3g} >= {tol}"
    atol = 3e-2 if q_dtype == torch.bfloat16 else 6e-3
    max_err = (got - ref_out).abs().max().item()
    assert max_err < atol + 2e-2 * ref_out.abs().max().item(), f"max abs error {max_err:.3g}"
    if want_lse:
        got_lse = lse.double().cpu()
        assert torch.isfinite(got_lse).all(), "lse has unwritten (NaN) elements"
        lse_err = (got_lse - ref_lse).abs().max().item()
        assert lse_err < 2e-3, f"lse max error {lse_err:.3g}"
    return rel


DTYPES = [torch.bfloat16, torch.float16]


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("q_dtype", DTYPES)
@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_dtypes_head_dims_pages(lib, d, q_dtype, fp8, page_size):
    # Odd lengths, prefix 0 and a prefix that is not a multiple of any tile.
    run_and_check(lib, ext_lens=[37, 1, 130], prefix_lens=[0, 45, 301], hq=4, hkv=2, d=d,
                  page_size=page_size, q_dtype=q_dtype, kv_dtype=FP8 if fp8 else None,
                  seed=d * 7 + page_size + fp8)


@pytest.mark.parametrize("window_left", [-1, 0, 5, 70])
@pytest.mark.parametrize("logit_cap", [0.0, 20.0])
@pytest.mark.parametrize("use_sinks", [False, True])
@pytest.mark.parametrize("fp8", [False, True])
def test_features(lib, window_left, logit_cap, use_sinks, fp8):
    run_and_check(lib, ext_lens=[200, 3, 77], prefix_lens=[150, 0, 1000], hq=8, hkv=2, d=128,
                  page_size=16, kv_dtype=FP8 if fp8 else None, window_left=window_left,
                  logit_cap=logit_cap, use_sinks=use_sinks, seed=window_left + 3 * use_sinks + 11 * fp8)


@pytest.mark.parametrize("d", [64, 256])
def test_features_other_head_dims(lib, d):
    run_and_check(lib, ext_lens=[150, 9], prefix_lens=[40, 333], hq=4, hkv=1, d=d, page_size=16,
                  q_dtype=torch.float16, window_left=50, logit_cap=15.0, use_sinks=True, seed=d)


@pytest.mark.parametrize("hq,hkv", [(1, 1), (3, 1), (6, 2), (5, 5), (16, 1), (32, 8)])
def test_gqa_groups(lib, hq, hkv):
    run_and_check(lib, ext_lens=[70, 5], prefix_lens=[20, 130], hq=hq, hkv=hkv, d=64, page_size=16,
                  seed=hq * 10 + hkv)


@pytest.mark.parametrize("num_rows", [1, 17, 64])
def test_ragged_batches(lib, num_rows):
    gen = torch.Generator().manual_seed(num_rows)
    ext = torch.randint(1, 160, (num_rows,), generator=gen).tolist()
    pre = torch.randint(0, 600, (num_rows,), generator=gen).tolist()
    pre[0] = 0
    run_and_check(lib, ext_lens=ext, prefix_lens=pre, hq=4, hkv=1, d=128, page_size=16,
                  use_sinks=num_rows == 17, window_left=100 if num_rows == 64 else -1, seed=num_rows)


@pytest.mark.parametrize("window_left", [-1, 1000])
def test_long_prefix(lib, window_left):
    run_and_check(lib, ext_lens=[97, 300], prefix_lens=[16384 + 17, 20000], hq=4, hkv=2, d=128,
                  page_size=16, window_left=window_left, seed=5 + window_left)


def test_fold_mode_decode_rows(lib):
    # Fold: decode rows (extend_len 1) go through the extend kernel too.
    run_and_check(lib, ext_lens=[1, 33, 1, 1, 260, 1], prefix_lens=[900, 10, 0, 4000, 64, 17],
                  hq=8, hkv=2, d=128, page_size=16, use_sinks=True, mode=MODE_FOLD, seed=99)


@pytest.mark.parametrize("tile_tokens", [7, 64, 300])
def test_plan_tile_tokens_other_than_kernel(lib, tile_tokens):
    # A plan made with another tile size (smaller, or larger than one CTA pass) still works.
    run_and_check(lib, ext_lens=[333, 20], prefix_lens=[50, 7], hq=4, hkv=4, d=128, page_size=16,
                  tile_tokens=tile_tokens, seed=tile_tokens)


def test_tile_tokens_values(lib):
    # Packed GQA heads: a tile of tt queries x group heads fills at most the rows of a group-1 tile.
    for d in (64, 128, 256):
        rows = lib.tile_tokens(d, 1)
        for group in (1, 2, 3, 4, 8, 16):
            tt = lib.tile_tokens(d, group)
            assert tt >= 1 and tt * group <= rows and (tt + 1) * group > rows, (d, group, tt, rows)


def test_repeatable(lib):
    # Same inputs twice: bitwise identical (a moving result is a race).
    gen = torch.Generator().manual_seed(3)
    b = make_batch([300, 45], [700, 3], 8, 2, 128, 16, torch.bfloat16, torch.bfloat16, gen)
    info, meta = lib.plan(b["qo_indptr"], b["kv_indptr"], b["seq_lens"], 16, 8, 2, 128)
    q, kc, vc, idx = b["q"].cuda(), b["k_cache"].cuda(), b["v_cache"].cuda(), b["kv_indices"].cuda()
    outs = []
    for _ in range(2):
        out = torch.full_like(q, float("nan"))
        lib.run(info, meta, q, kc, vc, idx, out)
        outs.append(out)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1])
