"""The sm_90a extend kernel's KV-split policy (csrc/cuda/extend_split_policy.h), on the CPU.

The policy decides from the launch size alone how many CTAs of a cluster share one query tile;
the GPU tests check that every split count computes the right thing, this checks which one the
policy picks for the launches the H200 measurements were made on (benchmarks/RESULTS.md).
"""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include "cuda/extend_split_policy.h"
int main(int argc, char** argv) {
  for (int i = 1; i + 2 < argc; i += 3)
    std::printf("%d\n", mixed_attn::gpu::extend_detail::sm90_kv_splits(
                            std::atoll(argv[i]), std::atoi(argv[i + 1]), std::atoi(argv[i + 2])));
  return 0;
}
"""


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    d = tmp_path_factory.mktemp("policy")
    src, exe = d / "policy.cc", str(d / "policy")
    src.write_text(PROGRAM)
    r = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-I", os.path.join(ROOT, "csrc"),
                        str(src), "-o", exe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]

    def run(cases):
        args = [str(x) for case in cases for x in case]
        out = subprocess.run([exe, *args], capture_output=True, text=True, check=True).stdout
        return [int(v) for v in out.split()]

    return run


def test_measured_launches(policy):
    cases = {
        (176, 132, 2): 2,  # case D at d128/d64: 22 tiles x 8 heads, two waves with the second 1/3 full
        (688, 132, 2): 1,  # case B: five-plus waves, costliest first: splitting measured 4% slower
        (128, 132, 2): 2,  # case D at d256: one wave, split in two measured 5% faster (a tie here)
        (10, 132, 2): 2,   # a small launch: half the CTAs' work each
        (396, 132, 2): 1,  # three waves or more: never
        (300, 132, 2): 2,  # 3 waves unsplit against 2.5
    }
    assert policy(list(cases)) == list(cases.values())


def test_degenerate_inputs_do_not_split(policy):
    assert policy([(0, 132, 2), (50, 0, 2), (50, 132, 1), (-5, 132, 2)]) == [1, 1, 1, 1]


def test_result_within_bounds(policy):
    cases = [(b, sms, m) for b in (1, 7, 66, 131, 133, 200, 263, 265, 395) for sms in (78, 132) for m in (1, 2, 3, 4)]
    for (b, sms, m), s in zip(cases, policy(cases)):
        assert 1 <= s <= m, (b, sms, m, s)
