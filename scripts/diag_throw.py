"""Which host-op error paths crash on this machine? Each case runs in its own process."""
import subprocess
import sys

CASES = {
    "plan_bad_lengths": "torch.ops.mixed_attn.plan(t([0,3,3]), t([0,1,2]), t([3,4]), torch.zeros(100, dtype=torch.int32), 16, 4, 1, 64, -1, 0, 132, False, 2048, 32, 64)",
    "plan_bad_dtype": "torch.ops.mixed_attn.plan(torch.tensor([0,1.]), t([0,1]), t([3]), torch.zeros(100, dtype=torch.int32), 16, 4, 1, 64, -1, 0, 132, False, 2048, 32, 64)",
    "tile_op_cpu_ok": "print(torch.ops.mixed_attn.extend_tile_tokens(torch.device('cpu'), 64, 4))",
    "plan_ok": "print(torch.ops.mixed_attn.plan(t([0,3,4]), t([0,1,2]), t([3,4]), torch.zeros(100, dtype=torch.int32), 16, 4, 1, 64, -1, 0, 132, False, 2048, 32, 64)[:3])",
    "forward_cpu_bad": "torch.ops.mixed_attn.forward(torch.zeros(3,4,64), None, None, torch.zeros(1,16,1,64), torch.zeros(1,16,1,64), t([0]), t([0]), [0]*28, None, None, torch.zeros(3,4,64), None, None, 1.0, 0.0, -1, 1.0, 1.0)",
}
PRE = "import torch, mixed_attn\nt = lambda x: torch.tensor(x, dtype=torch.int32)\ntry:\n    {}\nexcept RuntimeError as e:\n    print('raised:', str(e).splitlines()[0][:120])\n"
for name, code in CASES.items():
    r = subprocess.run([sys.executable, "-c", PRE.format(code)], capture_output=True, text=True)
    print(f"{name}: rc={r.returncode} {r.stdout.strip()[:200]} {r.stderr.strip()[-300:] if r.returncode else ''}")
