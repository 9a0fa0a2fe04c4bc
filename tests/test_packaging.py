"""Packaging (issue 16): build facts, the arch-coverage rule, the version tag, the CMake arch block.

All CPU-only: the CMake checks only configure (no compile), with nvcc where it is installed.
"""

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch

import mixed_attn
from mixed_attn import buildinfo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = "80-real,86-real,89-real,90a-real,100-real,120"


def test_build_info_keys_and_backend():
    facts = mixed_attn.build_info()
    assert set(facts) >= {"backend", "gpu_archs", "torch", "torch_cuda", "torch_hip", "compiler",
                          "extend_sm90", "gpu_head_dims", "gpu_fp8"}
    assert set(facts["gpu_head_dims"].split(",")) <= {"64", "128", "256"} and facts["gpu_fp8"] in ("0", "1")
    assert facts["backend"] in ("CUDA", "HIP", "NONE")
    assert (facts["backend"] in ("CUDA", "HIP")) == mixed_attn.has_cuda_kernels()
    # Built against this torch's minor (the wheel pins it; the C++ API is not stable across them).
    assert facts["torch"].split(".")[:2] == torch.__version__.split(".")[:2]
    if facts["backend"] == "NONE":
        assert facts["gpu_archs"] == "" and facts["extend_sm90"] == "0"


def test_version_tag_matches_build():
    v = mixed_attn.__version__
    base = re.search(r'BASE_VERSION = "([^"]+)"',
                     open(os.path.join(ROOT, "python", "mixed_attn", "_version.py")).read()).group(1)
    pyproject = open(os.path.join(ROOT, "pyproject.toml")).read()
    assert re.search(rf'^version = "{re.escape(base)}"$', pyproject, re.M), \
        "pyproject.toml's version and BASE_VERSION must agree"
    assert v.split("+")[0] == base
    local = v.split("+")[1] if "+" in v else ""
    backend = mixed_attn.build_info()["backend"]
    if os.environ.get("MIXED_ATTN_TEST_INSTALLED") == "1":
        assert local, f"an installed wheel carries a local tag, got {v}"
    if local and local != "src":
        accel = {"CUDA": "cu", "HIP": "rocm", "NONE": "cpu"}[backend]
        tmaj, tmin = torch.__version__.split(".")[:2]
        assert re.fullmatch(rf"{accel}[0-9.]*torch{tmaj}\.{tmin}", local), (v, backend)


def test_info_reports_the_build():
    info = mixed_attn.info()
    assert info["version"] == mixed_attn.__version__
    assert info["built_with_torch"] == mixed_attn.build_info()["torch"]
    assert os.path.exists(info["library"])
    if info["backend"] == "CUDA":
        assert info["sass"] and all(a.startswith("sm_") for a in info["sass"])


@pytest.mark.parametrize("cap,image", [
    ((8, 0), ("sass", "80")), ((8, 6), ("sass", "86")), ((8, 7), ("sass", "86")),
    ((8, 9), ("sass", "89")), ((9, 0), ("sass", "90a")), ((10, 0), ("sass", "100")),
    ((10, 3), ("sass", "100")), ((12, 0), ("sass", "120")), ((12, 1), ("sass", "120")),
    ((13, 0), ("ptx", "120")),  # a future GPU JITs the PTX
    ((11, 0), None),            # Thor: no sm_11x SASS and compute_120 PTX is too new for it
    ((7, 5), None),             # Turing: below the kernels' sm_80 floor
])
def test_cuda_image_default_list(cap, image):
    assert buildinfo.cuda_image_for(cap, DEFAULT) == image


def test_cuda_image_arch_specific_and_single_arch():
    assert buildinfo.cuda_image_for((9, 0), "90a-real") == ("sass", "90a")
    assert buildinfo.cuda_image_for((8, 0), "90a-real") is None  # sm_90a SASS runs on 9.0 only
    assert buildinfo.cuda_image_for((9, 0), "80") == ("ptx", "80")  # PTX JIT, no wgmma kernel
    assert buildinfo.cuda_image_for((9, 0), "80-real,90a") == ("sass", "90a")


def test_unsupported_message_says_what_and_how():
    facts = {"backend": "CUDA", "gpu_archs": DEFAULT}
    msg = buildinfo._unsupported_message("Tesla T4", (7, 5), facts)
    for needle in ("Tesla T4", "sm_75", "sm_80", "sm_90a", "compute_120", "MIXED_ATTN_CUDA_ARCHS",
                   "scripts/build_wheel.sh"):
        assert needle in msg, (needle, msg)


