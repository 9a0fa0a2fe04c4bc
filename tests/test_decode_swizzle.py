"""The decode ring's shared-memory swizzle (csrc/cuda/decode/tc_common.cuh, swizzle()) is free of
bank conflicts for its three read patterns (QK, VRows, ldmatrix.trans), read from the source and
checked phase by phase by tools/decode_swizzle_check.py. CPU only."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import decode_swizzle_check as dsc  # noqa: E402


@pytest.mark.parametrize("chunks", [8, 16, 32])
def test_source_swizzle_is_conflict_free(chunks):
    s = dsc.source_swizzle(chunks)
    assert sorted(s) == list(range(8)), f"swizzle<{chunks}> is not a permutation of the 8 bank groups: {s}"
    qk, vrows, ldmatrix = dsc.checks(chunks, s)
    assert qk and vrows and ldmatrix, f"swizzle<{chunks}> {s}: QK {qk}, VRows {vrows}, ldmatrix {ldmatrix}"


def test_checker_finds_conflicts():
    # The identity (no swizzle) conflicts on ldmatrix's 8 rows at one chunk of 8-chunk rows, and
    # the TMA engine's chunk ^ row on QK's pattern: the checker can fail.
    assert not dsc.checks(8, [0] * 8)[2]
    assert not dsc.checks(8, list(range(8)))[0]
