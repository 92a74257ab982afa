"""Compile and cache bcg_sim's Warp kernels at setup time: `python -m bcg_sim.warmup`.

Runs a tiny G1 (one world, one control step) forward and backward through the differentiable simulator,
so every kernel a training run needs -- Newton's Featherstone (tile GEMM/Cholesky for the G1's size), its
forward kinematics, and bcg's contact/PD/diagnostic kernels with their adjoints -- is built into
$WARP_CACHE_PATH once (a cold build takes about a minute; afterwards loading takes seconds).
"""

from __future__ import annotations

import argparse
import time


def warmup(config: str = "sim") -> float:
    """Build the kernels; returns the seconds it took."""
    import torch

    from bcg_sim.diffsim import Simulator, load_sim_config

    t0 = time.perf_counter()
    cfg = load_sim_config(config)
    sim = Simulator(cfg, 1)
    q, qd = sim.default_state()
    target = torch.as_tensor(sim.m.default_joint_q[7:], dtype=torch.float32)[None].requires_grad_(True)
    out = sim.step(target, q, qd)
    (out.joint_q.sum() + out.body_q.sum()).backward()
    if not torch.isfinite(target.grad).all():
        raise RuntimeError("warm-up gradient is not finite")
    return time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="Compile and cache bcg_sim's Warp kernels.")
    ap.add_argument("--config", default="sim", help="sim config name or path (default: config/sim.yaml)")
    args = ap.parse_args(argv)
    import warp as wp

    seconds = warmup(args.config)
    print(f"bcg_sim warm-up: G1 forward+backward compiled/loaded in {seconds:.1f} s "
          f"(cache: {wp.config.kernel_cache_dir or 'default'})")


if __name__ == "__main__":
    main()
