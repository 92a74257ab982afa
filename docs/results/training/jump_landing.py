"""A policy around a landing in MuJoCo (bcg-eval's start, seed 0): every 3 control steps the pelvis height,
pitch and roll [deg] against the clip's, and the horizontal distance from the clip's pelvis [m].
Usage: jump_landing.py POLICY T0 T1"""

import dataclasses
import sys

import numpy as np

from bcg_sim.policy import load_policy
from bcg_train.eval.config import load_eval_config
from bcg_train.eval.evaluate import run_mujoco
from bcg_train.eval.mujoco_eval import clip_seconds

pol = load_policy(sys.argv[1])
t0, t1 = float(sys.argv[2]), float(sys.argv[3])
cfg = dataclasses.replace(load_eval_config(), runs=1)
ro = run_mujoco(pol, cfg, None, clip_seconds(pol, cfg.seconds), False)[0]["rollout"]
dt = pol.contract.control_dt


def roll_pitch_deg(q):  # w x y z
    w, x, y, z = q
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    return np.degrees(roll), np.degrees(np.arcsin(np.clip(2 * (w * y - z * x), -1, 1)))


for i in range(int(t0 / dt), min(len(ro.qpos), int(t1 / dt)), 3):
    r, p = roll_pitch_deg(ro.qpos[i, 3:7])
    rr, pr = roll_pitch_deg(ro.ref_qpos[i, 3:7])
    lag = np.linalg.norm(ro.ref_qpos[i, :2] - ro.qpos[i, :2])
    print(
        f"{i * dt:5.2f} z {ro.qpos[i, 2]:.2f}/{ro.ref_qpos[i, 2]:.2f} pitch {p:6.1f}/{pr:6.1f} "
        f"roll {r:6.1f}/{rr:6.1f} xy-err {lag:.2f}"
    )
