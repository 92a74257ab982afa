"""The implicit spring's theta at 5 ms: the 5-s stand at each kappa and the policy-gradient distance from the
fine (0.5 ms explicit) step, beside the 2 ms default and 4 ms.

    python docs/results/sim/implicit_spring_theta.py 1.0 0.5     # from the repository root, ~2 min

The gradient is tests/test_diffsim_native.py's policy-gradient check (a linear policy, 8 `run` starts, 8 control
steps, the motors' gains) from three sets of start frames; the figures are deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
from test_diffsim_native import native_cfg, policy_gradient  # noqa: E402

from bcg_sim.diffsim import make_simulator  # noqa: E402


def cfg(kappa: float, gains: str, dt: float, theta: float):
    """The 5 ms (or dt) step with the normal spring implicit at this theta."""
    return native_cfg(kappa=kappa, gains=gains, dt=dt, spring=True, theta=theta)


def stand(c) -> str:
    """Hold the default pose 5 s: horizontal creep [mm], height change [mm], peak foot force [N]."""
    sim = make_simulator(c, 1)
    q, qd = sim.default_state()
    q0 = q.clone()
    tgt = torch.as_tensor(sim.m.default_joint_q[7:], dtype=torch.float32)[None]
    peak = 0.0
    with torch.no_grad():
        for _ in range(int(5 * c.control_hz)):
            o = sim.step(tgt, q, qd)
            q, qd = o.joint_q, o.joint_qd
            peak = max(peak, float(o.foot_force.max()))
    creep = float((q[0, :2] - q0[0, :2]).norm()) * 1e3
    return f"creep {creep:.2f} mm, height {float(q[0, 2] - q0[0, 2]) * 1e3:+.2f} mm, peak foot force {peak:.0f} N"


def main() -> None:
    thetas = [float(x) for x in sys.argv[1:]] or [1.0, 0.5]
    for th in thetas:
        for k in (50.0, 100.0, 300.0, 1000.0):
            print(f"stand, 5 ms, stand gains, theta {th}, kappa {k:g}: {stand(cfg(k, 'stand', 0.005, th))}", flush=True)
    for k in (300.0, 100.0):
        for start in (0, 4, 2):
            exact = policy_gradient(
                native_cfg(kappa=k, gains="policy", dt=0.0005, stable_pd=False, implicit_contact=False), start
            )
            row = {"2 ms default": policy_gradient(native_cfg(kappa=k, gains="policy"), start)}
            for th in thetas:
                row[f"5 ms theta {th}"] = policy_gradient(cfg(k, "policy", 0.005, th), start)
                row[f"4 ms theta {th}"] = policy_gradient(cfg(k, "policy", 0.004, th), start)
            dist = ", ".join(f"{name} {float((g - exact).norm() / exact.norm()):.3f}" for name, g in row.items())
            print(f"gradient distance, kappa {k:g}, frames {start} + 8k: {dist}", flush=True)


if __name__ == "__main__":
    main()
