"""Quaternions in bcg: one component order, w x y z, arrays [..., 4] batched over leading axes.

Newton (and so the differentiable simulator's joint_q and body_q) stores x y z w: convert with `xyzw_to_wxyz`
/ `wxyz_to_xyzw` where data crosses that seam, nowhere else. The products, rotations and matrices work on numpy
arrays and torch tensors alike (the policy's observation runs in both); `log`, `exp`, `slerp`, `from_euler_zyx`
and `angular_velocity_w` are numpy (motion tools); `log_smooth` / `exp_smooth` are torch with a gradient that
is finite at the identity (BCG's tangent-space mean).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

Array = Any  # numpy.ndarray or torch.Tensor

_SMALL = 1e-12  # below this |sin(angle/2)| a rotation is the identity (no 0/0 in log and slerp)
_TINY = 1e-20  # keeps sqrt differentiable at exactly zero rotation without changing any float32 result


# --- one code for numpy and torch --------------------------------------------------------------------------
def is_torch(x: Array) -> bool:
    return type(x).__module__.startswith("torch")


def stack(xs: Sequence[Array]) -> Array:
    """Stack along a new last axis (numpy or torch, as xs[0])."""
    if is_torch(xs[0]):
        import torch

        return torch.stack(list(xs), dim=-1)
    return np.stack(xs, axis=-1)


def _cross(a: Array, b: Array) -> Array:
    """a x b, written out elementwise."""
    return stack(
        [
            a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
            a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
            a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0],
        ]
    )


# --- component order ---------------------------------------------------------------------------------------
def xyzw_to_wxyz(q: Array) -> Array:
    """[..., 4] x y z w (Newton) -> w x y z (exact reordering, no normalisation)."""
    return q[..., [3, 0, 1, 2]]


def wxyz_to_xyzw(q: Array) -> Array:
    """[..., 4] w x y z -> x y z w (Newton)."""
    return q[..., [1, 2, 3, 0]]


# --- algebra (numpy or torch) ------------------------------------------------------------------------------
def normalize(q: Array) -> Array:
    if is_torch(q):
        return q / q.norm(dim=-1, keepdim=True)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def conjugate(q: Array) -> Array:
    return stack([q[..., 0], -q[..., 1], -q[..., 2], -q[..., 3]])


def multiply(a: Array, b: Array) -> Array:
    """Hamilton product a ⊗ b, [..., 4]."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def _cross_library(a: Array, b: Array) -> Array:
    """a x b, the library's own (torch.cross / np.cross: torch's kernel rounds differently from `_cross`)."""
    if is_torch(a):
        import torch

        return torch.cross(a, b, dim=-1)
    return np.cross(a, b)


def rotate(q: Array, v: Array) -> Array:
    """R(q) v: v [..., 3] rotated by unit quaternions q [..., 4]."""
    w, u = q[..., 0:1], q[..., 1:4]
    t = 2.0 * _cross_library(u, v)
    return v + w * t + _cross_library(u, t)


def rotate_inv(q: Array, v: Array) -> Array:
    """R(q)^T v: a world vector [..., 3] expressed in the frame whose orientation is q [..., 4]."""
    w, u = q[..., 0:1], q[..., 1:4]
    uv = _cross(u, v)  # v' = v - 2w (u x v) + 2 u x (u x v): rotation by the conjugate
    return v - 2.0 * w * uv + 2.0 * _cross(u, uv)


def to_matrix(q: Array) -> Array:
    """[..., 3, 3] rotation matrices of unit quaternions [..., 4]."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = [
        stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)]),
        stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)]),
        stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]),
    ]
    if is_torch(q):
        import torch

        return torch.stack(rows, dim=-2)
    return np.stack(rows, axis=-2)


def to_rot6d(q: Array) -> Array:
    """First two columns of R(q), row-major [R00 R01 R10 R11 R20 R21], [..., 6]."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return stack(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
        ]
    )


# --- numpy: exponential map, interpolation, angles ---------------------------------------------------------
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
    qz = exp(np.asarray(yaw)[..., None] * np.array([0.0, 0.0, 1.0]))
    qy = exp(np.asarray(pitch)[..., None] * np.array([0.0, 1.0, 0.0]))
    qx = exp(np.asarray(roll)[..., None] * np.array([1.0, 0.0, 0.0]))
    return multiply(multiply(qz, qy), qx)


def heading_xy(q: Array) -> tuple[Array, Array]:
    """The x axis of R(q) on the ground, (R00, R10) [...] each, not normalized: the heading's direction."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return 1 - 2 * (y * y + z * z), 2 * (w * z + x * y)


def yaw(q: np.ndarray) -> np.ndarray:
    """Heading [rad] of q [..., 4]: the angle about z of its x axis."""
    fx, fy = heading_xy(q)
    return np.arctan2(fy, fx)


def from_yaw(angle: float) -> np.ndarray:
    """[4] rotation by `angle` [rad] about z."""
    return np.array([math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)])


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


# --- torch: exponential map with a finite gradient at the identity -----------------------------------------
def log_smooth(r):
    """Rotation vector [..., 3] of unit quaternions r [..., 4] with w >= 0 (torch; differentiable at 0)."""
    import torch

    w, v = r[..., :1], r[..., 1:]
    n = torch.sqrt((v * v).sum(-1, keepdim=True) + _TINY)
    return v * (2.0 * torch.atan2(n, w) / n)


def exp_smooth(rv):
    """Unit quaternion [..., 4] of rotation vectors rv [..., 3] (torch; differentiable at 0)."""
    import torch

    half = 0.5 * torch.sqrt((rv * rv).sum(-1, keepdim=True) + _TINY)
    return torch.cat([torch.cos(half), rv * (torch.sin(half) / (2.0 * half))], dim=-1)
