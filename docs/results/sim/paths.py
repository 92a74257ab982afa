"""One policy's rollout in MuJoCo and in bcg_sim side by side (bcg-eval's seed 0 start, whole clip, BCG off): the
pelvis position, yaw and tilt against the reference every 0.1 s in a window, then the joints that differ most
between the two simulators and those at the end of their range. What docs/results/sim.md quotes for the jump.

    python docs/results/sim/paths.py POLICY_DIR T0 T1      # after . ./env.sh; e.g. policies/jump 3.6 5.4
"""

import dataclasses
import sys

import numpy as np

from bcg_sim import g1
from bcg_sim.policy import load_policy
from bcg_train.eval.config import load_eval_config
from bcg_train.eval.diffsim_eval import diffsim_rollouts
from bcg_train.eval.evaluate import run_mujoco
from bcg_train.eval.mujoco_eval import clip_seconds

policy = load_policy(sys.argv[1])
t0, t1 = float(sys.argv[2]), float(sys.argv[3])  # [s]
cfg = dataclasses.replace(load_eval_config(), runs=1)
seconds = clip_seconds(policy, cfg.seconds)
(mj,) = run_mujoco(policy, cfg, None, seconds)
(bs,) = diffsim_rollouts(policy, cfg, [mj["seed"]], seconds, None, stop_at_falls=False)
mjq, bsq, ref = mj["rollout"].qpos, bs.qpos, mj["rollout"].ref_qpos  # [T, 7 + 29], root quaternion w x y z
dt = policy.contract.control_dt
rows = range(int(t0 / dt), min(len(mjq), len(bsq), int(t1 / dt)))


def yaw_deg(q):
    w, x, y, z = q[3:7]
    return np.degrees(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def tilt_deg(q):
    x, y = q[4:6]
    return np.degrees(np.arccos(np.clip(1 - 2 * (x * x + y * y), -1, 1)))


print("t [s]   MuJoCo pelvis xyz [m], yaw, tilt [deg] | bcg_sim | reference")
for i in rows[::5]:
    a, b, r = mjq[i], bsq[i], ref[i]
    print(
        f"{i * dt:5.2f}  {np.round(a[:3], 3)} {yaw_deg(a):6.1f} {tilt_deg(a):5.1f} | "
        f"{np.round(b[:3], 3)} {yaw_deg(b):6.1f} {tilt_deg(b):5.1f} | {np.round(r[:3], 3)} {yaw_deg(r):6.1f}"
    )
names = [n.replace("_joint", "") for n in g1.joint_names("29dof")]
lo, hi = (np.asarray(x) for x in g1.joint_limits("29dof"))
print("\nlargest joint differences, MuJoCo - bcg_sim [rad]")
for i in rows[::5]:
    d = mjq[i, 7:] - bsq[i, 7:]
    print(f"{i * dt:5.2f}  " + "  ".join(f"{names[k]} {d[k]:+.2f}" for k in np.argsort(-np.abs(d))[:4]))
print("\njoints within 0.05 rad of (or past) their range [lower, upper]")
for tag, q in (("MuJoCo", mjq), ("bcg_sim", bsq)):
    for i in rows[::2]:
        j = q[i, 7:]
        near = [
            f"{names[k]} {j[k]:.2f} [{lo[k]:.2f}, {hi[k]:.2f}]"
            for k in range(29)
            if not lo[k] + 0.05 < j[k] < hi[k] - 0.05
        ]
        if near:
            print(f"{tag:7s} {i * dt:5.2f}  " + "  ".join(near))
