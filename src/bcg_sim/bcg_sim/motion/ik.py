"""Leg inverse kinematics on the G1 model: both feet to world poses, pelvis given (damped least squares)."""

from __future__ import annotations

import mujoco
import numpy as np

from bcg_sim import g1
from bcg_sim.motion import _model
from bcg_sim.motion.config import IKConfig
from bcg_sim.quat import conjugate as quat_conjugate
from bcg_sim.quat import log as quat_log
from bcg_sim.quat import multiply as quat_multiply

LEG_JOINTS = slice(0, 12)  # motor order: left leg 0-5, right leg 6-11
_NUM = 12


class IKError(RuntimeError):
    """The leg IK did not reach its targets (a generator asked for an unreachable foot pose)."""


def sole_height() -> float:
    """Height (m) of the foot-body origin above the ground when the foot is flat on it: the lowest sole
    sphere then touches z = 0 with the bottom of the sphere."""
    return float(_model.foot_sphere_radius() - _model.foot_spheres()[:, 2].min())


def solve_legs(
    qpos: np.ndarray, foot_pos_w: np.ndarray, foot_quat_w: np.ndarray, rot_weight: np.ndarray, cfg: IKConfig
) -> np.ndarray:
    """Leg joints that put the foot bodies at their targets, frame by frame.

    qpos [T, 36]: root pose and upper-body joints (legs: the initial guess of frame 0);
    foot_pos_w [T, 2, 3] (m) and foot_quat_w [T, 2, 4] (w x y z): (left, right) foot-body targets;
    rot_weight [T, 2]: weight of each foot's orientation error (1 = as important as position; a foot with
    weight 1 must reach its orientation too). Returns qpos [T, 36] with the 12 leg joints solved,
    warm-started from the previous frame (deterministic, continuous). Raises IKError when a position (or a
    weight-1 orientation) residual stays above cfg.max_error.
    """
    m = _model.model()
    d = mujoco.MjData(m)
    rows = slice(_model.ROOT_QPOS + LEG_JOINTS.start, _model.ROOT_QPOS + LEG_JOINTS.stop)
    out = np.array(qpos, dtype=float)
    legs = out[0, rows].copy()
    for t in range(out.shape[0]):
        d.qpos[:] = out[t]
        d.qpos[rows] = legs
        w = np.repeat(np.stack([np.ones(2), rot_weight[t]], axis=1), 3, axis=1).reshape(-1)  # [12] row weights
        legs, e = _solve_frame(m, d, foot_pos_w[t], foot_quat_w[t], w, cfg)
        _check(e, rot_weight[t], t, cfg)
        out[t, rows] = legs
    return out


def _check(e: np.ndarray, rot_weight: np.ndarray, t: int, cfg: IKConfig) -> None:
    """Feet with full orientation weight (planted) must be exact; swinging feet within max_swing_error."""
    for k in range(2):
        ek = e[6 * k : 6 * k + 6] if rot_weight[k] >= 1.0 else e[6 * k : 6 * k + 3]
        limit = cfg.max_error if rot_weight[k] >= 1.0 else cfg.max_swing_error
        if np.abs(ek).max() > limit:
            raise IKError(
                f"leg IK residual {np.abs(ek).max():.2e} (> {limit:g}) for the {('left', 'right')[k]} "
                f"foot at frame {t}: foot target unreachable"
            )


def _solve_frame(
    m: mujoco.MjModel, d: mujoco.MjData, pos: np.ndarray, quat: np.ndarray, w: np.ndarray, cfg: IKConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted DLS iterations for one frame; returns (leg joints [12], unweighted error [12])."""
    feet = _model.foot_body_ids()
    rows = slice(_model.ROOT_QPOS, _model.ROOT_QPOS + _NUM)
    cols = slice(_model.ROOT_QVEL, _model.ROOT_QVEL + _NUM)
    lo, hi = (lim[LEG_JOINTS] for lim in g1.joint_limits())
    jac = np.zeros((_NUM, m.nv))
    e = _evaluate(m, d, feet, pos, quat, jac)
    last = np.inf
    for _ in range(cfg.max_iterations):
        cost = np.linalg.norm(w * e)
        if cost < cfg.tolerance or abs(last - cost) < cfg.tolerance:  # converged, or stalled on a compromise
            break
        last = cost
        q = d.qpos[rows]
        step = _dls_step(w[:, None] * jac[:, cols], w * e, q, lo, hi, cfg.damping)
        step *= min(1.0, cfg.max_step / max(np.abs(step).max(), 1e-12))
        d.qpos[rows] = np.clip(q + step, lo, hi)
        e = _evaluate(m, d, feet, pos, quat, jac)
    return d.qpos[rows].copy(), e


def _dls_step(
    j: np.ndarray, e: np.ndarray, q: np.ndarray, lo: np.ndarray, hi: np.ndarray, damping: float
) -> np.ndarray:
    """DLS step; joints at a limit that the step pushes further are frozen and the step recomputed, so the
    free joints take up the remaining error instead of stalling."""
    free = np.ones(q.size, dtype=bool)
    for _ in range(2):
        jf = j * free
        step = jf.T @ np.linalg.solve(jf @ jf.T + damping**2 * np.eye(j.shape[0]), e)
        blocked = ((q <= lo) & (step < 0)) | ((q >= hi) & (step > 0))
        if not (blocked & free).any():
            break
        free &= ~blocked
    return step


def _evaluate(
    m: mujoco.MjModel, d: mujoco.MjData, feet: tuple[int, int], pos: np.ndarray, quat: np.ndarray, jac: np.ndarray
) -> np.ndarray:
    """Forward kinematics at d.qpos; fills jac [12, nv] (rows: left pos, left rot, right pos, right rot) and
    returns the [12] error (position m, world rotation vector rad)."""
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)  # the Jacobian functions need cdof
    e = np.empty(_NUM)
    for k, b in enumerate(feet):
        mujoco.mj_jacBody(m, d, jac[6 * k : 6 * k + 3], jac[6 * k + 3 : 6 * k + 6], b)
        e[6 * k : 6 * k + 3] = pos[k] - d.xpos[b]
        e[6 * k + 3 : 6 * k + 6] = quat_log(quat_multiply(quat[k], quat_conjugate(d.xquat[b])))
    return e
