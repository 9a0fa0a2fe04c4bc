"""The wheel's version and torch pin, from the torch (and CUDA / ROCm) the build sees.

Scheme (PEP 440 local version, as sgl-kernel / vLLM / FlashAttention tag their wheels):

    <base>+<accel>torch<major>.<minor>
    0.1.0+cu130torch2.11      CUDA build, torch.version.cuda 13.0, torch 2.11.x
    0.1.0+rocm6.3torch2.11    ROCm build, torch.version.hip 6.3.x
    0.1.0+cputorch2.13        CPU-only build (no GPU backend compiled)

A compiled extension links torch's C++ API, which is not stable across torch minor releases,
so the wheel also pins torch to the minor it was built against (torch>=2.11,<2.12).

Used by scripts/build_wheel.sh: `python tools/wheel_version.py backend|local|version` picks the
backend (passed to CMake too, so that the tag and what is compiled cannot disagree) and the tag;
`python tools/wheel_version.py retag WHEEL OUTDIR` rewrites the wheel scikit-build-core built
(version 0.1.0 from pyproject.toml) into mixed_attn-0.1.0+<tag>-... with the torch pin, RECORD
rehashed. (scikit-build-core takes a computed version only from a plugin, which needs its
"experimental" switch; the retag works with any scikit-build-core.)
"""

import base64
import hashlib
import os
import re
import shutil
import sys
import zipfile

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


def retag(wheel, outdir):
    """Writes WHEEL as mixed_attn-<version()>-<same tags>.whl into OUTDIR; prints its path."""
    name = os.path.basename(wheel)
    m = re.match(r"^mixed_attn-([^-]+)-(.+\.whl)$", name)
    if not m:
        raise SystemExit(f"not a mixed_attn wheel: {name}")
    old_version, tags = m.groups()
    new_version = version()
    if old_version != base_version():
        raise SystemExit(f"{name}: version {old_version} != BASE_VERSION {base_version()} "
                         "(pyproject.toml and python/mixed_attn/_version.py must agree)")
    old_info, new_info = f"mixed_attn-{old_version}.dist-info/", f"mixed_attn-{new_version}.dist-info/"
    out_path = os.path.join(outdir, f"mixed_attn-{new_version}-{tags}")
    records = []
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(out_path, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            path = item.filename
            if path == old_info + "RECORD":
                continue
            data = zin.read(item)
            if path.startswith(old_info):
                path = new_info + path[len(old_info):]
            if path == new_info + "METADATA":
                text = data.decode()
                text = re.sub(r"^Version: .*$", f"Version: {new_version}", text, count=1, flags=re.M)
                # The unconditional torch requirement becomes the pin; extras stay as they are.
                text = re.sub(r"^Requires-Dist: torch(?:[<>=!~ ,.0-9*]*)$",
                              f"Requires-Dist: {torch_requirement()}", text, flags=re.M)
                data = text.encode()
            info = zipfile.ZipInfo(path, date_time=item.date_time)
            info.external_attr = item.external_attr
            info.compress_type = zipfile.ZIP_DEFLATED
            zout.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{path},sha256={digest},{len(data)}")
        records.append(f"{new_info}RECORD,,")
        zout.writestr(new_info + "RECORD", "\n".join(records) + "\n")
    print(out_path)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "version"
    if what == "retag":
        retag(sys.argv[2], sys.argv[3])
    else:
        print({"backend": backend, "local": local_tag, "version": version,
               "torch_requirement": torch_requirement}[what]())