def test_check_device_cpu_only_build_raises():
    if mixed_attn.build_info()["backend"] != "NONE":
        pytest.skip("a GPU build")
    with pytest.raises(RuntimeError, match="no GPU kernels"):
        mixed_attn.check_device("cuda")
    assert mixed_attn.check_device("cpu") is None


def test_retag(tmp_path):
    # A minimal wheel as scikit-build-core writes it, retagged for the CPU backend.
    base = re.search(r'BASE_VERSION = "([^"]+)"',
                     open(os.path.join(ROOT, "python", "mixed_attn", "_version.py")).read()).group(1)
    src = tmp_path / f"mixed_attn-{base}-cp3-cp3-linux_x86_64.whl"
    info = f"mixed_attn-{base}.dist-info/"
    with zipfile.ZipFile(src, "w") as z:
        z.writestr("mixed_attn/__init__.py", "x = 1\n")
        z.writestr(info + "METADATA", f"Metadata-Version: 2.1\nName: mixed_attn\nVersion: {base}\n"
                   "Requires-Dist: torch>=2.4\nRequires-Dist: pytest; extra == \"test\"\n")
        z.writestr(info + "WHEEL", "Wheel-Version: 1.0\n")
        z.writestr(info + "RECORD", "")
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "wheel_version.py"), "retag",
                        str(src), str(out)], capture_output=True, text=True,
                       env=dict(os.environ, MIXED_ATTN_GPU_BACKEND="NONE"))
    assert r.returncode == 0, r.stderr
    tmaj, tmin = torch.__version__.split(".")[:2]
    version = f"{base}+cputorch{tmaj}.{tmin}"
    path = r.stdout.strip()
    assert os.path.basename(path) == f"mixed_attn-{version}-cp3-cp3-linux_x86_64.whl"
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        meta = z.read(f"mixed_attn-{version}.dist-info/METADATA").decode()
        record = z.read(f"mixed_attn-{version}.dist-info/RECORD").decode()
    assert f"Version: {version}\n" in meta
    assert f"Requires-Dist: torch>={tmaj}.{tmin},<{tmaj}.{int(tmin) + 1}\n" in meta
    assert 'Requires-Dist: pytest; extra == "test"' in meta
    assert not any(n.startswith(info) for n in names)
    assert "mixed_attn/__init__.py,sha256=" in record


def _nvcc():
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def _tool(name):
    # The venv's own (pip) cmake / ninja first: the test venv is not activated.
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.exists(here) else shutil.which(name)


def _configure(tmp_path, archs):
    cmake, ninja = _tool("cmake"), _tool("ninja")
    cmd = [cmake, "-S", ROOT, "-B", str(tmp_path / "b"), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
           "-DMIXED_ATTN_KERNELS_ONLY=ON", "-DMIXED_ATTN_GPU_BACKEND=CUDA",
           f"-DCMAKE_CUDA_COMPILER={_nvcc()}", f"-DMIXED_ATTN_CUDA_ARCHS={archs}"]
    env = {k: v for k, v in os.environ.items() if k != "MIXED_ATTN_CUDA_ARCHS"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


needs_cmake_nvcc = pytest.mark.skipif(
    _nvcc() is None or _tool("cmake") is None or _tool("ninja") is None,
    reason="needs nvcc, cmake and ninja")


@needs_cmake_nvcc
@pytest.mark.parametrize("archs,expect,sm90", [
    ("", "80-real;86-real;89-real;90a-real;100-real;120", "1"),  # CUDA >= 12.8 default
    ("90a", "90a-real", "1"),               # fast H100/H200 build: SASS only ("a" PTX is no use)
    ("sm_80, 8.6", "80-real;86", "0"),                          # other spellings; PTX of 86
])
def test_cmake_arch_list(tmp_path, archs, expect, sm90):
    r = _configure(tmp_path, archs)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    m = re.search(r"mixed_attn CUDA archs \(nvcc ([0-9.]+)\): (\S+); sm_90a extend kernel: (\d)", r.stdout)
    assert m, r.stdout[-2000:]
    if archs == "" and tuple(int(x) for x in m.group(1).split(".")[:2]) < (12, 8):
        expect = "80-real;86-real;89;90a-real"  # older toolkits: no sm_100 / sm_120, PTX of 89
    assert (m.group(2), m.group(3)) == (expect, sm90)


@needs_cmake_nvcc
def test_cmake_refuses_pre_sm80(tmp_path):
    r = _configure(tmp_path, "75;80")
    assert r.returncode != 0 and "not supported (sm_80 or newer)" in r.stdout + r.stderr
