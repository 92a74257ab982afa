"""Quaternion helpers on numpy arrays (w x y z, batched over leading axes)."""

from __future__ import annotations

import numpy as np

# Below this |sin(angle/2)| a rotation is treated as the identity (avoids 0/0 in log and slerp).
_SMALL = 1e-12


def xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    """[..., 4] x y z w -> w x y z (exact reordering, no normalisation)."""
    return np.concatenate([q[..., 3:4], q[..., :3]], axis=-1)


def wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    return np.concatenate([q[..., 1:4], q[..., 0:1]], axis=-1)


def normalize(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def conjugate(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b, [..., 4]."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def log(q: np.ndarray) -> np.ndarray:
    """Rotation vector [..., 3] (axis * angle, rad) of unit quaternions [..., 4], angle in [0, pi]."""
    q = np.where(q[..., :1] < 0, -q, q)  # shortest arc
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., :1])
    scale = np.where(s > _SMALL, angle / np.maximum(s, _SMALL), 2.0)
    return v * scale


def exp(r: np.ndarray) -> np.ndarray:
    """Unit quaternion [..., 4] of rotation vector r [..., 3] (rad)."""
    angle = np.linalg.norm(r, axis=-1, keepdims=True)
    half = 0.5 * angle
    scale = np.where(angle > _SMALL, np.sin(half) / np.maximum(angle, _SMALL), 0.5)
    return np.concatenate([np.cos(half), r * scale], axis=-1)


def slerp(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Spherical interpolation between unit quaternions a, b [..., 4] at fractions s [...] (0 -> a, 1 -> b)."""
    d = multiply(conjugate(a), b)
    return multiply(a, exp(log(d) * np.asarray(s)[..., None]))


def from_euler_zyx(roll: np.ndarray, pitch: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """[..., 4] quaternion of R = Rz(yaw) Ry(pitch) Rx(roll) (angles in rad)."""
    ez = np.array([0.0, 0.0, 1.0])
    ey = np.array([0.0, 1.0, 0.0])
    ex = np.array([1.0, 0.0, 0.0])
    qz = exp(np.asarray(yaw)[..., None] * ez)
    qy = exp(np.asarray(pitch)[..., None] * ey)
    qx = exp(np.asarray(roll)[..., None] * ex)
    return multiply(multiply(qz, qy), qx)


def angular_velocity_w(q: np.ndarray, fps: float) -> np.ndarray:
    """[T, ..., 3] world-frame angular velocity (rad/s) of unit quaternions q [T, ..., 4] sampled at fps.

    Central differences in the interior (one-sided at the ends), the same stencil as `np.gradient`, taken on
    the rotation group: w_t = log(q_{t+1} q_{t-1}^*) / (2 dt), so it stays exact for constant rates.
    """
    if q.shape[0] < 2:
        return np.zeros(q.shape[:-1] + (3,))
    nxt = np.concatenate([q[1:], q[-1:]], axis=0)
    prv = np.concatenate([q[:1], q[:-1]], axis=0)
    steps = np.full(q.shape[0], 2.0)
    steps[0] = steps[-1] = 1.0
    rel = multiply(nxt, conjugate(prv))  # world-frame increment
    return log(rel) * (fps / steps).reshape((-1,) + (1,) * (q.ndim - 1))


def to_matrix(q: np.ndarray) -> np.ndarray:
    """[..., 3, 3] rotation matrices of unit quaternions [..., 4]."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)
