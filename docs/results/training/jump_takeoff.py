"""A policy's take-offs in MuJoCo (one seed, bcg-eval's start): per 0.1 s, the share of leg-motor torque samples
at the effort limit, the largest |tau| / limit, and the horizontal speed of the whole-body centre of mass, robot
vs reference (the reference's COM from its kinematic pose). Usage: sat.py POLICY [T0 T1]"""

import dataclasses
import sys

import mujoco
import numpy as np

from bcg_policy_node.mujoco_bridge import G1Sim
from bcg_sim.g1.joints import JOINTS_29
from bcg_sim.policy import load_policy
from bcg_train.eval.config import load_eval_config
from bcg_train.eval.evaluate import run_mujoco
from bcg_train.eval.mujoco_eval import clip_seconds

pol = load_policy(sys.argv[1])
t0, t1 = (float(sys.argv[2]), float(sys.argv[3])) if len(sys.argv) > 3 else (0.0, 1e9)
cfg = dataclasses.replace(load_eval_config(), runs=1)
secs = clip_seconds(pol, cfg.seconds)
rec, sims = [], []
step0 = G1Sim.step


def step(self, n=1):  # the bridge's step, recording every physics step's torque and COM
    if not sims:
        sims.append(self)
    for _ in range(n):
        step0(self, 1)
        rec.append((self.data.time, self.tau.copy(), self.data.subtree_com[1].copy()))


G1Sim.step = step
ro = run_mujoco(pol, cfg, None, secs, False)[0]["rollout"]
sim = sims[0]
names = [str(getattr(j, "name", j)) for j in JOINTS_29]
leg = [i for i, n in enumerate(names) if any(k in n for k in ("hip", "knee", "ankle"))]
T = np.array([r[0] for r in rec])
tau = np.abs(np.array([r[1] for r in rec]))[:, leg] / sim.effort_limit[leg]
com = np.array([r[2] for r in rec])
probe = mujoco.MjData(sim.model)


def ref_com(qpos):  # whole-body COM of the reference pose (robot coordinates: 7 root + 29 motor-order joints)
    probe.qpos[:7], probe.qpos[sim.qadr] = qpos[:7], qpos[7:]
    mujoco.mj_kinematics(sim.model, probe)
    mujoco.mj_comPos(sim.model, probe)
    return probe.subtree_com[1].copy()


dt = pol.contract.control_dt
print(" t [s]  at limit  max|tau|/lim  COM speed robot / ref [m/s]  pelvis z robot / ref [m]")
for a in np.arange(max(0.0, t0), min(T[-1] - 0.1, t1), 0.1):
    m = (T >= a) & (T < a + 0.1)
    k, k2 = int(round(a / dt)), int(round((a + 0.1) / dt))
    if k2 >= len(ro.qpos):
        break
    v = np.linalg.norm(com[m][-1, :2] - com[m][0, :2]) / (T[m][-1] - T[m][0])
    vr = np.linalg.norm(ref_com(ro.ref_qpos[k2])[:2] - ref_com(ro.ref_qpos[k])[:2]) / 0.1
    print(
        f"{a:5.1f}  {100 * (tau[m] >= 1 - 1e-6).mean():6.1f} %  {tau[m].max():11.2f}  {v:13.2f} / {vr:4.2f}"
        f"  {ro.qpos[k, 2]:12.2f} / {ro.ref_qpos[k, 2]:.2f}"
    )
