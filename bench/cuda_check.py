"""CUDA check of bcg_sim: the same G1 control step on the CPU and on a CUDA device must agree, forward and
backward, and so must a short policy rollout through stiff foot contact with Bundled Contact Gradients (reset
from a clip, touchdowns, branch pool, leg-Jacobian perturbation, bundle mean, backward); then the throughput
table on that device. For a machine with a GPU (one prepared script, minutes):

    . ./env.sh && python bench/cuda_check.py --device cuda:0 && python bench/sim_throughput.py --device cuda:0

Exit status 0 when the CUDA step and the BCG rollout match the CPU within the tolerances below (float32 kernels,
different summation order), 1 otherwise. `--device cpu` runs the same comparison CPU-vs-CPU (a self-test of the script).
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
# The BCG rollout: a few control steps of a fixed policy from run-clip frames at kappa = 300 with BCG on. Same
# seeds on both devices, so the branch perturbations are identical; float32 differences grow through contact
# over the rollout, hence the looser gradient tolerance. Touchdown counts must match exactly.
BCG_WORLDS = 4
BCG_HORIZON = 6
BCG_KAPPA = 300.0
BCG_GRAD_RTOL = 5e-2


def relative_difference(ref: torch.Tensor, other: torch.Tensor) -> float:
    """max |ref - other| over max |ref|: one number for a whole gradient, insensitive to its tiny entries."""
    return float((ref - other).abs().max() / ref.abs().max().clamp_min(1e-12))


def one_step(device: str):
    """Joint state and gradient of sum(joint_q) w.r.t. the PD targets after one control step from the default
    pose with a small target offset: (joint_q [N, 36], d/d target [N, 29], seconds)."""
    from bcg_sim.diffsim import Simulator, load_sim_config

    cfg = load_sim_config().with_backend("newton")  # the CUDA path is the newton backend
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


def bcg_rollout(device: str):
    """Per-world policy gradients [N, P], touchdowns and bundles of a short BCG-on rollout on `device`."""
    import numpy as np

    import bcg_sim.motion
    from bcg_sim.diffsim import G1DiffEnv, load_sim_config
    from bcg_sim.diffsim.gradvar import per_world_gradients

    cfg = load_sim_config().with_backend("newton")
    cfg = dc.replace(
        cfg, device=device, bcg=dc.replace(cfg.bcg, enabled=True, pool_size=cfg.bcg.branches * BCG_WORLDS * 2)
    )
    env = G1DiffEnv(cfg.with_kappa(BCG_KAPPA), BCG_WORLDS)
    motion = bcg_sim.motion.load("run")
    frames = np.linspace(0, motion.num_frames // 2, BCG_WORLDS).round().astype(int)
    grads, _, touchdowns = per_world_gradients(env, motion, frames, BCG_HORIZON, seed=0)
    return torch.as_tensor(grads), touchdowns, env.bcg_stats().bundles_completed


def check_bcg(device: str) -> bool:
    g_cpu, td_cpu, nb_cpu = bcg_rollout("cpu")
    g_dev, td_dev, nb_dev = bcg_rollout(device)
    dg = relative_difference(g_cpu, g_dev)
    ok = (
        td_cpu == td_dev
        and nb_cpu == nb_dev
        and nb_cpu > 0
        and dg <= BCG_GRAD_RTOL
        and bool(torch.isfinite(g_dev).all())
    )
    print(
        f"cuda_check: BCG rollout, {BCG_WORLDS} worlds x {BCG_HORIZON} steps at kappa {BCG_KAPPA:g}: touchdowns "
        f"cpu {td_cpu} / {device} {td_dev}, bundles {nb_cpu} / {nb_dev}, max relative policy-gradient "
        f"difference {dg:.2e} (tol {BCG_GRAD_RTOL:g}) -> {'OK' if ok else 'MISMATCH'}"
    )
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda:0", help="device to compare with the CPU (default cuda:0)")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            f"cuda_check: torch sees no CUDA device (torch {torch.__version__}); install a CUDA build of torch",
            file=sys.stderr,
        )
        return 1
    q_cpu, g_cpu, t_cpu = one_step("cpu")
    q_dev, g_dev, t_dev = one_step(args.device)
    dq = float((q_cpu - q_dev).abs().max())
    dg = relative_difference(g_cpu, g_dev)
    step_ok = dq <= STATE_ATOL and dg <= GRAD_RTOL and bool(torch.isfinite(g_dev).all())
    print(
        f"cuda_check: one control step, {N_WORLDS} worlds: cpu {t_cpu:.2f} s, {args.device} {t_dev:.2f} s "
        f"(first call includes kernel build); max |joint_q difference| {dq:.2e} (tol {STATE_ATOL:g}), "
        f"max relative gradient difference {dg:.2e} (tol {GRAD_RTOL:g}) -> {'OK' if step_ok else 'MISMATCH'}"
    )
    bcg_ok = check_bcg(args.device)
    return 0 if step_ok and bcg_ok else 1


if __name__ == "__main__":
    sys.exit(main())
