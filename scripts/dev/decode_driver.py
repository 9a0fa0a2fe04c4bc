"""ctypes driver over scripts/dev/decode_shim.cu: planner, KV save and decode
launchers on torch CUDA tensors, without the torch extension.

The decode tests and the micro-benchmark use it so they can run before the op
layer carries the CUDA path. The shared library is found at $MA_DECODE_SHIM,
else build/libdecode_shim.so under the repository root, else built there with
nvcc (about a minute).
"""

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    "csrc/planner/plan.cc",
    "csrc/cuda/save_kv.cu",
    "csrc/cuda/decode.cu",
    "csrc/cuda/decode_hd64.cu",
    "csrc/cuda/decode_hd128.cu",
    "csrc/cuda/decode_hd256.cu",
    "scripts/dev/decode_shim.cu",
]
DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float8_e4m3fn: 3}

_lib = None


def nvcc():
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).exists():
            return cand
    return None


def build(out_path, extra_flags=()):
    """Compiles the shim library (objects in parallel) and returns its path."""
    compiler = nvcc()
    if compiler is None:
        raise RuntimeError("nvcc not found")
    out_path = Path(out_path)
    obj_dir = out_path.parent / (out_path.stem + "_obj")
    obj_dir.mkdir(parents=True, exist_ok=True)
    flags = ["-std=c++17", "-O3", "-Xcompiler", "-fPIC", f"-I{ROOT}/csrc/include", f"-I{ROOT}/csrc",
             "-gencode=arch=compute_90a,code=sm_90a", "-lineinfo", *extra_flags]
    procs, objs = [], []
    for src in SOURCES:
        obj = obj_dir / (Path(src).stem + ".o")
        objs.append(str(obj))
        cmd = [compiler, *flags, "-x", "cu" if src.endswith(".cu") else "c++", "-c", str(ROOT / src),
               "-o", str(obj)]
        procs.append((src, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    for src, proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed on {src}:\n{out.decode()}")
    subprocess.run([compiler, "-shared", *objs, "-o", str(out_path)], check=True)
    return out_path


def lib():
    global _lib
    if _lib is not None:
        return _lib
    path = os.environ.get("MA_DECODE_SHIM") or str(ROOT / "build" / "libdecode_shim.so")
    if not Path(path).exists():
        build(path)
    L = ctypes.CDLL(path)
    i64p = ctypes.POINTER(ctypes.c_int64)
    f64p = ctypes.POINTER(ctypes.c_double)
    L.ma_meta_capacity.restype = ctypes.c_int64
    L.ma_meta_capacity.argtypes = [ctypes.c_int64] * 3
    L.ma_plan_num_fields.restype = ctypes.c_int64
    L.ma_plan.restype = ctypes.c_int
    L.ma_plan.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, i64p,
                          ctypes.c_void_p, ctypes.c_int64, i64p, ctypes.c_char_p, ctypes.c_int]
    for name in ("ma_decode", "ma_save_kv"):
        fn = getattr(L, name)
        fn.restype = ctypes.c_char_p
        fn.argtypes = [i64p, f64p, i64p, ctypes.c_void_p, ctypes.c_void_p]
    L.ma_read_stream.restype = ctypes.c_char_p
    L.ma_read_stream.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int,
                                 ctypes.c_void_p]
    _lib = L
    return L


def _i64(vals):
    return (ctypes.c_int64 * len(vals))(*[int(v) for v in vals])


def _f64(vals):
    return (ctypes.c_double * len(vals))(*[float(v) for v in vals])


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


