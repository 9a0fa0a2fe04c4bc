"""Lab tool: ctypes harness over tools/extend_test_shim.cuh, the extend kernel built alone with
nvcc with extra -D flags, so that variants can be tested and timed without rebuilding the
extension (tools/sweep_extend.py, scripts/gpu_check.sh's sweep step). Only that lab path uses it:
tests/test_cuda_extend.py and benchmarks/bench_extend.py run on ExtendLib instead of
mixed_attn.testing.OpExtend (whose interface it keeps) when MA_EXTEND_LIB names such a library.
Plans come from the real planner with configs from mixed_attn.plan_info.make_config (the installed
extension describes the device); a variant that changes a kernel's rows must change
csrc/include/mixed_attn/launch_policy.h too (the instantiations static_assert it).
"""

import ctypes
import math
import os
import shutil
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))  # this checkout's package (after build_inplace.sh)
from mixed_attn.testing import OpExtend  # noqa: E402


FP8 = torch.float8_e4m3fn
DTYPE_CODE = {torch.float16: 1, torch.bfloat16: 2, FP8: 3}

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
        f.write('#include "tools/extend_test_shim.cuh"\n')
    sources = [shim] + [os.path.join(ROOT, "csrc/cuda", n) for n in
                        ("extend/launch_extend.cu", "extend/instantiate_hd64.cu",
                         "extend/instantiate_hd128.cu", "extend/instantiate_hd256.cu", "device_desc.cu")]
    sources += [os.path.join(ROOT, "csrc/planner", n) for n in ("plan.cc", "launch_policy.cc")]
    flags = ["-std=c++17", "-O3", "-I" + os.path.join(ROOT, "csrc/include"),
             "-I" + os.path.join(ROOT, "csrc"), "-I" + ROOT, f"-gencode=arch=compute_{arch},code=sm_{arch}",
             "-Xcompiler", "-fPIC"] + (["-DMA_EXTEND_SM90_BUILT=1"] if arch == "90a" else []) + list(extra_flags)
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


class ExtendLib(OpExtend):
    """mixed_attn.testing.OpExtend (same configs, launch-policy overrides in `request`, same
    calls) over the shim: planned by the library's own planner, run by its launch_extend."""

    def __init__(self, path, device="cuda"):
        super().__init__(device)
        self.lib = ctypes.CDLL(path)
        L = self.lib
        P = ctypes.c_void_p
        L.ma_ext_plan.argtypes = [P, P, P, ctypes.c_int, P, ctypes.c_int, P, ctypes.c_int64, P,
                                  ctypes.c_char_p, ctypes.c_int]
        L.ma_ext_plan.restype = ctypes.c_int
        L.ma_ext_num_plan_fields.restype = ctypes.c_int
        L.ma_ext_meta_capacity.argtypes = [ctypes.c_int64] * 3
        L.ma_ext_meta_capacity.restype = ctypes.c_int64
        L.ma_ext_run.argtypes = [P, P, P, P, P, P]
        L.ma_ext_run.restype = ctypes.c_char_p

    def _plan(self, qo, kv, sl, cfg, tile_tokens):
        """Returns (info as a list of ints, meta int32 cuda tensor)."""
        B = sl.numel()
        cap = self.lib.ma_ext_meta_capacity(B, int(qo[-1]), tile_tokens)
        meta = torch.zeros(cap, dtype=torch.int32)
        info = torch.zeros(self.lib.ma_ext_num_plan_fields(), dtype=torch.int64)
        config = torch.tensor(cfg, dtype=torch.int64)
        err = ctypes.create_string_buffer(512)
        qo, kv, sl = qo.contiguous(), kv.contiguous(), sl.contiguous()
        rc = self.lib.ma_ext_plan(qo.data_ptr(), kv.data_ptr(), sl.data_ptr(), B, config.data_ptr(),
                                  len(cfg), meta.data_ptr(), cap, info.data_ptr(), err, 512)
        if rc != 0:
            raise RuntimeError(err.value.decode())
        return [int(x) for x in info], meta.to(self.device)

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
        ints = (ctypes.c_int64 * 19)(q.stride(0), q.stride(1), *k_cache.stride()[:3], *v_cache.stride()[:3],
                                     out.stride(0), out.stride(1), lse.stride(0) if lse is not None else 0,
                                     hq, hkv, d, k_cache.shape[1], window_left, DTYPE_CODE[q.dtype],
                                     DTYPE_CODE[k_cache.dtype], min(k_cache.shape[0], v_cache.shape[0]))
        floats = (ctypes.c_float * 4)(sm_scale, logit_cap, k_scale, v_scale)
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        info_t = torch.tensor(info, dtype=torch.int64)
        err = self.lib.ma_ext_run(info_t.data_ptr(), meta.data_ptr(), ptrs, ints, floats, ctypes.c_void_p(stream))
        if err is not None:
            raise RuntimeError(err.decode())


