"""Evaluation metrics on rollouts: one set of functions for the MuJoCo loop, the ROS bag and bcg_sim.

Every metric is computed from MuJoCo-style qpos [T, 36] (pelvis xyz [m], quat w x y z, 29 joints [rad])
through `bcg_sim.g1.forward_kinematics`, so the three sources (MuJoCo, a recorded bag, the training
simulator) are measured by the same code with the same definitions:

- E_track: global (world-frame, not root-relative) mean per-body position error, mean over the 30 bodies of
  |p_robot - p_ref| at each control step, then over time [m].
  (bcg_train.task's tracking features are the training-side counterpart; one shared function is a later
  unification -- see docs/eval.md.)
- joint error: mean |q - q_ref| over the 29 joints [rad].
- fall: pelvis height below `fall_height`; survival time: time of the first fall (or the run length).
- foot penetration: per foot, the deepest sole sphere's lowest point below the ground z = 0 [m] (the
  definition of bcg_sim.diffsim's foot_penetration); mean over the (step, foot) samples in contact
  (penetration > 0).
- foot slip: horizontal speed of the ankle-roll body while its lowest sole sphere is within
  `contact_height` of the ground [m/s].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bcg_sim.g1 import BODY_NAMES, FOOT_BODIES, FOOT_SPHERE_RADIUS, foot_sphere_positions, forward_kinematics

FOOT_INDEX = tuple(BODY_NAMES.index(f) for f in FOOT_BODIES)  # (left, right) ankle-roll bodies


@dataclass
class Kinematics:
    """Forward kinematics of a qpos sequence: body_pos_w [T, 30, 3] m, sole_z [T, 2] lowest sole-sphere point
    above the ground [m] (negative = penetration), (left, right)."""

    body_pos_w: np.ndarray
    sole_z: np.ndarray


def kinematics(qpos: np.ndarray) -> Kinematics:
    """Body positions and sole heights of qpos [T, 36] (bodies in bcg_sim.g1.BODY_NAMES order)."""
    qpos = np.asarray(qpos, dtype=np.float64).reshape(-1, 36)
    spheres = foot_sphere_positions()  # [S, 3] in the ankle-roll frame
    pos, rot = forward_kinematics(qpos)  # [T, 30, 3], [T, 30, 3, 3]
    feet = list(FOOT_INDEX)
    centres_z = pos[:, feet, 2][..., None] + np.einsum("tfj,sj->tfs", rot[:, feet][:, :, 2], spheres)  # [T, 2, S]
    return Kinematics(pos, centres_z.min(axis=-1) - FOOT_SPHERE_RADIUS)


def tracking_error(body_pos_w: np.ndarray, ref_body_pos_w: np.ndarray) -> np.ndarray:
    """[T] mean over bodies of the world-frame position error [m]; inputs [T, B, 3]."""
    return np.linalg.norm(np.asarray(body_pos_w) - np.asarray(ref_body_pos_w), axis=-1).mean(axis=-1)


def joint_error(joint_pos: np.ndarray, ref_joint_pos: np.ndarray) -> np.ndarray:
    """[T] mean absolute joint-angle error [rad]; inputs [T, 29]."""
    return np.abs(np.asarray(joint_pos) - np.asarray(ref_joint_pos)).mean(axis=-1)


def penetration(sole_z: np.ndarray) -> np.ndarray:
    """[T, 2] foot penetration depth [m] (>= 0) from sole heights [T, 2]."""
    return np.maximum(-np.asarray(sole_z), 0.0)


def mean_contact_penetration(pen: np.ndarray) -> float:
    """Mean penetration [m] over the (step, foot) samples in contact (pen > 0); 0 when never in contact."""
    pen = np.asarray(pen)
    touching = pen > 0
    return float(pen[touching].mean()) if touching.any() else 0.0


def foot_slip(body_pos_w: np.ndarray, sole_z: np.ndarray, dt: float, contact_height: float) -> np.ndarray:
    """[T, 2] horizontal foot speed [m/s] while in contact (sole within contact_height), NaN otherwise.
    Speed by backward differences (first step: NaN)."""
    feet = np.asarray(body_pos_w)[:, FOOT_INDEX, :2]  # [T, 2, 2]
    speed = np.full(feet.shape[:2], np.nan)
    if len(feet) > 1:
        speed[1:] = np.linalg.norm(np.diff(feet, axis=0), axis=-1) / dt
    return np.where(np.asarray(sole_z) < contact_height, speed, np.nan)


def first_fall(root_height: np.ndarray, fall_height: float) -> int | None:
    """Index of the first sample with pelvis height below fall_height, or None."""
    below = np.flatnonzero(np.asarray(root_height) < fall_height)
    return int(below[0]) if below.size else None


@dataclass
class Rollout:
    """One rollout at the control rate: time [T] s since the policy started, qpos [T, 36] of the robot and
    ref_qpos [T, 36] of the (aligned) reference at the same times."""

    time: np.ndarray
    qpos: np.ndarray
    ref_qpos: np.ndarray


def series(r: Rollout, dt: float, contact_height: float) -> dict[str, np.ndarray]:
    """Per-step metric series of a rollout: e_track [T] m, joint_err [T] rad, root_height [T] m,
    penetration [T, 2] m, slip [T, 2] m/s (NaN out of contact)."""
    k, kr = kinematics(r.qpos), kinematics(r.ref_qpos)
    return {
        "time": np.asarray(r.time, dtype=np.float64),
        "e_track": tracking_error(k.body_pos_w, kr.body_pos_w),
        "joint_err": joint_error(r.qpos[:, 7:], r.ref_qpos[:, 7:]),
        "root_height": np.asarray(r.qpos[:, 2], dtype=np.float64),
        "penetration": penetration(k.sole_z),
        "slip": foot_slip(k.body_pos_w, k.sole_z, dt, contact_height),
    }


def summarize(s: dict[str, np.ndarray], fall_height: float, window_s: float | None = None) -> dict[str, float]:
    """Scalar metrics of one run's series (truncated at the first fall). Penetration is also reported over
    [0, window_s] (`pen_window_mm`, the delta_d window; also up to the first fall)."""
    i = first_fall(s["root_height"], fall_height)
    end = len(s["time"]) if i is None else i + 1
    t = s["time"][:end]
    slip = s["slip"][:end]
    out = {
        "fell": i is not None,
        "survival_s": float(t[-1]) if len(t) else 0.0,
        "e_track_cm": 100.0 * float(np.mean(s["e_track"][:end])),
        "joint_err_rad": float(np.mean(s["joint_err"][:end])),
        "pen_mm": 1e3 * mean_contact_penetration(s["penetration"][:end]),
        "slip_cm_s": 100.0 * float(np.nanmean(slip)) if np.isfinite(slip).any() else 0.0,
    }
    if window_s is not None:
        w = (s["time"] <= window_s + 1e-9) & (np.arange(len(s["time"])) < end)
        out["pen_window_mm"] = 1e3 * mean_contact_penetration(s["penetration"][w])
    return out


def aggregate(runs: list[dict[str, float]]) -> dict[str, float]:
    """Over runs: falls (count), mean and std (population) of every float metric."""
    out: dict[str, float] = {"runs": len(runs), "falls": int(sum(bool(r["fell"]) for r in runs))}
    for key in runs[0]:
        if key == "fell":
            continue
        v = np.array([r[key] for r in runs], dtype=np.float64)
        out[f"{key}_mean"], out[f"{key}_std"] = float(v.mean()), float(v.std())
    return out
