"""Leg odometry: where the pelvis is, from what the G1 measures (joint encoders and the IMU's orientation).

The G1 has no sensor for its position, yet a tracking policy that cannot see how far its pelvis has wandered
from the clip cannot steer back (docs/training.md, "What to watch"). This estimate is what the robot can know:
the sole point carrying the weight is assumed not to move on the ground, so the pelvis moves by minus that
point's motion relative to the pelvis, which forward kinematics of the measured joint angles gives, turned
into the world frame by the IMU's orientation.

- The point carrying the weight: each of the eight sole spheres (bcg_sim.g1 foot spheres) keeps the ground
  point where it was last put down (its anchor), and the pelvis is where the anchors say, weighted by
  `support`, a soft minimum of the spheres' heights below the pelvis, so the support passes smoothly from heel
  to toe and from foot to foot. A supporting sphere's anchor stays, so white encoder noise does not add up
  over a stance (integrating each step's displacement drifted 1.4-2.4x more in MuJoCo); a sphere in the air is
  re-placed under where it now is.
- What it gets wrong: a slipping foot, flight phases (the lowest foot is taken as standing), and the IMU's
  yaw drift. Training applies the same rule to the simulated soles (`support` and the anchor update, in
  bcg_train.task), so a policy learns how far the estimate goes wrong where its feet slide.

One instance per robot run (or per batch of simulated worlds); `reset` at the start, `update` once per control
step, numpy (the node's control loop and bcg-eval run it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bcg_sim.g1 import FOOT_BODIES, FOOT_SPHERE_RADIUS, foot_sphere_positions, forward_kinematics
from bcg_sim.quat import is_torch

Array = Any  # np.ndarray or torch.Tensor
SUPPORT_SOFTNESS_M = 0.01  # [m] a sole sphere this much above the lowest carries 1/e of its support weight


def support(z: Array) -> Array:
    """Support weight in (0, 1] [..., 2S] of sole spheres at heights z [..., 2S] (numpy or torch): 1 for the
    lowest, falling by e per SUPPORT_SOFTNESS_M above it (a sphere 3 cm up carries ~5 %)."""
    if is_torch(z):
        import torch

        return torch.exp(-(z - z.min(dim=-1, keepdim=True).values) / SUPPORT_SOFTNESS_M)
    return np.exp(-(z - z.min(axis=-1, keepdims=True)) / SUPPORT_SOFTNESS_M)


class LegOdometry:
    """Pelvis position estimate [..., 3] m in the IMU's world frame from joint angles [..., 29] and the pelvis
    orientation [..., 4]: one robot (no leading dims) or a batch of simulated worlds ([N, ...])."""

    def __init__(self):
        self._spheres = foot_sphere_positions()  # [S, 3] in the ankle-roll frame
        self._anchor: np.ndarray | None = None  # [..., 2S, 2] believed ground position of each sole sphere [m]
        self.position_w = np.zeros(3)

    def _spheres_rel_w(self, joint_pos: np.ndarray, base_quat_w: np.ndarray) -> np.ndarray:
        """[..., 2S, 3] sole-sphere centres minus the pelvis position, in world axes (pelvis at the origin)."""
        joint_pos, base_quat_w = np.asarray(joint_pos, float), np.asarray(base_quat_w, float)
        qpos = np.concatenate([np.zeros((*joint_pos.shape[:-1], 3)), base_quat_w, joint_pos], axis=-1)
        pos, rot = forward_kinematics(qpos, bodies=FOOT_BODIES)  # [..., 2, 3], [..., 2, 3, 3]
        c = pos[..., :, None, :] + np.einsum("...fij,sj->...fsi", rot, self._spheres)  # [..., 2, S, 3]
        return c.reshape(*c.shape[:-3], -1, 3)

    def reset(self, joint_pos: np.ndarray, base_quat_w: np.ndarray, root_xy_w: np.ndarray | None = None) -> None:
        """Start at horizontal position root_xy_w [..., 2] m (default the origin), the height from the lowest
        sole."""
        rel = self._spheres_rel_w(joint_pos, base_quat_w)
        xy = np.zeros((*rel.shape[:-2], 2)) if root_xy_w is None else np.asarray(root_xy_w, float)[..., :2]
        self._anchor = xy[..., None, :] + rel[..., :2]  # [..., 2S, 2] where each sole sphere is believed to be
        self.position_w = self._position(xy, rel)

    @staticmethod
    def _position(xy: np.ndarray, rel: np.ndarray) -> np.ndarray:
        """[..., 3]: x, y and the pelvis height above the lowest sole (flat ground)."""
        return np.concatenate([xy, -rel[..., 2].min(axis=-1, keepdims=True) + FOOT_SPHERE_RADIUS], axis=-1)

    def update(self, joint_pos: np.ndarray, base_quat_w: np.ndarray) -> np.ndarray:
        """Advance by one measurement; returns the estimate [..., 3] m: x, y from the supporting soles, z the
        pelvis height above the lowest sole (flat ground)."""
        if self._anchor is None:
            raise RuntimeError("LegOdometry.update before reset")
        rel = self._spheres_rel_w(joint_pos, base_quat_w)
        s = support(rel[..., 2])  # [..., 2S]
        xy = np.einsum("...s,...sc->...c", s / s.sum(axis=-1, keepdims=True), self._anchor - rel[..., :2])
        # a supporting sphere keeps its ground point (so encoder noise does not add up over a stance); one in
        # the air is re-placed under where it now is
        w = s[..., None]
        self._anchor = w * self._anchor + (1 - w) * (xy[..., None, :] + rel[..., :2])
        self.position_w = self._position(xy, rel)
        return self.position_w.copy()


def clip_error(joint_pos: np.ndarray, base_quat_w: np.ndarray, root_pos_w: np.ndarray) -> np.ndarray:
    """[T] m: how far leg odometry run over a clip's own frames (joint angles [T, 29], pelvis orientation
    [T, 4], started at the first frame's pelvis) is from the clip's pelvis [T, 3], horizontally. What an offset
    observation built on it misses on a robot that moves exactly as the clip: near 0 where stance soles stay put,
    decimetres to metres where the clip's soles slide or it flies (`bcg-motion info` prints it)."""
    odo = LegOdometry()
    odo.reset(joint_pos[0], base_quat_w[0], root_pos_w[0, :2])
    est = [odo.position_w] + [odo.update(joint_pos[t], base_quat_w[t]) for t in range(1, len(joint_pos))]
    return np.linalg.norm(np.stack(est)[:, :2] - root_pos_w[:, :2], axis=-1)
