"""The `Motion` type: one reference clip of the 29-DoF G1.

Conventions (used everywhere in bcg):
- world frame `_w`: z up, metres; body frame `_b`: the pelvis frame.
- quaternions are **w x y z** (MuJoCo's order). Loaders convert from other orders (LAFAN1 CSV: x y z w).
- joints are in Unitree motor order, `bcg_sim.g1.joints.JOINTS_29` (29 columns).
- bodies are the G1 model's bodies in MuJoCo depth-first order (`bcg_sim.g1` model, 30 bodies incl. pelvis).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Motion:
    """A reference motion sampled at `fps`. T frames; arrays are float64 numpy.

    Primary fields (what a file stores) are root pose and joint positions; the derived fields
    (velocities, body poses from forward kinematics, foot contacts) are filled by
    `bcg_sim.motion.kinematics.complete(motion)` and are None until then.
    """

    name: str
    fps: float
    root_pos_w: np.ndarray  # [T, 3] pelvis position, m
    root_quat_w: np.ndarray  # [T, 4] pelvis orientation, w x y z
    joint_pos: np.ndarray  # [T, 29] rad, motor order
    # --- derived (None until completed) ---
    root_lin_vel_w: np.ndarray | None = None  # [T, 3] m/s
    root_ang_vel_w: np.ndarray | None = None  # [T, 3] rad/s, world frame
    joint_vel: np.ndarray | None = None  # [T, 29] rad/s
    body_names: list[str] = field(default_factory=list)  # [B]
    body_pos_w: np.ndarray | None = None  # [T, B, 3] m
    body_quat_w: np.ndarray | None = None  # [T, B, 4] w x y z
    foot_contact: np.ndarray | None = None  # [T, 2] bool, (left, right)
    source: str = ""  # file or generator this clip came from
    body_lin_vel_w: np.ndarray | None = None  # [T, B, 3] m/s, finite differences of body_pos_w
    body_ang_vel_w: np.ndarray | None = None  # [T, B, 3] rad/s, world frame, from body_quat_w

    @property
    def num_frames(self) -> int:
        return int(self.root_pos_w.shape[0])

    @property
    def duration(self) -> float:
        """Seconds from the first to the last frame."""
        return (self.num_frames - 1) / self.fps

    @property
    def dt(self) -> float:
        return 1.0 / self.fps

    @property
    def completed(self) -> bool:
        """True once the derived fields are filled (see `bcg_sim.motion.kinematics.complete`)."""
        return self.body_pos_w is not None and self.foot_contact is not None and self.joint_vel is not None

    @property
    def times(self) -> np.ndarray:
        """[T] seconds since the first frame."""
        return np.arange(self.num_frames) / self.fps

    def qpos(self) -> np.ndarray:
        """[T, 36] MuJoCo qpos of the G1 floating base model: x y z, qw qx qy qz, 29 joints."""
        return np.concatenate([self.root_pos_w, self.root_quat_w, self.joint_pos], axis=1)

    def primary(self, name: str | None = None, source: str | None = None) -> Motion:
        """A copy with only the primary fields (root pose, joints); derived fields are left for `complete`."""
        return Motion(
            name=self.name if name is None else name,
            fps=float(self.fps),
            root_pos_w=np.array(self.root_pos_w, dtype=float),
            root_quat_w=np.array(self.root_quat_w, dtype=float),
            joint_pos=np.array(self.joint_pos, dtype=float),
            source=self.source if source is None else source,
        )
