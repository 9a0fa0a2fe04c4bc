"""The search that maps a token to its row (the KV save) and an arena slot to its decode row (a
graph-safe decode launch): csrc/cuda/common/find_owner.h, built with g++ from
tests/find_owner_check.cpp and checked on the CPU against a linear scan, with the number of
reads it makes (two where rows own equal shares, the decode-only steps a captured graph replays)."""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_find_owner_matches_scan(tmp_path):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = str(tmp_path / "find_owner_check")
    src = os.path.join(os.path.dirname(__file__), "find_owner_check.cpp")
    r = subprocess.run(
        [cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-I", os.path.join(ROOT, "csrc"), src, "-o", exe],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([exe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ALL OK"), r.stdout[-4000:] + r.stderr[-2000:]
    assert "at most 2 reads" in r.stdout, r.stdout
