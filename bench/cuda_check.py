"""CUDA check of bcg_sim: the same G1 control step on the CPU and on a CUDA device must agree, forward and
backward; then the throughput table on that device. For a machine with a GPU (one prepared script, minutes):

    . ./env.sh && python bench/cuda_check.py --device cuda:0 && python bench/sim_throughput.py --device cuda:0

Exit status 0 when the CUDA step matches the CPU step within the tolerances below (float32 kernels, different
summation order), 1 otherwise. `--device cpu` runs the same comparison CPU-vs-CPU (a self-test of the script).
"""

from __future__ import annotations

import argparse
import dataclasses as dc
import sys
import time

import torch

N_WORLDS = 4
# The two devices run the same float32 kernels with a different reduction order: states agree to ~1e-5 m/rad
# after one 20 ms control step; gradients through 40 substeps of stiff contact to a few 1e-3 relative.
STATE_ATOL = 1e-4
GRAD_RTOL = 1e-2


def one_step(device: str):
    """Joint state and gradient of sum(joint_q) w.r.t. the PD targets after one control step from the default
    pose with a small target offset: (joint_q [N, 36], d/d target [N, 29], seconds)."""
    from bcg_sim.diffsim import Simulator, load_sim_config

    cfg = load_sim_config()
    cfg = dc.replace(cfg, device=device).validate()
    sim = Simulator(cfg, N_WORLDS)
    q, qd = sim.default_state()
    default = torch.as_tensor(sim.m.default_joint_q[7:], dtype=torch.float32, device=sim.torch_device)
    offsets = torch.linspace(-0.05, 0.05, N_WORLDS, device=sim.torch_device)[:, None]
    target = (default[None] + offsets).requires_grad_(True)
    t0 = time.perf_counter()
    out = sim.step(target, q, qd)
    out.joint_q.sum().backward()
    if sim.torch_device.type == "cuda":
        torch.cuda.synchronize()
    return out.joint_q.detach().cpu(), target.grad.detach().cpu(), time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda:0", help="device to compare with the CPU (default cuda:0)")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"cuda_check: torch sees no CUDA device (torch {torch.__version__}); install a CUDA build of torch",
              file=sys.stderr)
        return 1
    q_cpu, g_cpu, t_cpu = one_step("cpu")
    q_dev, g_dev, t_dev = one_step(args.device)
    dq = float((q_cpu - q_dev).abs().max())
    dg = float((g_cpu - g_dev).abs().max() / g_cpu.abs().max().clamp_min(1e-12))
    ok = dq <= STATE_ATOL and dg <= GRAD_RTOL and bool(torch.isfinite(g_dev).all())
    print(f"cuda_check: one control step, {N_WORLDS} worlds: cpu {t_cpu:.2f} s, {args.device} {t_dev:.2f} s "
          f"(first call includes kernel build); max |joint_q difference| {dq:.2e} (tol {STATE_ATOL:g}), "
          f"max relative gradient difference {dg:.2e} (tol {GRAD_RTOL:g}) -> {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
