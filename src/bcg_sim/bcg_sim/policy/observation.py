"""The observation builder: ONE function for the robot node, the MuJoCo bridge tests, training and evaluation.

It works on numpy arrays and on torch tensors (any leading batch shape `...`), with the same numbers.
Only what the real robot measures goes in (joint encoders, pelvis IMU), what it can estimate from them (the
pelvis position by leg odometry, `bcg_sim.policy.odometry`), plus the reference motion.

Frames and conventions:
- quaternions are w x y z; `base_quat_w` is the pelvis orientation in the IMU's world frame (z up; its yaw
  drifts, so the reference is yaw-aligned to the robot when a run starts, see `ReferenceTrack.align_yaw`).
- `_b` vectors are in the pelvis (body) frame; `ref_root_*_vel_b` are in the *reference* root's frame.
- joints are in motor order (`bcg_sim.g1.joints.JOINTS_29`), positions relative to the contract's default.

Features (name: size; K = contract.observation.ref_horizon):
  joint_pos_rel 29        q - q_default [rad]
  joint_vel 29            dq [rad/s]
  base_ang_vel_b 3        gyroscope [rad/s]
  projected_gravity_b 3   unit gravity direction (0, 0, -1)_w in the body frame
  last_action 29          the previous raw policy output (before scaling)
  ref_joint_pos_rel 29K   reference q - q_default at the next K control steps, frame-major [k0 j0..j28, k1 ..]
  ref_root_ori_b 6K       reference root orientation relative to the base, R = R_base^T R_ref, as the first
                          two columns of R, row-major: [R00 R01 R10 R11 R20 R21] per frame
  ref_root_lin_vel_b 3K   reference root linear velocity in the reference root frame [m/s]
  ref_root_ang_vel_b 3K   reference root angular velocity in the reference root frame [rad/s]
  phase 1                 progress through the clip, t / duration in [0, 1]
  ref_root_offset_xy 2K   reference root position minus the robot's estimated pelvis position (`root_pos_w`),
                          x y in the robot's heading frame (yaw only) [m]: how far the robot has wandered
                          from the clip; not in STANDARD_LAYOUT (a run turns it on: task.observe_root_offset)
The contract's layout lists which features are used and in which order.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, Sequence

import numpy as np

from bcg_sim.quat import conjugate, heading_xy, is_torch, multiply, rotate_inv, stack, to_rot6d

Array = Any  # np.ndarray or torch.Tensor


class RobotStateLike(Protocol):
    """What the builder reads from the robot (numpy or torch, leading batch dims `...`)."""

    joint_pos: Array  # [..., 29] rad
    joint_vel: Array  # [..., 29] rad/s
    base_quat_w: Array  # [..., 4] w x y z
    base_ang_vel_b: Array  # [..., 3] rad/s


class RobotState(NamedTuple):
    """A plain RobotStateLike (training/eval build these from simulator tensors)."""

    joint_pos: Array
    joint_vel: Array
    base_quat_w: Array
    base_ang_vel_b: Array
    # [..., 3] m, the pelvis position estimate (leg odometry on the robot and in bcg-eval; the simulator's own
    # plus a drift in training); only ref_root_offset_xy reads it
    root_pos_w: Array | None = None


class ReferenceWindow(NamedTuple):
    """The next K reference frames, yaw-aligned to the robot's world frame."""

    joint_pos: Array  # [..., K, 29] rad
    root_quat_w: Array  # [..., K, 4] w x y z
    root_lin_vel_w: Array  # [..., K, 3] m/s, world frame
    root_ang_vel_w: Array  # [..., K, 3] rad/s, world frame
    root_pos_w: Array | None = None  # [..., K, 3] m, world frame (only ref_root_offset_xy reads it)


# --- array-namespace helpers: the same code for numpy and torch (is_torch, stack: bcg_sim.quat) -----
def _cat(xs: Sequence[Array]) -> Array:
    if is_torch(xs[0]):
        import torch

        return torch.cat(list(xs), dim=-1)
    return np.concatenate(xs, axis=-1)


def _like(values: Sequence[float] | np.ndarray, ref: Array) -> Array:
    """A constant as an array of ref's kind, dtype and device."""
    if is_torch(ref):
        import torch

        # a copy: constants may be read-only arrays (the contract's joint ranges), which torch warns about
        return torch.as_tensor(np.array(values), dtype=ref.dtype, device=ref.device)
    return np.asarray(values, dtype=ref.dtype if ref.dtype.kind == "f" else np.float64)


def _flatten_last2(x: Array) -> Array:
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])


def projected_gravity(base_quat_w: Array) -> Array:
    """Unit gravity direction in the body frame [..., 3]; (0, 0, -1) when upright."""
    g = _like([0.0, 0.0, -1.0], base_quat_w) * (base_quat_w[..., :3] * 0 + 1)  # broadcast to batch
    return rotate_inv(base_quat_w, g)


# --- features ---------------------------------------------------------------------------------------
class _Inputs(NamedTuple):
    state: RobotStateLike
    ref: ReferenceWindow
    last_action: Array
    phase: Array
    default: Array  # [29]


