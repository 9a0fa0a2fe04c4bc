"""The launch-estimate fitting tools run on the CPU: tools/sweep_extend_launches.py --dry-run plans
its compositions with the real planner (each variant gets the KV split and launch it asks for), and
tools/estimate_models.py reads the sweep and reports every model and the refit."""

import json
import os
import subprocess
import sys

import mixed_attn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
    # The child imports the mixed_attn this test runs against (the source tree's or an installed one).
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(mixed_attn.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (pkg_parent, os.environ.get("PYTHONPATH")) if p))
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=True).stdout


def test_sweep_dry_run_and_models(tmp_path):
    sweep = tmp_path / "sweep.json"
    _run(os.path.join(ROOT, "tools", "sweep_extend_launches.py"), "--n", "5", "--dry-run", "--json", str(sweep))
    data = json.loads(sweep.read_text())
    recs = data["records"]
    assert len(recs) == 15 and data["heads"] == [32, 8, 128]
    for r in recs:
        assert r["tile_keys"] == sorted(r["tile_keys"], reverse=True)  # costliest first
        assert r["kv_splits"] == (2 if r["variant"] == "split2" else 1)
        assert (r["ctas"] > 0) == (r["variant"] == "persistent")
    for i, r in enumerate(recs):  # stand-in times: the report's arithmetic, not a fit
        r["us"] = 50.0 + 10.0 * i
    sweep.write_text(json.dumps(data))
    out = _run(os.path.join(ROOT, "tools", "estimate_models.py"), "--sweep", str(sweep))
    for model in ("rounds:", "list:", "snake:", "persistent:", "list refit:"):
        assert model in out
