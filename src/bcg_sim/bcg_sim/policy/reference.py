"""The reference clip as the policy sees it: sampled at any time, yaw-aligned to the robot, in windows.

A `ReferenceTrack` holds one clip (root pose, joint positions and their velocities at `fps`) and answers
`window(t, K, dt)`: the K frames at times t + dt, t + 2 dt, ..., t + K dt (the next K control steps), as
a `ReferenceWindow` for `build_observation`. Times past the end hold the last frame (velocities zero).
`batch_window` does the same for N aligned copies of one clip at once (simulated worlds, one per copy).

The robot's IMU yaw is arbitrary, so at the start of a run the clip is rotated about z (`align_yaw`) so
that its heading at t0 equals the robot's; root positions are shifted so the clip starts at the origin.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from bcg_sim.g1.joints import JOINTS_29
from bcg_sim.policy.observation import ReferenceWindow
from bcg_sim.quat import conjugate, from_yaw, multiply, rotate, yaw

NUM_JOINTS = len(JOINTS_29)
# The clip's arrays, in the constructor's order: also the keys of its .npz file and of a Motion's fields.
ARRAYS = ("root_pos_w", "root_quat_w", "joint_pos", "root_lin_vel_w", "root_ang_vel_w")


def _angular_velocity_w(quat: np.ndarray, fps: float) -> np.ndarray:
    """World angular velocity [T, 3] from orientations [T, 4] by finite differences (last row repeated)."""
    if len(quat) < 2:
        return np.zeros((len(quat), 3))
    dq = multiply(quat[1:], conjugate(quat[:-1]))  # rotation from frame t to t+1, world frame
    dq = dq * np.sign(dq[:, :1] + 1e-12)  # shortest way
    vec = dq[:, 1:]
    s = np.linalg.norm(vec, axis=1, keepdims=True)
    angle = 2.0 * np.arctan2(s, dq[:, :1])
    axis = np.divide(vec, s, out=np.zeros_like(vec), where=s > 1e-12)
    w = axis * angle * fps
    return np.concatenate([w, w[-1:]], axis=0)


@dataclass
class ReferenceTrack:
    """One reference clip, arrays float64 [T, ...], world frame z up, quaternions w x y z."""

    name: str
    fps: float
    root_pos_w: np.ndarray  # [T, 3] m
    root_quat_w: np.ndarray  # [T, 4]
    joint_pos: np.ndarray  # [T, 29] rad, motor order
    root_lin_vel_w: np.ndarray | None = None  # [T, 3] m/s (finite differences when None)
    root_ang_vel_w: np.ndarray | None = None  # [T, 3] rad/s
    yaw_offset: float = 0.0  # rotation about world z applied to the clip [rad]
    pos_offset: np.ndarray = field(default_factory=lambda: np.zeros(3))  # added after the rotation [m]

    def __post_init__(self) -> None:
        self.root_pos_w = np.asarray(self.root_pos_w, dtype=np.float64).reshape(-1, 3)
        self.root_quat_w = np.asarray(self.root_quat_w, dtype=np.float64).reshape(-1, 4)
        self.root_quat_w /= np.linalg.norm(self.root_quat_w, axis=1, keepdims=True)
        self.joint_pos = np.asarray(self.joint_pos, dtype=np.float64).reshape(-1, NUM_JOINTS)
        n = len(self.joint_pos)
        if n < 1 or len(self.root_pos_w) != n or len(self.root_quat_w) != n:
            raise ValueError(
                f"reference {self.name!r}: root_pos {self.root_pos_w.shape}, root_quat "
                f"{self.root_quat_w.shape}, joint_pos {self.joint_pos.shape} must have T>=1 equal rows"
            )
        if not (self.fps > 0):
            raise ValueError(f"reference {self.name!r}: fps must be > 0, got {self.fps}")
        if self.root_lin_vel_w is None:
            self.root_lin_vel_w = np.gradient(self.root_pos_w, 1.0 / self.fps, axis=0) if n > 1 else np.zeros((n, 3))
        if self.root_ang_vel_w is None:
            self.root_ang_vel_w = _angular_velocity_w(self.root_quat_w, self.fps)
        for name in ARRAYS:
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"reference {self.name!r}: {name} has non-finite values")

    # --- construction / files ---
    @classmethod
    def from_motion(cls, motion) -> "ReferenceTrack":
        """From a bcg_sim.motion.Motion (derived velocities used when present)."""
        return cls(motion.name, motion.fps, *(getattr(motion, k) for k in ARRAYS))

    @classmethod
    def standing(
        cls, default_joint_pos, height: float = 0.79, frames: int = 2, fps: float = 50.0, name: str = "stand"
    ) -> "ReferenceTrack":
        """A still clip at the default pose (the hold policy's reference)."""
        q = np.tile(np.asarray(default_joint_pos, dtype=np.float64), (frames, 1))
        pos = np.tile([0.0, 0.0, height], (frames, 1))
        quat = np.tile([1.0, 0.0, 0.0, 0.0], (frames, 1))
        return cls(name, fps, pos, quat, q)

    def save_npz(self, path: str | Path) -> None:
        np.savez(path, fps=np.array([self.fps]), **{k: getattr(self, k) for k in ARRAYS})

    @classmethod
    def load_npz(cls, path: str | Path, name: str) -> "ReferenceTrack":
        """Read a clip written by save_npz; ArtifactError naming the file when it is not one."""
        from bcg_sim.policy.contract import ArtifactError

        if not zipfile.is_zipfile(path):  # np.load would guess "pickled data" for any other bytes
            raise ArtifactError(f"{path}: not a readable reference clip (.npz): not a zip archive (damaged?)")
        try:
            with np.load(path, allow_pickle=False) as d:
                return cls(name, float(d["fps"][0]), *(d[k] for k in ARRAYS))
        except KeyError as exc:
            raise ArtifactError(f"{path}: reference clip lacks array {exc}") from exc
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, IndexError, AttributeError) as exc:
            # np.load raises these on a file that is not (or no longer) an npz archive of our arrays
            raise ArtifactError(f"{path}: not a readable reference clip (.npz): {str(exc).splitlines()[0]}") from exc

    # --- sampling ---
    @property
    def num_frames(self) -> int:
        return len(self.joint_pos)

    @property
    def duration(self) -> float:
        return (self.num_frames - 1) / self.fps

    def phase(self, t: float) -> float:
        """Progress t / duration clipped to [0, 1] (1 for a single-frame clip)."""
        return 1.0 if self.duration <= 0 else float(np.clip(t / self.duration, 0.0, 1.0))

    def align_yaw(self, robot_base_quat_w: np.ndarray, t0: float = 0.0) -> None:
        """Rotate the clip about z so its heading at t0 equals the robot's; start it at the origin."""
        start = self.sample(np.array([t0]), aligned=False)
        self.yaw_offset = float(yaw(np.asarray(robot_base_quat_w, dtype=np.float64)) - yaw(start["root_quat_w"][0]))
        p0 = start["root_pos_w"][0]
        self.pos_offset = -rotate(from_yaw(self.yaw_offset), np.array([p0[0], p0[1], 0.0]))

    def sample(self, times: np.ndarray, aligned: bool = True) -> dict[str, np.ndarray]:
        """Arrays at `times` [N] s (linear interpolation, nlerp for quaternions; clamped to the clip)."""
        f = np.clip(np.asarray(times, dtype=np.float64) * self.fps, 0.0, self.num_frames - 1)
        i0 = np.floor(f).astype(int)
        i1 = np.minimum(i0 + 1, self.num_frames - 1)
        a = (f - i0)[:, None]
        past_end = (np.asarray(times) * self.fps >= self.num_frames - 1)[:, None]

        def lerp(x: np.ndarray) -> np.ndarray:
            return x[i0] * (1 - a) + x[i1] * a

        q0, q1 = self.root_quat_w[i0], self.root_quat_w[i1]
        q1 = q1 * np.sign(np.sum(q0 * q1, axis=1, keepdims=True) + 1e-12)
        quat = q0 * (1 - a) + q1 * a
        out = {
            "root_pos_w": lerp(self.root_pos_w),
            "root_quat_w": quat / np.linalg.norm(quat, axis=1, keepdims=True),
            "joint_pos": lerp(self.joint_pos),
            "root_lin_vel_w": np.where(past_end, 0.0, lerp(self.root_lin_vel_w)),
            "root_ang_vel_w": np.where(past_end, 0.0, lerp(self.root_ang_vel_w)),
        }
        if aligned and (self.yaw_offset != 0.0 or np.any(self.pos_offset)):
            out = _aligned(out, from_yaw(self.yaw_offset), self.pos_offset)
        return out

    def window(self, t: float, horizon: int, dt: float) -> ReferenceWindow:
        """The K = horizon frames at t + dt, ..., t + K dt as a ReferenceWindow ([K, ...] numpy)."""
        s = self.sample(t + dt * np.arange(1, horizon + 1))
        return ReferenceWindow(
            s["joint_pos"], s["root_quat_w"], s["root_lin_vel_w"], s["root_ang_vel_w"], s["root_pos_w"]
        )


