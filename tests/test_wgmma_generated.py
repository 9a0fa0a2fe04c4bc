"""The checked-in sm_90a wgmma wrappers are exactly what tools/gen_wgmma.py emits (CPU only)."""

import importlib.util
import os

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _generator():
    spec = importlib.util.spec_from_file_location("gen_wgmma", os.path.join(ROOT, "tools", "gen_wgmma.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_extend_wgmma_header_is_generated():
    gen = _generator()
    with open(os.path.join(ROOT, "csrc", "cuda", "extend/sm90/wgmma.cuh")) as f:
        checked_in = f.read()
    assert checked_in == gen.generate(), "csrc/cuda/extend/sm90/wgmma.cuh is stale: run python3 tools/gen_wgmma.py"


def test_generator_emits_only_used_shapes():
    # Every generated specialisation is one extend/sm90/mainloop.cuh can instantiate: Wgmma for the
    # head dims (P V, B transposed), WgmmaSS for the K/V tile widths (Q K^T).
    gen = _generator()
    assert sorted(n for n, _ in gen.USED_RS) == [64, 128, 256]
    assert all(trans_b for _, trans_b in gen.USED_RS)
    assert sorted(gen.USED_SS) == [64, 128]
