"""Would a flight rule make leg odometry follow jumps and runs? An offline measurement, not product code.

LegOdometry (bcg_sim.policy.odometry) holds the lowest sole still, so in a flight it moves the pelvis by minus
the swinging legs' motion. The rule tried here keeps the whole-body centre of mass (COM, from forward kinematics
and the link masses) ballistic while the ground cannot be touching: each step it predicts the COM from its last
position and velocity under gravity; if that puts the COM higher (by MARGIN_M) than the lowest sole on the
ground would, the robot is in the air, the prediction is the estimate and every sole's anchor is re-placed
under it; otherwise the step is a stance step (LegOdometry's rule) and the COM velocity is re-estimated from
the last few stance positions.

Prints, per start-noise seed of bcg-eval's MuJoCo loop, the horizontal error of both estimates against the
simulator's pelvis (mean, max, end) and the mean height error; with --clip, the same on a clip's own frames.
Usage: flight_odometry.py POLICY [--mjcf MJCF] [--noise ENC VEL GYRO] [--runs N]
       flight_odometry.py --clip MOTION [--start S --end S]"""

import argparse
import dataclasses

import numpy as np

from bcg_sim.g1 import BODIES, forward_kinematics
from bcg_sim.policy import load_policy
from bcg_sim.policy.odometry import LegOdometry, support

MASS_KG = np.array([b.inertial.mass for b in BODIES])  # [30]
COM_B = np.array([b.inertial.com for b in BODIES])  # [30, 3] each link's COM in its frame
GRAVITY = 9.81
DT = 0.02  # [s] control step
MARGIN_M = 0.005  # the ballistic COM must be this much above the stance one to count as a flight
VEL_STEPS = 3  # stance positions the COM velocity is taken over


class FlightOdometry(LegOdometry):
    """LegOdometry with the COM ballistic while the ground cannot be touching (module docstring)."""

    def _com_rel_w(self, joint_pos, base_quat_w) -> np.ndarray:
        """[3] COM minus pelvis, world axes."""
        pos, rot = forward_kinematics(np.concatenate([np.zeros(3), base_quat_w, joint_pos]))
        return MASS_KG @ (pos + np.einsum("bij,bj->bi", rot, COM_B)) / MASS_KG.sum()

    def reset(self, joint_pos, base_quat_w, root_xy_w=None) -> None:
        super().reset(joint_pos, base_quat_w, root_xy_w)
        self.com_w = [self.position_w + self._com_rel_w(joint_pos, base_quat_w)]  # recent COM estimates
        self.com_vel_w = np.zeros(3)
        self.in_air, self.flights = False, 0

    def update(self, joint_pos, base_quat_w) -> np.ndarray:
        rel = self._spheres_rel_w(joint_pos, base_quat_w)
        com_rel = self._com_rel_w(joint_pos, base_quat_w)
        s = support(rel[:, 2])
        xy = (s / s.sum()) @ (self._anchor - rel[:, :2])
        pelvis_stance = np.array([xy[0], xy[1], self._height(rel)])
        com_stance = pelvis_stance + com_rel
        com_ballistic = self.com_w[-1] + self.com_vel_w * DT - np.array([0.0, 0.0, 0.5 * GRAVITY * DT * DT])
        if com_ballistic[2] > com_stance[2] + MARGIN_M:  # the lowest sole would be above the ground
            self.flights += not self.in_air
            self.in_air = True
            com, pelvis = com_ballistic, com_ballistic - com_rel
            self.com_vel_w = self.com_vel_w - np.array([0.0, 0.0, GRAVITY * DT])
            self._anchor = pelvis[:2] + rel[:, :2]
        else:
            self.in_air = False
            com, pelvis = com_stance, pelvis_stance
            self._anchor = s[:, None] * self._anchor + (1 - s[:, None]) * (xy + rel[:, :2])
            recent = [*self.com_w[-VEL_STEPS:], com]
            self.com_vel_w = (recent[-1] - recent[0]) / (DT * (len(recent) - 1))
        self.com_w = [*self.com_w[-VEL_STEPS:], com]
        self.position_w = pelvis
        return pelvis.copy()


def errors(true_w: np.ndarray, est_w: np.ndarray) -> str:
    e = np.linalg.norm(est_w[:, :2] - true_w[:, :2], axis=1) * 100
    z = np.abs(est_w[:, 2] - true_w[:, 2]).mean() * 100
    return f"xy mean {e.mean():5.1f} max {e.max():5.1f} end {e[-1]:5.1f}, z {z:4.1f}"


def on_clip(motion: str, start: float, end: float | None) -> None:
    from bcg_sim.motion import load, resample, window

    m = resample(window(load(motion), start, end), 1.0 / DT)
    qpos = np.concatenate([m.root_pos_w, m.root_quat_w, m.joint_pos], axis=1)
    line = []
    for odo in (LegOdometry(), FlightOdometry()):
        odo.reset(qpos[0, 7:], qpos[0, 3:7], qpos[0, :2])
        est = np.array([odo.position_w.copy(), *(odo.update(q[7:], q[3:7]) for q in qpos[1:])])
        line.append(f"{type(odo).__name__}: {errors(qpos[:, :3], est)}")
    path = np.linalg.norm(np.diff(qpos[:, :2], axis=0), axis=1).sum()
    print(f"{motion}: path {path:.1f} m | " + " | ".join(line), "| flights", odo.flights)


def in_mujoco(policy_dir: str, mjcf: str | None, noise, runs: int) -> None:
    from bcg_train.eval.config import EvalConfig
    from bcg_train.eval.mujoco_eval import MujocoEvaluator, clip_seconds, load_eval_model

    policy = load_policy(policy_dir)
    cfg = EvalConfig()
    if noise:
        cfg = dataclasses.replace(cfg, noise_q_std=noise[0], noise_dq_std=noise[1], noise_gyro_std=noise[2])
    for seed in range(runs):
        ev = MujocoEvaluator(policy, cfg, load_eval_model(mjcf), clip_seconds(policy, 0))
        measure, odos, rows = ev._measure, (LegOdometry(), FlightOdometry()), []

        def record(rng, measure=measure, odos=odos, rows=rows):
            s = measure(rng)
            true_w = ev.sim.data.qpos[:3].copy()
            if not rows:
                for odo in odos:
                    odo.reset(s.joint_pos, s.base_quat_w, true_w[:2])
                rows.append([true_w, *(odo.position_w.copy() for odo in odos)])
            else:
                rows.append([true_w, *(odo.update(s.joint_pos, s.base_quat_w) for odo in odos)])
            return s

        ev._measure = record
        ev.run(seed)
        a = np.array(rows)  # [T, 3 (true, leg, flight), 3]
        path = np.linalg.norm(np.diff(a[:, 0, :2], axis=0), axis=1).sum()
        print(
            f"seed {seed}: path {path:.1f} m | LegOdometry: {errors(a[:, 0], a[:, 1])} | "
            f"FlightOdometry: {errors(a[:, 0], a[:, 2])} | flights {odos[1].flights}"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("policy", nargs="?")
    ap.add_argument("--mjcf")
    ap.add_argument("--noise", nargs=3, type=float)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--clip")
    ap.add_argument("--start", type=float, default=0.0)
    ap.add_argument("--end", type=float)
    a = ap.parse_args()
    if a.clip:
        on_clip(a.clip, a.start, a.end)
    elif a.policy:
        in_mujoco(a.policy, a.mjcf, a.noise, a.runs)
    else:
        ap.error("give a POLICY or --clip MOTION")
