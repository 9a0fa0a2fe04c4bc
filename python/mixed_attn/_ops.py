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
