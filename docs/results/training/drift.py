"""How much of a policy's E_track is the body's path drifting, and how much is its pose: bcg-eval's MuJoCo runs
(same seeds and start noise), with E_track computed three ways per run:
  world    bcg-eval's number: mean over bodies and time of the world-frame position error
  xy       the reference shifted at each step so that its root's x y sits on the robot's (drift in the plane removed)
  xy+yaw   bodies relative to their root, in the root's heading frame (drift and heading removed: the pose alone)
plus the root's horizontal distance from the reference's, mean and at the end.
Usage: drift.py POLICY [--mjcf MJCF] [--noise ENC VEL GYRO] [--latency S]"""

import argparse
import dataclasses

import numpy as np

from bcg_sim.policy import load_policy
from bcg_sim.quat import rotate_inv, yaw
from bcg_train.eval.config import load_eval_config
from bcg_train.eval.evaluate import run_mujoco
from bcg_train.eval.metrics import kinematics, tracking_error
from bcg_train.eval.mujoco_eval import clip_seconds

ap = argparse.ArgumentParser()
ap.add_argument("policy")
ap.add_argument("--mjcf")
ap.add_argument("--noise", type=float, nargs=3)
ap.add_argument("--latency", type=float)
a = ap.parse_args()
pol = load_policy(a.policy)
cfg = load_eval_config()
if a.noise:
    cfg = cfg.with_sensor_noise(a.noise)
if a.latency is not None:
    cfg = dataclasses.replace(cfg, action_latency_s=a.latency)


def local(pos, root_xy, psi):  # [T, B, 3] world -> relative to the root's x y, in its heading frame
    d = pos.copy()
    d[..., :2] -= root_xy[:, None]
    heading = np.stack([np.cos(psi / 2), 0 * psi, 0 * psi, np.sin(psi / 2)], axis=-1)  # [T, 4] about z
    return rotate_inv(heading[:, None], d)


print("run  world [cm]  xy [cm]  xy+yaw [cm]  root xy off mean / end [cm]  heading off end [deg]")
rows = []
for r in run_mujoco(pol, cfg, a.mjcf, clip_seconds(pol, cfg.seconds), False):
    ro = r["rollout"]
    k, kr = kinematics(ro.qpos).body_pos_w, kinematics(ro.ref_qpos).body_pos_w
    off = ro.qpos[:, :2] - ro.ref_qpos[:, :2]  # [T, 2] root x y, robot - reference
    world = tracking_error(k, kr).mean()
    shifted = kr.copy()
    shifted[..., :2] += off[:, None]
    xy = tracking_error(k, shifted).mean()
    psi, psr = yaw(ro.qpos[:, 3:7]), yaw(ro.ref_qpos[:, 3:7])
    pose = tracking_error(local(k, ro.qpos[:, :2], psi), local(kr, ro.ref_qpos[:, :2], psr)).mean()
    dpsi = np.degrees(np.angle(np.exp(1j * (psi[-1] - psr[-1]))))
    d = np.linalg.norm(off, axis=-1)
    rows.append((world, xy, pose, d.mean(), d[-1]))
    print(
        f"{r['seed']:3d}  {100 * world:9.2f}  {100 * xy:7.2f}  {100 * pose:10.2f}  "
        f"{100 * d.mean():14.1f} / {100 * d[-1]:5.1f}  {dpsi:14.1f}"
    )
m = 100 * np.mean(rows, axis=0)
print(f"mean {m[0]:9.2f}  {m[1]:7.2f}  {m[2]:10.2f}  {m[3]:14.1f} / {m[4]:5.1f}")
