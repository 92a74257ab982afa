"""Would an offset measured from the clip's own leg-odometry path tell a policy where it drifts? Offline, not
product code.

A retargeted clip's feet slide, so leg odometry run over the clip's own frames leaves the clip's pelvis path
(decimetres to metres over a LAFAN1 window). The candidate observation: the robot's leg-odometry estimate minus
the clip's own leg-odometry path, zero while the robot does what the clip does. This script runs bcg-eval's
MuJoCo loop on a policy (its sensor noise with --noise) and compares, per run and step, that quantity with the
robot's true horizontal offset from the clip's pelvis. What matters is whether it follows the spread between
runs (what differs from one start to the next): printed as the mean run-to-run deviation of both, the residual
and their correlation.
Usage: odometry_feedback.py POLICY [--noise ENC VEL GYRO] [--runs N]"""

import argparse

import numpy as np

from bcg_sim.policy import load_policy
from bcg_sim.policy.odometry import LegOdometry
from bcg_train.eval.config import EvalConfig
from bcg_train.eval.mujoco_eval import MujocoEvaluator, clip_seconds, load_eval_model


def odometry_path(qpos: np.ndarray) -> np.ndarray:
    """[T, 2] leg odometry's pelvis x y over qpos [T, 36] (joint angles and pelvis orientation only)."""
    odo = LegOdometry()
    odo.reset(qpos[0, 7:], qpos[0, 3:7], qpos[0, :2])
    return np.array([odo.position_w.copy(), *(odo.update(q[7:], q[3:7]) for q in qpos[1:])])[:, :2]


ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("policy")
ap.add_argument("--noise", nargs=3, type=float)
ap.add_argument("--runs", type=int, default=5)
a = ap.parse_args()
policy, cfg = load_policy(a.policy), EvalConfig()
if a.noise:
    cfg = cfg.with_sensor_noise(a.noise)
cm = lambda x: np.linalg.norm(x, axis=1).mean() * 100  # noqa: E731
true_off, seen_off = [], []
for seed in range(a.runs):
    r = MujocoEvaluator(policy, cfg, load_eval_model(None), clip_seconds(policy, 0)).run(seed).rollout
    q, ref = r.qpos, r.ref_qpos[: len(r.qpos)]
    true_off.append(q[:, :2] - ref[:, :2])
    seen_off.append(odometry_path(q) - odometry_path(ref))
    print(
        f"run {seed}: true offset {cm(true_off[-1]):5.1f} cm, odometry vs the clip's odometry {cm(seen_off[-1]):5.1f}"
    )
T = min(len(x) for x in true_off)
A, B = (np.array([x[:T] for x in xs]) for xs in (true_off, seen_off))
dA, dB = A - A.mean(0), B - B.mean(0)
corr = (dA * dB).sum() / np.sqrt((dA * dA).sum() * (dB * dB).sum())
d = lambda x: np.linalg.norm(x, axis=2).mean() * 100  # noqa: E731
print(f"run-to-run deviation: true {d(dA):.1f} cm, seen {d(dB):.1f} cm, residual {d(dA - dB):.1f} cm, corr {corr:.2f}")
