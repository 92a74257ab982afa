"""How far the soles creep under a sideways shove: MuJoCo (the project G1, its own soft contact) against bcg_sim's
native step at friction slope x 1 / 0.5 / 0.3 (task.randomize.friction_slope_scale), both with the soles' mu 0.6
of the MJCF, the bring-up stand gains, kappa 300. Settle 0.4 s, add V m/s sideways to the whole robot, print the
mean foot (ankle roll link) displacement over 0.3 s.

    python docs/results/sim/creep.py [V]      # after . ./env.sh; V default 0.15 m/s
"""

import dataclasses as dc
import sys

import mujoco
import numpy as np
import torch

from bcg_sim import g1
from bcg_sim.diffsim import load_sim_config, make_simulator
from bcg_sim.diffsim.model import pd_gains
from bcg_sim.diffsim.world_params import WorldParams

V = float(sys.argv[1]) if len(sys.argv) > 1 else 0.15  # [m/s]
SLOPES = [1.0, 0.5, 0.3]
MJ_DT = 0.0005  # [s] MuJoCo's step, as bcg-sim parity

cfg = load_sim_config()
cfg = dc.replace(cfg, contact=dc.replace(cfg.contact, kappa=300.0), actuation=dc.replace(cfg.actuation, gains="stand"))
sim = make_simulator(cfg, len(SLOPES))
params = WorldParams.nominal(len(SLOPES))
params.friction_slope_scale = torch.tensor(SLOPES, dtype=torch.float64)
params.friction_scale[:] = g1.description.FOOT_FRICTION / cfg.contact.friction_mu  # the MJCF's soles

m = g1.load_mujoco(cfg.variant, floor=True)
d = mujoco.MjData(m)
m.opt.timestep = MJ_DT
motors = [g1.MOTORS[j.motor] for j in g1.joints(cfg.variant)]
kp, kd = (np.asarray(g, dtype=np.float64) for g in pd_gains(cfg))
effort = np.array([mo.effort_limit for mo in motors])
m.dof_armature[6:] = np.maximum([mo.armature for mo in motors], cfg.actuation.min_armature)
m.actuator_ctrlrange[:] = np.stack([-effort, effort], 1)
d.qpos[:] = g1.default_qpos(cfg.variant)
mujoco.mj_forward(m, d)
target = np.asarray(g1.default_joint_pos(cfg.variant))

feet = [n for n in sim.m.body_names if "ankle_roll" in n]
feet_bcg = [sim.m.body_names.index(n) for n in feet]
feet_mj = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in feet]


def mujoco_control_step():
    for _ in range(round(cfg.control_dt / MJ_DT)):
        d.ctrl[:] = np.clip(kp * (target - d.qpos[7:]) - kd * d.qvel[6:], -effort, effort)
        mujoco.mj_step(m, d)


q, qd = sim.default_state()
hold = torch.as_tensor(target, dtype=torch.float32)[None].expand(len(SLOPES), -1)
with torch.no_grad():
    for _ in range(20):  # settle 0.4 s
        o = sim.step(hold, q, qd, params=params)
        q, qd = o.joint_q, o.joint_qd
        mujoco_control_step()
    qd = qd.clone()
    qd[:, 1] += V
    d.qvel[1] += V
    start_bcg, start_mj = o.body_q[:, feet_bcg, 1].clone(), d.xpos[feet_mj, 1].copy()
    print(f"shove {V} m/s sideways: mean foot displacement [mm]")
    print("t [s]   MuJoCo  " + "  ".join(f"bcg_sim x{s:g}" for s in SLOPES))
    for k in range(1, 16):
        o = sim.step(hold, q, qd, params=params)
        q, qd = o.joint_q, o.joint_qd
        mujoco_control_step()
        if k in (1, 5, 10, 15):
            bcg = (o.body_q[:, feet_bcg, 1] - start_bcg).mean(-1).numpy() * 1e3
            mj = (d.xpos[feet_mj, 1] - start_mj).mean() * 1e3
            print(f"{k * cfg.control_dt:5.2f}  {mj:7.2f}  " + "  ".join(f"{b:12.2f}" for b in bcg))
