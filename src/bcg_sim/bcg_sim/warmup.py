"""Compile and cache both simulator backends at setup time: `python -m bcg_sim.warmup`.

Runs a tiny G1 (one world, one control step) forward and backward through each backend:
- newton: every Warp kernel a run needs -- Newton's Featherstone (tile GEMM/Cholesky for the G1's size), its
  forward kinematics, and bcg's contact/PD/diagnostic kernels with their adjoints -- built into
  $WARP_CACHE_PATH (a cold build takes about a minute; afterwards loading takes seconds);
- native: the C++ library of `bcg_sim.diffsim.native`, compiled into $BCG_NATIVE_CACHE (1-3 min cold).
"""

from __future__ import annotations

import argparse
import time


def warmup(config: str = "sim") -> float:
    """Build the kernels; returns the seconds it took."""
    import torch

    from bcg_sim.diffsim import load_sim_config, make_simulator

    t0 = time.perf_counter()
    cfg = load_sim_config(config)
    for backend in ("native", "newton"):
        sim = make_simulator(cfg.with_backend(backend), 1)
        q, qd = sim.default_state()
        target = torch.as_tensor(sim.m.default_joint_q[7:], dtype=torch.float32)[None].requires_grad_(True)
        out = sim.step(target, q, qd)
        (out.joint_q.sum() + out.body_q.sum()).backward()
        if not torch.isfinite(target.grad).all():
            raise RuntimeError(f"warm-up gradient of the {backend} backend is not finite")
    return time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(
        description="Compile and cache both simulator backends (Warp kernels, native library)."
    )
    ap.add_argument("--config", default="sim", help="sim config name or path (default: config/sim.yaml)")
    args = ap.parse_args(argv)
    import warp as wp

    seconds = warmup(args.config)
    from bcg_sim.diffsim.native import library_path

    print(
        f"bcg_sim warm-up: G1 forward+backward of both backends compiled/loaded in {seconds:.1f} s "
        f"(Warp cache: {wp.config.kernel_cache_dir or 'default'}; native: {library_path()})"
    )


if __name__ == "__main__":
    main()
