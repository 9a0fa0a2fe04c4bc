"""What this build of mixed_attn holds, and whether a GPU can run it.

    >>> import mixed_attn; print(mixed_attn.info())

The facts come from the compiled module itself (torch.ops.mixed_attn.build_info(), written at
build time by CMakeLists.txt), so they always describe the _C.so that is loaded.

CUDA code in a wheel is SASS for some architectures plus PTX for one; a GPU of compute
capability M.m runs:
  - SASS built for sm_Xa ("a": arch-specific, e.g. sm_90a) only when M.m == X;
  - SASS built for plain sm_X when it has the same major and a minor >= X's (sm_86 on 8.7/8.9,
    sm_100 on 10.3, sm_120 on 12.1);
  - else PTX of compute_X with X <= M.m, compiled by the driver at first use (slow start);
  - else nothing: check_device() raises, naming the archs the wheel holds and how to build.
"""

import os
import warnings

import torch

from . import _ops  # noqa: F401  (loads _C.so)
from ._version import BASE_VERSION

_BUILD_INSTRUCTIONS = (
    "build for it from source with "
    "`MIXED_ATTN_CUDA_ARCHS=<arch, e.g. 80 or 120> bash scripts/build_wheel.sh` "
    "(or `MIXED_ATTN_CUDA_ARCHS=... pip install --no-build-isolation .`), see README.md")


def build_info():
    """The build facts of the loaded module, as a dict of strings (see csrc/torch/build_info.cc)."""
    out = {}
    for item in torch.ops.mixed_attn.build_info():
        key, _, value = item.partition("=")
        out[key] = value
    return out


def version():
    """The installed distribution's version (with its local tag), else BASE_VERSION+src."""
    try:
        from importlib import metadata
        dist = metadata.distribution("mixed_attn")
        here = os.path.realpath(os.path.dirname(__file__))
        if os.path.realpath(os.path.dirname(dist.locate_file("mixed_attn/__init__.py"))) == here:
            return dist.version
    except Exception:  # not installed (source tree on PYTHONPATH), or odd metadata
        pass
    return BASE_VERSION + "+src"


def _parse_cuda_archs(spec):
    """"80-real,90a-real,120" -> (sass, ptx): lists of arch strings like '80', '90a'."""
    sass, ptx = [], []
    for entry in filter(None, spec.split(",")):
        arch, _, kind = entry.partition("-")
        if kind in ("", "real"):
            sass.append(arch)
        if kind in ("", "virtual"):
            ptx.append(arch)
    return sass, ptx


def _split(arch):
    digits = arch.rstrip("af")
    return int(digits[:-1]), int(digits[-1]), arch[len(digits):]


def cuda_image_for(capability, spec):
    """Which code of the arch list `spec` a GPU of `capability` (major, minor) runs:
    ('sass', '86'), ('ptx', '120') or None."""
    major, minor = capability
    sass, ptx = _parse_cuda_archs(spec)
    runnable = []
    for arch in sass:
        amaj, amin, suffix = _split(arch)
        if suffix == "a":
            ok = (amaj, amin) == (major, minor)
        else:  # plain or "f" (family): same major, same or higher minor
            ok = amaj == major and amin <= minor
        if ok:
            runnable.append(((amin, suffix == "a"), arch))  # closest minor, "a" over plain
    if runnable:
        return ("sass", max(runnable)[1])
    for arch in sorted(ptx, key=lambda a: _split(a)[:2], reverse=True):
        amaj, amin, suffix = _split(arch)
        if (not suffix and (amaj, amin) <= (major, minor)) or (suffix and (amaj, amin) == (major, minor)):
            return ("ptx", arch)
    return None


def _device_kernels(device):
    """The kernels the launch policy picks on this GPU for a 32/8/128 model at page 16 (the
    planner decides; the wrapper's extend_backend= / decode_backend= and their MIXED_ATTN_*
    defaults of mixed_attn/env.py apply), for a bf16 and for an fp8 cache."""
    from . import env
    from .plan_info import make_config

    names = {1: "mma.sync / MFMA (FlashAttention-2 style)", 2: "sm_90a warp-specialised (wgmma)"}
    dnames = {1: "split-KV tensor-core", 2: "split-KV portable (matrix-free)"}
    out = {}
    for label, fp8 in (("bf16 cache", 0), ("fp8 cache", 1)):
        cfg = make_config(device, 16, 32, 8, 128, kv_fp8=fp8,
                          extend_kernel=env.EXTEND_KERNELS[env.EXTEND_KERNEL],
                          decode_kernel=env.DECODE_KERNELS[env.DECODE_KERNEL])
        try:
            p = torch.ops.mixed_attn.launch_policy(cfg)
            out[label] = {"extend": names.get(int(p[0]), str(p[0])), "decode": dnames.get(int(p[5]), str(p[5]))}
        except RuntimeError as e:  # an override the device cannot honour
            out[label] = {"error": str(e)}
    return out


def _unsupported_message(name, capability, facts):
    sass, ptx = _parse_cuda_archs(facts.get("gpu_archs", ""))
    return (f"mixed_attn {version()}: no GPU kernels for {name} (compute capability "
            f"{capability[0]}.{capability[1]}, sm_{capability[0]}{capability[1]}). This build "
            f"holds SASS for {', '.join('sm_' + a for a in sass) or 'none'} and PTX for "
            f"{', '.join('compute_' + a for a in ptx) or 'none'}; {_BUILD_INSTRUCTIONS}. "
            "The CPU implementation (device='cpu') still works.")


