"""The wheel's version and torch pin, from the torch (and CUDA / ROCm) the build sees.

Scheme (PEP 440 local version, as sgl-kernel / vLLM / FlashAttention tag their wheels):

    <base>+<accel>torch<major>.<minor>
    0.1.0+cu130torch2.11      CUDA build, torch.version.cuda 13.0, torch 2.11.x
    0.1.0+rocm6.3torch2.11    ROCm build, torch.version.hip 6.3.x
    0.1.0+cputorch2.13        CPU-only build (no GPU backend compiled)

A compiled extension links torch's C++ API, which is not stable across torch minor releases,
so the wheel also pins torch to the minor it was built against (torch>=2.11,<2.12).

Used two ways: as scikit-build-core's dynamic-metadata provider (pyproject.toml,
tool.scikit-build.metadata) for every build, `pip install .` included; and as a script,
`python tools/wheel_version.py backend|local|version`, by scripts/build_wheel.sh, which passes the
same backend to CMake so that the tag and what is compiled cannot disagree.
"""

import os
import re
import shutil
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_VERSION_FILE = os.path.join(_HERE, "..", "python", "mixed_attn", "_version.py")


def base_version():
    text = open(_VERSION_FILE).read()
    return re.search(r'BASE_VERSION\s*=\s*"([^"]+)"', text).group(1)


def _nvcc_found():
    for cand in (os.environ.get("CUDACXX"), shutil.which("nvcc"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.exists(cand):
            return True
    return False


def backend():
    """CUDA, HIP or NONE: MIXED_ATTN_GPU_BACKEND when set, else CMake's AUTO rule."""
    forced = os.environ.get("MIXED_ATTN_GPU_BACKEND", "AUTO").upper()
    if forced != "AUTO":
        return forced
    import torch
    if torch.version.hip:
        return "HIP"
    if torch.version.cuda and _nvcc_found():
        return "CUDA"
    return "NONE"


def _torch_minor():
    import torch
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def local_tag():
    import torch
    b = backend()
    if b == "CUDA":
        if not torch.version.cuda:
            raise RuntimeError("mixed_attn: a CUDA build needs a CUDA torch "
                               f"(torch {torch.__version__} has none)")
        major, minor = torch.version.cuda.split(".")[:2]
        accel = f"cu{major}{minor}"
    elif b == "HIP":
        if not torch.version.hip:
            raise RuntimeError("mixed_attn: a ROCm build needs a ROCm torch "
                               f"(torch {torch.__version__} has none)")
        major, minor = torch.version.hip.split(".")[:2]
        accel = f"rocm{major}.{minor}"
    elif b == "NONE":
        accel = "cpu"
    else:
        raise RuntimeError(f"mixed_attn: MIXED_ATTN_GPU_BACKEND={b!r} (AUTO, CUDA, HIP or NONE)")
    tmaj, tmin = _torch_minor()
    return f"{accel}torch{tmaj}.{tmin}"


def version():
    return f"{base_version()}+{local_tag()}"


def torch_requirement():
    tmaj, tmin = _torch_minor()
    return f"torch>={tmaj}.{tmin},<{tmaj}.{tmin + 1}"


# -- scikit-build-core dynamic metadata plugin interface ----------------------------------
def dynamic_metadata(field, settings=None):
    if field == "version":
        return version()
    if field == "dependencies":
        return [torch_requirement()]
    raise KeyError(f"tools/wheel_version.py does not provide {field!r}")


def get_requires_for_dynamic_metadata(settings=None):
    return ["torch"]


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "version"
    print({"backend": backend, "local": local_tag, "version": version,
           "torch_requirement": torch_requirement}[what]())
