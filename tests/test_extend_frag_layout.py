"""The extend kernel's MFMA fragment bookkeeping (the HIP path), checked on the CPU.

CI has no AMD GPU, and the part of the HIP path most likely to be wrong is which lane and
register holds which matrix element. csrc/cuda/extend/portable/frag_layout.h states those layouts as
constexpr functions; tests/extend_frag_layout_emul.cpp (built here with g++) emulates
v_mfma_f32_16x16x16 from them and replays one wavefront's K/V tile the way the kernel does
(S^T = K Q^T, mask and online softmax through the accumulator layout with simulated
shuffles, the S^T accumulator reused as the P^T operand, O^T += V^T P^T from the transposed
V tile, epilogue stores), comparing each step with an fp64 matmul. It also replays the
layout-generic softmax on NVIDIA mma.m16n8k16 accumulators.

test_mfma_layout_matches_amd_documentation compares the header's table with the layout
written out independently here from AMD's matrix instruction calculator / CDNA3 ISA guide,
so that the emulator and the kernel cannot agree on a wrong layout.
"""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
SRC = os.path.join(os.path.dirname(__file__), "extend_frag_layout_emul.cpp")


def _cxx():
    return shutil.which("g++") or shutil.which("clang++")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    if _cxx() is None:
        pytest.skip("no C++ compiler")
    exe = str(tmp_path_factory.mktemp("frag") / "emul")
    cmd = [_cxx(), "-std=c++17", "-O1", "-Wall", "-Werror", "-I", os.path.join(ROOT, "csrc"), SRC, "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    return exe


def test_kernel_bookkeeping_matches_matmul(emulator):
    r = subprocess.run([emulator], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ALL OK"), r.stdout[-4000:] + r.stderr[-2000:]
    # Every replay group ran (a silently skipped group would pass vacuously).
    assert r.stdout.count("MFMA replay") == 5 and r.stdout.count("mma.m16n8k16 softmax replay") == 2


def test_mfma_layout_matches_amd_documentation(emulator):
    # v_mfma_f32_16x16x16f16 / _bf16_1k, one wave of 64 lanes, as AMD's matrix instruction
    # calculator lists it (--register-layout): A[i][k] in lane i + 16 * (k // 4), element
    # k % 4 of the 64-bit operand; B[k][j] in lane j + 16 * (k // 4), element k % 4;
    # C/D[i][j] in lane j + 16 * (i // 4), register i % 4.
    a_home = {(i, k): (i + 16 * (k // 4), k % 4) for i in range(16) for k in range(16)}
    b_home = {(k, j): (j + 16 * (k // 4), k % 4) for k in range(16) for j in range(16)}
    d_home = {(i, j): (j + 16 * (i // 4), i % 4) for i in range(16) for j in range(16)}
    r = subprocess.run([emulator, "--dump-mfma-layout"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [list(map(int, line.split())) for line in r.stdout.split("\n") if line.strip()]
    assert len(rows) == 64 * 4
    for lane, e, a_row, a_k, b_k, b_col, c_row, c_col in rows:
        assert a_home[(a_row, a_k)] == (lane, e), ("A", lane, e)
        assert b_home[(b_k, b_col)] == (lane, e), ("B", lane, e)
        assert d_home[(c_row, c_col)] == (lane, e), ("C/D", lane, e)
    # A few entries spelled out as the calculator prints them (v<reg>{<lane>}).
    assert d_home[(0, 0)] == (0, 0) and d_home[(1, 0)] == (0, 1) and d_home[(4, 0)] == (16, 0)
    assert d_home[(5, 3)] == (19, 1) and d_home[(15, 15)] == (63, 3)
    assert a_home[(0, 4)] == (16, 0) and a_home[(3, 13)] == (51, 1)