class Plan:
    """One step's plan: host info (int64) and the device metadata buffer."""

    def __init__(self, qo_indptr, kv_indptr, seq_lens, page_size, num_qo_heads, num_kv_heads, head_dim,
                 window_left=-1, deterministic=False, fixed_split_tokens=2048, max_splits_per_row=32,
                 min_split_tokens=256, ctas_per_sm=2, num_sms=None, device="cuda", balance=False):
        L = lib()
        qo = torch.as_tensor(qo_indptr, dtype=torch.int32).contiguous()
        kv = torch.as_tensor(kv_indptr, dtype=torch.int32).contiguous()
        sl = torch.as_tensor(seq_lens, dtype=torch.int32).contiguous()
        B = sl.numel()
        cap = L.ma_meta_capacity(B, int(qo[-1]), 64)
        meta = torch.empty(cap, dtype=torch.int32)
        nf = L.ma_plan_num_fields()
        self.info = (ctypes.c_int64 * nf)()
        if num_sms is None:
            num_sms = torch.cuda.get_device_properties(device).multi_processor_count
        cfg = _i64([page_size, num_qo_heads, num_kv_heads, head_dim, window_left, num_sms,
                    1 if deterministic else 0, fixed_split_tokens, max_splits_per_row,
                    min_split_tokens, ctas_per_sm, 64])
        err = ctypes.create_string_buffer(512)
        rc = L.ma_plan(qo.data_ptr(), kv.data_ptr(), sl.data_ptr(), B, cfg, meta.data_ptr(), cap,
                       self.info, err, 512)
        if rc != 0:
            raise ValueError(err.value.decode())
        self.meta_host = meta[: self.info[10]].clone()
        if balance and not deterministic:
            self._balance(sl, page_size)
        self.meta = self.meta_host.to(device)
        self.num_partials = int(self.info[8])
        self.max_splits = int(self.info[9])
        self.num_decode_rows = int(self.info[4])

    def _balance(self, seq_lens, page_size):
        """Experiment for the lead: same split count per row, equal split lengths
        (the SM-aware policy otherwise leaves a short last split)."""
        m, info = self.meta_host, self.info
        nd = int(info[4])
        rows, ind, start, chunk = (int(info[14]), int(info[15]), int(info[16]), int(info[17]))
        align = max(page_size, 64)
        total, most = 0, 0
        for d in range(nd):
            keys = int(seq_lens[int(m[rows + d])]) - int(m[start + d])
            n = -(-keys // int(m[chunk + d]))
            c = -(-(-(-keys // n)) // align) * align
            n = -(-keys // c)
            m[chunk + d] = c
            m[ind + d] = total
            total += n
            most = max(most, n)
        m[ind + nd] = total
        info[8], info[9] = total, most

    def field(self, index):
        return int(self.info[index])


def decode(plan, q, k_cache, v_cache, kv_indices, out, lse=None, sinks=None, partial_out=None,
           partial_lse=None, sm_scale=None, logit_cap=0.0, window_left=-1, k_scale=1.0, v_scale=1.0):
    Hq, D = q.shape[1], q.shape[2]
    Hkv, page_size = k_cache.shape[2], k_cache.shape[1]
    if sm_scale is None:
        sm_scale = D ** -0.5
    iv = _i64([
        q.data_ptr(), q.stride(0), q.stride(1), k_cache.data_ptr(), v_cache.data_ptr(),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), kv_indices.data_ptr(),
        out.data_ptr(), out.stride(0), out.stride(1),
        lse.data_ptr() if lse is not None else 0, lse.stride(0) if lse is not None else 0,
        sinks.data_ptr() if sinks is not None else 0, Hq, Hkv, D, page_size, window_left,
        DTYPE_CODE[q.dtype], DTYPE_CODE[k_cache.dtype],
        partial_out.data_ptr() if partial_out is not None else 0,
        partial_lse.data_ptr() if partial_lse is not None else 0,
    ])
    fv = _f64([sm_scale, logit_cap, k_scale, v_scale])
    err = lib().ma_decode(iv, fv, plan.info, ctypes.c_void_p(plan.meta.data_ptr()), _stream())
    if err:
        raise RuntimeError(err.decode())


def save_kv(plan, k, v, k_cache, v_cache, kv_indices, k_scale=1.0, v_scale=1.0):
    iv = _i64([
        k.data_ptr(), v.data_ptr(), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.data_ptr(), v_cache.data_ptr(), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), kv_indices.data_ptr(),
        k_cache.shape[2], k_cache.shape[3], k_cache.shape[1], DTYPE_CODE[k.dtype], DTYPE_CODE[k_cache.dtype],
    ])
    fv = _f64([1.0 / k_scale, 1.0 / v_scale])
    err = lib().ma_save_kv(iv, fv, plan.info, ctypes.c_void_p(plan.meta.data_ptr()), _stream())
    if err:
        raise RuntimeError(err.decode())


def read_stream(buf, sink, blocks):
    err = lib().ma_read_stream(ctypes.c_void_p(buf.data_ptr()), buf.numel() * buf.element_size(),
                               ctypes.c_void_p(sink.data_ptr()), blocks, _stream())
    if err:
        raise RuntimeError(err.decode())
