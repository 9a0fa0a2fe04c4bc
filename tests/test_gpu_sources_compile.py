"""Every GPU source compiles: nvcc for sm_90 and sm_90a, hipcc (where installed) for gfx90a and
gfx942 (gfx940 where the toolchain predates gfx942).

The kernels never include torch, so this needs only the compilers, not a GPU or a CUDA torch.
"""

import glob
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
# Recursive, as CMakeLists.txt globs: kernel families may live in csrc/cuda/<family>/.
SOURCES = sorted(glob.glob(os.path.join(ROOT, "csrc", "cuda", "**", "*.cu"), recursive=True))
INCLUDES = ["-I", os.path.join(ROOT, "csrc", "include"), "-I", os.path.join(ROOT, "csrc")]


def _nvcc():
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


@pytest.mark.skipif(_nvcc() is None, reason="nvcc not installed")
@pytest.mark.parametrize("src", SOURCES, ids=lambda p: os.path.relpath(p, os.path.join(ROOT, "csrc", "cuda")))
def test_nvcc_sm90(src, tmp_path):
    cmd = [_nvcc(), "-std=c++17", "-O3", "--expt-relaxed-constexpr", *INCLUDES,
           "-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_90a,code=sm_90a",
           "-c", src, "-o", str(tmp_path / "k.o")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]


HIP_PORTABLE = [s for s in SOURCES if "wgmma" not in os.path.basename(s)]


def _cdna3_arch():
    """gfx942 (MI300X) where hipcc knows it, else gfx940 (same CDNA3 ISA; Debian's ROCm 5.2)."""
    if shutil.which("hipcc") is None:
        return "gfx940"
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "p.hip")
        open(src, "w").write("__global__ void k() {}\n")
        r = subprocess.run(["hipcc", "-x", "hip", "--offload-arch=gfx942", "--cuda-device-only", "-c",
                            src, "-o", os.path.join(d, "p.o")], capture_output=True,
                           env=dict(os.environ, HIP_PLATFORM="amd"))
    return "gfx942" if r.returncode == 0 else "gfx940"


CDNA3 = _cdna3_arch()


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
@pytest.mark.parametrize("src", HIP_PORTABLE, ids=lambda p: os.path.relpath(p, os.path.join(ROOT, "csrc", "cuda")))
def test_hipcc_cdna(src, tmp_path):
    cmd = ["hipcc", "-std=c++17", "-O3", "-x", "hip", *INCLUDES, "--offload-arch=gfx90a",
           f"--offload-arch={CDNA3}", "-c", src, "-o", str(tmp_path / "k.o")]
    # Debian's hipcc picks the NVIDIA platform when nvcc is installed too: ask for AMD.
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, HIP_PLATFORM="amd"))
    assert r.returncode == 0, r.stderr[-4000:]


def test_there_are_gpu_sources():
    # The glob above must find the kernels (a moved folder would silently skip every compile).
    assert os.path.isdir(os.path.join(ROOT, "csrc", "cuda"))


@pytest.mark.skipif(shutil.which("hipcc") is None, reason="hipcc not installed")
@pytest.mark.parametrize("arch", ["gfx90a", CDNA3])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_hipcc_extend_uses_mfma(arch, head_dim, tmp_path):
    # The extend kernel's body exists only where MA_EXTEND_HAS_MMA holds (extend/portable/mma.cuh); were
    # it off for CDNA, the sources would still compile, to empty kernels. So look in the device
    # code for the MFMA instructions of both input types (gfx940 spells them with an extra '_'),
    # and for no scratch memory (register spills; the tile shapes must fit in registers).
    src = os.path.join(ROOT, "csrc", "cuda", "extend", f"instantiate_hd{head_dim}.cu")
    out = tmp_path / "k.s"
    cmd = ["hipcc", "-std=c++17", "-O3", "-x", "hip", *INCLUDES, f"--offload-arch={arch}",
           "--cuda-device-only", "-S", src, "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, HIP_PLATFORM="amd"))
    assert r.returncode == 0, r.stderr[-4000:]
    asm = out.read_text()
    assert re.search(r"v_mfma_f32_16x16x16_?f16\b", asm), "no fp16 MFMA in the extend kernel"
    assert re.search(r"v_mfma_f32_16x16x16_?bf16(_1k)?\b", asm), "no bf16 MFMA in the extend kernel"
    scratch = re.findall(r"\.private_segment_fixed_size:\s+(\d+)", asm)
    assert scratch and all(s == "0" for s in scratch), f"scratch use (spills?): {scratch}"