def _ref_ori(i: _Inputs) -> Array:
    base = i.state.base_quat_w[..., None, :]  # [..., 1, 4] against [..., K, 4]
    base = base + 0 * i.ref.root_quat_w  # broadcast to K frames
    return _flatten_last2(to_rot6d(multiply(conjugate(base), i.ref.root_quat_w)))


def _root_offset_xy(i: _Inputs) -> Array:
    if i.state.root_pos_w is None or i.ref.root_pos_w is None:
        raise ValueError("observation feature ref_root_offset_xy needs root_pos_w in the robot state and the reference")
    fx, fy = heading_xy(i.state.base_quat_w)  # the pelvis' x axis on the ground: its heading
    n = (fx * fx + fy * fy) ** 0.5 + 1e-9
    c, s = (fx / n)[..., None], (fy / n)[..., None]  # [..., 1] against K frames
    d = i.ref.root_pos_w - i.state.root_pos_w[..., None, :]  # [..., K, 3]
    dx, dy = d[..., 0], d[..., 1]
    return _flatten_last2(stack([c * dx + s * dy, -s * dx + c * dy]))


FEATURES: dict[str, tuple[Callable[[int], int], Callable[[_Inputs], Array]]] = {
    # name: (size as a function of K, compute)
    "joint_pos_rel": (lambda k: 29, lambda i: i.state.joint_pos - i.default),
    "joint_vel": (lambda k: 29, lambda i: i.state.joint_vel),
    "base_ang_vel_b": (lambda k: 3, lambda i: i.state.base_ang_vel_b),
    "projected_gravity_b": (lambda k: 3, lambda i: projected_gravity(i.state.base_quat_w)),
    "last_action": (lambda k: 29, lambda i: i.last_action),
    "ref_joint_pos_rel": (lambda k: 29 * k, lambda i: _flatten_last2(i.ref.joint_pos - i.default)),
    "ref_root_ori_b": (lambda k: 6 * k, _ref_ori),
    "ref_root_lin_vel_b": (
        lambda k: 3 * k,
        lambda i: _flatten_last2(rotate_inv(i.ref.root_quat_w, i.ref.root_lin_vel_w)),
    ),
    "ref_root_ang_vel_b": (
        lambda k: 3 * k,
        lambda i: _flatten_last2(rotate_inv(i.ref.root_quat_w, i.ref.root_ang_vel_w)),
    ),
    "phase": (lambda k: 1, lambda i: i.phase),
    "ref_root_offset_xy": (lambda k: 2 * k, _root_offset_xy),
}
OPTIONAL_FEATURES = ("ref_root_offset_xy",)  # a run adds them to STANDARD_LAYOUT (at the end)
STANDARD_LAYOUT: tuple[str, ...] = tuple(f for f in FEATURES if f not in OPTIONAL_FEATURES)  # a new contract's


def feature_size(name: str, ref_horizon: int) -> int:
    if name not in FEATURES:
        raise ValueError(f"unknown observation feature {name!r}; known: {list(FEATURES)}")
    return FEATURES[name][0](ref_horizon)


def build_observation(
    robot_state: RobotStateLike, reference_window: ReferenceWindow, last_action: Array, phase: Array | float, contract
) -> Array:
    """The policy observation [..., n_obs] (un-normalized; `Policy.act` / `contract.normalize` normalize).

    robot_state: joint_pos, joint_vel [..., 29]; base_quat_w [..., 4]; base_ang_vel_b [..., 3].
    reference_window: ReferenceWindow with K = contract.observation.ref_horizon frames.
    last_action: [..., 29] previous raw action. phase: [..., 1] (a float for an unbatched numpy call).
    contract: a PolicyContract (layout, default pose). numpy in -> float32 numpy out; torch in -> torch out
    (input dtype/device). Feature order and sizes are those of contract.observation.layout.
    """
    ref_t = robot_state.joint_pos
    k = contract.observation.ref_horizon
    if reference_window.joint_pos.shape[-2] != k:
        raise ValueError(
            f"reference window has {reference_window.joint_pos.shape[-2]} frames, contract ref_horizon is {k}"
        )
    if not is_torch(phase):
        phase = _like(np.asarray(phase, dtype=np.float64), ref_t)
    if phase.ndim == 0:
        phase = phase.reshape(1)
    inputs = _Inputs(robot_state, reference_window, last_action, phase, _like(contract.default_joint_pos, ref_t))
    parts = []
    for item in contract.observation.layout:
        _, fn = FEATURES[item.name]
        x = fn(inputs)
        if x.shape[-1] != item.size:
            raise ValueError(f"observation feature {item.name} has size {x.shape[-1]}, layout says {item.size}")
        parts.append(x)
    obs = _cat(_broadcast(parts))
    return obs if is_torch(obs) else obs.astype(np.float32)


def _broadcast(parts: list[Array]) -> list[Array]:
    """Give every feature the same leading batch shape (e.g. a single reference for a batch of robots)."""
    shapes = [tuple(p.shape[:-1]) for p in parts]
    if len(set(shapes)) == 1:
        return parts
    batch = np.broadcast_shapes(*shapes)
    if is_torch(parts[0]):
        return [p.expand(*batch, p.shape[-1]) for p in parts]
    return [np.broadcast_to(p, (*batch, p.shape[-1])) for p in parts]
