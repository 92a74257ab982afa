"""Derived quantities of a `Motion`: velocities, forward kinematics on the G1 model, foot contacts."""

from __future__ import annotations

from collections.abc import Iterator

import mujoco
import numpy as np

from bcg_sim.motion import _model
from bcg_sim.motion.config import ContactConfig, motions_config
from bcg_sim.motion.motion import Motion
from bcg_sim.quat import angular_velocity_w
from bcg_sim.quat import to_matrix as quat_to_matrix


def complete(motion: Motion, contact: ContactConfig | None = None) -> Motion:
    """Fill the derived fields of `motion` in place and return it.

    Velocities are central finite differences at `motion.fps` (one-sided at the two ends); angular
    velocities are taken on the quaternion group (world frame). Body poses come from `mj_kinematics` on the
    project's G1 model; foot contacts follow the rule documented in `ContactConfig`.
    """
    contact = motions_config().contact if contact is None else contact
    dt = motion.dt
    motion.root_lin_vel_w = _gradient(motion.root_pos_w, dt)
    motion.root_ang_vel_w = angular_velocity_w(motion.root_quat_w, motion.fps)
    motion.joint_vel = _gradient(motion.joint_pos, dt)
    motion.body_names = _model.body_names()
    motion.body_pos_w, motion.body_quat_w = forward_kinematics(motion.qpos())
    # Body 0 is the root: keep it bit-identical to the primary fields (MuJoCo re-normalises the quaternion),
    # so formats that store only body poses (NPZ) round-trip the root exactly.
    motion.body_pos_w[:, 0] = motion.root_pos_w
    motion.body_quat_w[:, 0] = motion.root_quat_w
    motion.body_lin_vel_w = _gradient(motion.body_pos_w, dt)
    motion.body_ang_vel_w = angular_velocity_w(motion.body_quat_w, motion.fps)
    motion.foot_contact = contacts(motion, contact)
    return motion


def _gradient(x: np.ndarray, dt: float) -> np.ndarray:
    """d/dt along axis 0 ([T, ...]); zeros for a single frame."""
    if x.shape[0] < 2:
        return np.zeros_like(x)
    return np.gradient(x, dt, axis=0)


def _posed(qpos: np.ndarray) -> Iterator[tuple[int, mujoco.MjData]]:
    """(t, data) with data posed at row t of qpos [T, 36] (mj_kinematics done); one MjData reused for all rows."""
    m = _model.model()
    d = mujoco.MjData(m)
    for t, q in enumerate(qpos):
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        yield t, d


def forward_kinematics(qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Body poses of the G1 for each row of qpos [T, 36].

    Returns body_pos_w [T, B, 3] (m) and body_quat_w [T, B, 4] (w x y z) for the robot's B bodies in
    MuJoCo depth-first order (B = 30, pelvis first). MuJoCo normalises the root quaternion internally.
    """
    ids = _model.robot_body_ids()
    pos = np.empty((qpos.shape[0], ids.size, 3))
    quat = np.empty((qpos.shape[0], ids.size, 4))
    for t, d in _posed(qpos):
        pos[t] = d.xpos[ids]
        quat[t] = d.xquat[ids]
    return pos, quat


def com_positions(qpos: np.ndarray) -> np.ndarray:
    """[T, 3] whole-body centre of mass of the G1 (m, world) for each row of qpos [T, 36]."""
    m = _model.model()
    pelvis = int(_model.robot_body_ids()[0])
    out = np.empty((qpos.shape[0], 3))
    for t, d in _posed(qpos):
        mujoco.mj_comPos(m, d)
        out[t] = d.subtree_com[pelvis]
    return out


def _foot_indices(motion: Motion) -> list[int]:
    """Indices of the (left, right) foot bodies in motion.body_names."""
    from bcg_sim import g1

    return [motion.body_names.index(n) for n in g1.FOOT_BODIES]


def foot_sphere_positions_w(motion: Motion) -> np.ndarray:
    """[T, 2, S, 3] world positions (m) of the sole sphere centres of the (left, right) foot."""
    idx = _foot_indices(motion)
    rot = quat_to_matrix(motion.body_quat_w[:, idx])  # [T, 2, 3, 3]
    local = _model.foot_spheres()  # [S, 3]
    return motion.body_pos_w[:, idx, None, :] + np.einsum("tfij,sj->tfsi", rot, local)


def foot_heights(motion: Motion) -> np.ndarray:
    """[T, 2] height above z = 0 of the lowest point of each foot's sole spheres (sphere bottom), m."""
    return foot_sphere_positions_w(motion)[..., 2].min(axis=2) - _model.foot_sphere_radius()


def foot_speeds(motion: Motion) -> np.ndarray:
    """[T, 2] 3-D speed (m/s) of each foot's lowest sole sphere (centre, central differences).

    The lowest sphere is the point that touches the ground: it stays still while the foot rolls from heel to
    toe, whereas the ankle moves, so this speed separates stance from swing in mocap clips too.
    """
    spheres = foot_sphere_positions_w(motion)  # [T, 2, S, 3]
    speed = np.linalg.norm(_gradient(spheres, motion.dt), axis=-1)  # [T, 2, S]
    lowest = spheres[..., 2].argmin(axis=2)[..., None]  # [T, 2, 1]
    return np.take_along_axis(speed, lowest, axis=2)[..., 0]


def contacts(motion: Motion, contact: ContactConfig) -> np.ndarray:
    """[T, 2] bool foot contact flags: low (sole below contact.height) and slow (lowest sole sphere slower
    than contact.speed)."""
    return (foot_heights(motion) < contact.height) & (foot_speeds(motion) < contact.speed)