def batch_window(tracks: Sequence[ReferenceTrack], t, horizon: int, dt: float) -> ReferenceWindow:
    """`window` of N tracks at once: track i at time t[i] [s] gives row i of a ReferenceWindow [N, K, ...], the
    numbers of tracks[i].window(t[i], horizon, dt). The tracks are copies of one clip (copy.copy: the same frame
    arrays), each with its own alignment, so the clip is sampled once for all N x K times."""
    first = tracks[0]
    if any(tr.joint_pos is not first.joint_pos for tr in tracks):
        raise ValueError("batch_window: the tracks must be copies of one clip (the same frame arrays)")
    times = np.asarray(t, dtype=np.float64)[:, None] + dt * np.arange(1, horizon + 1)  # [N, K]
    s = {k: v.reshape(*times.shape, v.shape[-1]) for k, v in first.sample(times.ravel(), aligned=False).items()}
    # a zero yaw and offset leave the frames bit for bit (rotation by the identity quaternion)
    qy = np.stack([from_yaw(tr.yaw_offset) for tr in tracks])[:, None, :]  # [N, 1, 4]
    pos = np.stack([tr.pos_offset for tr in tracks])[:, None, :]  # [N, 1, 3]
    s = _aligned(s, qy, pos)
    return ReferenceWindow(s["joint_pos"], s["root_quat_w"], s["root_lin_vel_w"], s["root_ang_vel_w"], s["root_pos_w"])


def _aligned(frames: dict[str, np.ndarray], qy: np.ndarray, pos: np.ndarray) -> dict[str, np.ndarray]:
    """Sampled frames [..., 3|4] turned about z by the yaw quaternion qy and then shifted by pos [m] (qy [4] and
    pos [3], or per track [N, 1, ...] against [N, K, ...] frames): the clip in the robot's world frame."""
    return {
        **frames,
        "root_pos_w": rotate(qy, frames["root_pos_w"]) + pos,
        "root_quat_w": multiply(np.broadcast_to(qy, frames["root_quat_w"].shape), frames["root_quat_w"]),
        "root_lin_vel_w": rotate(qy, frames["root_lin_vel_w"]),
        "root_ang_vel_w": rotate(qy, frames["root_ang_vel_w"]),
    }