_checked = {}


def check_device(device=None):
    """Raises RuntimeError when this build has no kernels for the GPU `device` (a clear message
    instead of a launch failure); returns the image it runs, ('sass'|'ptx', arch). Cached."""
    device = torch.device(device if device is not None else "cuda")
    if device.type != "cuda":
        return None
    facts = build_info()
    if facts.get("backend") == "NONE":
        raise RuntimeError(
            f"mixed_attn {version()}: this build has no GPU kernels (CPU-only, built against torch "
            f"{facts.get('torch')}); install a +cu / +rocm wheel or build with a CUDA/ROCm torch "
            "(README.md, 'Build a wheel')")
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index in _checked:
        return _checked[index]
    if facts.get("backend") == "HIP":
        _checked[index] = ("hip", facts.get("gpu_archs"))  # launch_extend checks the gfx arch
        return _checked[index]
    capability = torch.cuda.get_device_capability(index)
    image = cuda_image_for(capability, facts.get("gpu_archs", ""))
    if image is None:
        raise RuntimeError(_unsupported_message(torch.cuda.get_device_name(index), capability, facts))
    if image[0] == "ptx":
        warnings.warn(f"mixed_attn: {torch.cuda.get_device_name(index)} (sm_{capability[0]}"
                      f"{capability[1]}) runs this build's compute_{image[1]} PTX, JIT-compiled by "
                      f"the driver at first use (slow first call); {_BUILD_INSTRUCTIONS}",
                      stacklevel=2)
    _checked[index] = image
    return image


def info(device=None):
    """Version, what the build was made with and for, and what the GPU (if any) will run."""
    facts = build_info()
    sass, ptx = _parse_cuda_archs(facts.get("gpu_archs", "")) if facts.get("backend") == "CUDA" else ([], [])
    out = {
        "version": version(),
        "library": _ops.LIBRARY_PATH,
        "backend": facts.get("backend"),
        "built_with_torch": facts.get("torch"),
        "built_with_cuda": facts.get("torch_cuda") or None,
        "built_with_hip": facts.get("torch_hip") or None,
        "compiler": facts.get("compiler") or None,
        "gpu_archs": facts.get("gpu_archs", "").split(",") if facts.get("gpu_archs") else [],
        "sass": ["sm_" + a for a in sass],
        "ptx": ["compute_" + a for a in ptx],
        "extend_sm90_built": facts.get("extend_sm90") == "1",
        "torch": torch.__version__,
    }
    if facts.get("backend") in ("CUDA", "HIP") and torch.cuda.is_available():
        device = torch.device(device if device is not None else "cuda")
        index = device.index if device.index is not None else torch.cuda.current_device()
        name = torch.cuda.get_device_name(index)
        out["device"] = name
        if facts.get("backend") == "CUDA":
            capability = torch.cuda.get_device_capability(index)
            out["device_capability"] = f"{capability[0]}.{capability[1]}"
            image = cuda_image_for(capability, facts.get("gpu_archs", ""))
            if image is None:
                out["device_code"] = None
                out["device_error"] = _unsupported_message(name, capability, facts)
            else:
                out["device_code"] = ("sm_" if image[0] == "sass" else "compute_") + image[1] + \
                    (" (PTX, JIT at first use)" if image[0] == "ptx" else "")
                out["kernels"] = _device_kernels(torch.device("cuda", index))
        else:
            out["device_arch"] = torch.cuda.get_device_properties(index).gcnArchName
    return out


def _nvml_capabilities():
    """(name, (major, minor)) of the GPUs CUDA_VISIBLE_DEVICES leaves visible, read through NVML
    (libnvidia-ml, part of the driver), which creates no CUDA context. [] when NVML is absent."""
    import ctypes
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return []
    except OSError:
        return []
    try:
        count = ctypes.c_uint(0)
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return []
        indices = list(range(count.value))
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            try:  # integer lists only; UUIDs / MIG names: check every GPU
                indices = [int(v) for v in visible.split(",") if v.strip() != ""]
            except ValueError:
                pass
        out = []
        for i in indices:
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.byref(handle)) != 0:
                continue
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            if nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major),
                                                       ctypes.byref(minor)) != 0:
                continue
            name = ctypes.create_string_buffer(96)
            nvml.nvmlDeviceGetName(handle, name, ctypes.c_uint(96))
            out.append((name.value.decode(errors="replace"), (major.value, minor.value)))
        return out
    finally:
        nvml.nvmlShutdown()


def warn_unsupported_gpus():
    """Import-time check: warns for each visible NVIDIA GPU this build has no kernels for. It
    reads the GPUs through NVML, so importing creates no CUDA context (a server may fork after
    import). The same check raises when a wrapper is built on such a GPU (check_device)."""
    try:
        facts = build_info()
        if facts.get("backend") != "CUDA":
            return
        for name, capability in _nvml_capabilities():
            if cuda_image_for(capability, facts.get("gpu_archs", "")) is None:
                warnings.warn(_unsupported_message(name, capability, facts), stacklevel=3)
    except Exception:  # the import-time check must never break the import itself
        pass
