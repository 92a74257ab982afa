"""Loading the G1 MJCF into Newton the way that works (measured with Newton 1.8).

- Keep `enable_self_collisions=True` (Newton's default): Newton compiles the MJCF contype/conaffinity masks
  into its collision groups, so robot-robot pairs are already excluded while robot-floor pairs are kept.
  `enable_self_collisions=False` filters every pair of shapes in the file, the floor plane included, and the
  robot then falls through an MJCF floor (use floor=False plus `builder.add_ground_plane()` in that case).
- Newton does not apply MJCF keyframes and orders the free-joint quaternion (x, y, z, w); `newton_joint_q`
  gives the standing pose in Newton's layout.
"""

from __future__ import annotations

import numpy as np

from bcg_sim.g1.description import default_qpos
from bcg_sim.g1.mjcf import to_mjcf


def qpos_to_newton(qpos) -> np.ndarray:
    """MuJoCo qpos [..., 7 + n] (quat w x y z) -> Newton joint_q [..., 7 + n] (quat x y z w)."""
    q = np.array(qpos, dtype=float, copy=True)
    q[..., 3:7] = q[..., [4, 5, 6, 3]]
    return q


def newton_joint_q(variant: str = "29dof") -> np.ndarray:
    """Standing pose (soles on the floor) as Newton joint_q [7 + n]: pelvis xyz [m], quat x y z w, joints [rad]."""
    return qpos_to_newton(default_qpos(variant))


def add_to_builder(builder, variant: str = "29dof", floor: bool = True, **add_mjcf_kwargs) -> None:
    """Add the G1 (and, with floor=True, its ground plane) to a `newton.ModelBuilder`.

    Sites are skipped by default (Newton would make them shapes); any add_mjcf keyword may be overridden.
    """
    kwargs = {"parse_sites": False, "enable_self_collisions": True}
    kwargs.update(add_mjcf_kwargs)
    builder.add_mjcf(to_mjcf(variant, floor=floor), **kwargs)
