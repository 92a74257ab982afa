"""Where a policy's PD targets sit during a take-off, in MuJoCo (bcg-eval's start, seed 0): every 0.05 s, for
hip pitch, knee and ankle pitch of both legs, the share of physics steps whose target is at an end of the
target range (the joint range, widened by the contract's target_reach), the largest |tau| / effort limit and
the mean joint angle [rad]. Usage: jump_targets.py POLICY T0 T1"""

import dataclasses
import sys

import numpy as np

from bcg_policy_node.mujoco_bridge import G1Sim
from bcg_sim.g1.joints import JOINTS_29
from bcg_sim.policy import load_policy
from bcg_train.eval.config import load_eval_config
from bcg_train.eval.evaluate import run_mujoco
from bcg_train.eval.mujoco_eval import clip_seconds

pol = load_policy(sys.argv[1])
t0, t1 = float(sys.argv[2]), float(sys.argv[3])
cfg = dataclasses.replace(load_eval_config(), runs=1)
rec = []
step0 = G1Sim.step


def step(self, n=1):  # the bridge's step, recording every physics step's target, angle and torque
    for _ in range(n):
        step0(self, 1)
        c = self.command
        target = c.q[self.slots].copy() if c is not None else np.full(len(self.joints), np.nan)
        rec.append((self.data.time, self.data.qpos[self.qadr].copy(), target, np.abs(self.tau) / self.effort_limit))


G1Sim.step = step
run_mujoco(pol, cfg, None, clip_seconds(pol, cfg.seconds), False)
names = [j.name for j in JOINTS_29]
T = np.array([r[0] for r in rec])
Q, TARGET, TAU = (np.array([r[k] for r in rec]) for k in (1, 2, 3))
lo, hi = pol.contract.target_range()
at_end = (np.abs(TARGET - lo) < 1e-6) | (np.abs(TARGET - hi) < 1e-6)
legs = [i for i, n in enumerate(names) if any(k in n for k in ("hip_pitch", "knee", "ankle_pitch"))]
print("t [s] " + "  ".join(f"{names[i][:17]:>17s}" for i in legs))
print("      " + "  ".join(f"{'at end |tau| q':>17s}" for _ in legs))
for a in np.arange(t0, t1, 0.05):
    m = (T >= a) & (T < a + 0.05)
    if not m.any():
        break
    cells = [f"{100 * at_end[m, i].mean():3.0f}% {TAU[m, i].max():.2f} {Q[m, i].mean():+.2f}" for i in legs]
    print(f"{a:5.2f} " + "  ".join(f"{c:>17s}" for c in cells))
print("target ranges [rad]: " + ", ".join(f"{names[i]} [{lo[i]:.2f}, {hi[i]:.2f}]" for i in legs))
