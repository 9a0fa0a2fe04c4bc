"""Loads the compiled extension (which registers torch.ops.mixed_attn.*) and the fakes for torch.compile."""

import glob
import os

import torch

import mixed_attn as _pkg


def _load_library():
    for d in _pkg.__path__:
        libs = sorted(glob.glob(os.path.join(d, "_C*.so")) + glob.glob(os.path.join(d, "_C*.pyd")))
        if libs:
            try:
                torch.ops.load_library(libs[0])
            except OSError as e:
                # The usual cause: a wheel built against another torch minor (torch's C++ API
                # is not stable across them) or another CUDA major.
                raise ImportError(
                    f"mixed_attn: could not load {libs[0]} with torch {torch.__version__} "
                    f"(CUDA {torch.version.cuda}, HIP {torch.version.hip}): {e}. The wheel's version "
                    "tag (pip show mixed_attn; +cu130torch2.11 = CUDA 13.0, torch 2.11) must match "
                    "the installed torch; otherwise rebuild with scripts/build_wheel.sh") from e
            return libs[0]
    raise ImportError(
        "mixed_attn: the compiled extension (_C.so) was not found next to the package; "
        "install with `pip install --no-build-isolation .` or build with scripts/build_inplace.sh"
    )


LIBRARY_PATH = _load_library()


@torch.library.register_fake("mixed_attn::forward")
def _forward_fake(q, k, v, k_cache, v_cache, kv_indices, plan_meta, plan_info, partial_out,
                  partial_lse, out, lse, sinks, sm_scale, logit_cap, window_left, k_scale, v_scale):
    # Writes out / lse / caches / arena in place; returns nothing.
    return None


def has_cuda_kernels():
    """True when this build carries the CUDA implementation of forward."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("mixed_attn::forward", "CUDA")


def _load_fastplan():
    """mixed_attn._fastplan (csrc/torch/fastplan.cc), the one next to the loaded _C.so, or None.

    MixedAttention.plan() calls torch.ops.mixed_attn.plan_upload through it, without the Python
    side of torch's op call; builds without Python's headers have none (plan() then makes the
    regular call, with the same results).
    """
    import importlib.machinery
    import importlib.util

    d = os.path.dirname(LIBRARY_PATH)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(d, "_fastplan" + suffix)
        if os.path.exists(path):
            try:
                spec = importlib.util.spec_from_file_location("mixed_attn._fastplan", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
            except ImportError:
                return None
            mod.init(torch.Tensor)
            return mod
    return None


FASTPLAN = _load_fastplan()
