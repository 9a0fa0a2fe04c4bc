"""The environment variables: read once, in python/mixed_attn/env.py, listed in the README."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def run_with_env(code, **env):
    # The child imports the very mixed_attn this process tests (the source tree that conftest put
    # on sys.path, or the installed wheel), whatever PYTHONPATH pytest was started with.
    import mixed_attn
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(mixed_attn.__file__)))
    path = os.pathsep.join(p for p in (pkg_parent, os.environ.get("PYTHONPATH", "")) if p)
    full = dict(os.environ, PYTHONPATH=path, **env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)
    return r


def test_split_dispatch_zero_forces_fold():
    code = ("import mixed_attn\n"
            "w = mixed_attn.MixedAttention(4, 2, 64, 16, device='cpu', max_batch=4, max_tokens=64)\n"
            "print(w.mode, w.forced_fold, w.partial_out is None)")
    r = run_with_env(code, MIXED_ATTN_SPLIT_DISPATCH="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["fold", "True", "True"]


def test_mode_variable_is_the_default_mode():
    code = ("import mixed_attn\n"
            "a = mixed_attn.MixedAttention(4, 2, 64, 16, device='cpu', max_batch=4, max_tokens=64)\n"
            "b = mixed_attn.MixedAttention(4, 2, 64, 16, device='cpu', max_batch=4, max_tokens=64, mode='split')\n"
            "print(a.mode, b.mode)")
    r = run_with_env(code, MIXED_ATTN_MODE="auto")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["auto", "split"]
    r = run_with_env("import mixed_attn", MIXED_ATTN_MODE="fast")
    assert r.returncode != 0 and "MIXED_ATTN_MODE='fast'" in r.stderr


def test_bad_value_names_the_variable():
    r = run_with_env("import mixed_attn", MIXED_ATTN_EXTEND_KERNEL="fast")
    assert r.returncode != 0
    assert "MIXED_ATTN_EXTEND_KERNEL='fast'" in r.stderr


def test_env_is_a_default_an_argument_wins():
    # On the CPU every GPU kernel request is an error; the variable is a default only, so an
    # explicit argument overrides it (here the CPU's "auto").
    code = ("import mixed_attn\n"
            "w = mixed_attn.MixedAttention(4, 2, 64, 16, device='cpu', extend_kv_splits=1)\n"
            "print(w.launch_policy['extend_kernel'])")
    r = run_with_env(code, MIXED_ATTN_EXTEND_KV_SPLITS="2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cpu"


def test_extend_persistent_variable_reaches_the_plan_config():
    # 0 goes into the wrapper's config; 1 asks for the sm90 kernel's persistent launch, which a
    # CPU wrapper cannot honour: an error naming it when the wrapper is built.
    code = ("import mixed_attn\n"
            "from mixed_attn.plan_info import CONFIG_INDEX\n"
            "w = mixed_attn.MixedAttention(4, 2, 64, 16, device='cpu', max_batch=4, max_tokens=64)\n"
            "print(w._config[CONFIG_INDEX['extend_persistent']])")
    r = run_with_env(code, MIXED_ATTN_EXTEND_PERSISTENT="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"
    r = run_with_env(code, MIXED_ATTN_EXTEND_PERSISTENT="1")
    assert r.returncode != 0 and "extend_persistent=1 needs the sm90 extend kernel" in r.stderr
    r = run_with_env("import mixed_attn", MIXED_ATTN_EXTEND_PERSISTENT="yes")
    assert r.returncode != 0 and "MIXED_ATTN_EXTEND_PERSISTENT='yes'" in r.stderr


def _sources():
    for top in ("csrc", "python"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".py", ".cc", ".cu", ".cuh", ".h")):
                    yield os.path.join(dirpath, f)


def test_only_env_module_reads_the_environment():
    offenders = []
    for path in _sources():
        text = open(path, encoding="utf-8").read()
        if path.endswith(os.path.join("mixed_attn", "env.py")):
            continue
        # Our variables only (Triton's TRITON_INTERPRET belongs to Triton).
        if re.search(r"(getenv\(|environ\.get\(|environ\[)\s*[\"']MIXED_ATTN_", text):
            offenders.append(os.path.relpath(path, ROOT))
    assert offenders == [], f"these read the environment outside mixed_attn/env.py: {offenders}"


def test_readme_lists_every_variable():
    from mixed_attn import env

    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    table = [line for line in readme.splitlines() if line.startswith("| `MIXED_ATTN_")]
    listed = {re.match(r"\| `(MIXED_ATTN_[A-Z_]+)", line).group(1) for line in table}
    assert set(env.VARIABLES) <= listed, set(env.VARIABLES) - listed


@pytest.mark.parametrize("var", ["MIXED_ATTN_EXTEND_KERNEL", "MIXED_ATTN_DECODE_KERNEL"])
def test_gpu_kernel_requests_rejected_on_cpu_plans(var):
    # The CPU implementation has no kernel families: the wrapper plans "auto" there, whatever
    # the default says, so a GPU-oriented environment does not break CPU use.
    code = "import mixed_attn; mixed_attn.MixedAttention(4, 2, 64, 16, device='cpu')"
    r = run_with_env(code, **{var: "portable" if "DECODE" in var else "mma"})
    assert r.returncode == 0, r.stderr
