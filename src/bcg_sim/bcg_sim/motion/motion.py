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
