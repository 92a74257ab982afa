"""Operations on motions: resampling, time windows, ground alignment, hold baseline, 29 <-> 23 DoF mapping.

All return new, completed `Motion`s (derived fields recomputed on the result).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bcg_sim.g1 import JOINTS_29, index_29_to_23
from bcg_sim.motion import kinematics
from bcg_sim.motion.config import motions_config
from bcg_sim.motion.motion import Motion
from bcg_sim.quat import slerp as quat_slerp

# Frame times are compared with this slack (s) so that e.g. a 4.0 s clip keeps its last frame at any rate.
_TIME_EPS = 1e-9


def resample(motion: Motion, fps: float) -> Motion:
    """The clip at a new rate: frames at k / fps for k = 0 .. floor(duration * fps).

    Positions and joints are interpolated linearly, the root quaternion by slerp (unit norm preserved);
    original frame times that fall on the new grid are reproduced exactly.
    """
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}")
    n = int(np.floor(motion.duration * fps + _TIME_EPS)) + 1
    t_new = np.arange(n) / fps
    src = t_new * motion.fps  # fractional source frame
    i0 = np.clip(np.floor(src + _TIME_EPS).astype(int), 0, motion.num_frames - 1)
    i1 = np.minimum(i0 + 1, motion.num_frames - 1)
    s = np.clip(src - i0, 0.0, 1.0)
    out = motion.primary()
    out.fps = float(fps)
    out.root_pos_w = _lerp(motion.root_pos_w, i0, i1, s)
    out.joint_pos = _lerp(motion.joint_pos, i0, i1, s)
    out.root_quat_w = quat_slerp(motion.root_quat_w[i0], motion.root_quat_w[i1], s)
    exact = s < _TIME_EPS  # keep the source quaternion bit-for-bit where no interpolation is needed
    out.root_quat_w[exact] = motion.root_quat_w[i0[exact]]
    return kinematics.complete(out)


def _lerp(x: np.ndarray, i0: np.ndarray, i1: np.ndarray, s: np.ndarray) -> np.ndarray:
    return x[i0] + (x[i1] - x[i0]) * s[:, None]


def clip(motion: Motion, start: float = 0.0, end: float | None = None) -> Motion:
    """Frames with start <= t <= end (seconds from the first frame; end=None: to the end), times restarted."""
    t = motion.times
    end = motion.duration if end is None else end
    keep = (t >= start - _TIME_EPS) & (t <= end + _TIME_EPS)
    if not keep.any():
        raise ValueError(f"window [{start}, {end}] s holds no frame of {motion.name!r} ({motion.duration:.3f} s)")
    out = motion.primary()
    out.root_pos_w, out.root_quat_w, out.joint_pos = (
        a[keep] for a in (motion.root_pos_w, motion.root_quat_w, motion.joint_pos)
    )
    return kinematics.complete(out)


def window(motion: Motion, start: float = 0.0, end: float | None = None) -> Motion:
    """The part of a clip from `start` to `end` seconds (end None: to the clip's end), checked: a window that
    is empty, reversed or reaches outside the clip raises a one-line ValueError naming the clip's duration.

    Frames are cut, not moved: world positions and headings stay where they were (the window's first frame is
    the clip's first frame at or after `start`, bit for bit), times restart at 0. The derived fields
    (velocities, body poses, contacts) are the whole clip's at the kept frames, so the window's first frame
    has the velocity the clip has there (a recomputation would use one-sided differences at the cut).
    start=0, end=None: the clip itself.
    """
    dur = motion.duration
    what = f"window --start {start:g} --end {'(clip end)' if end is None else f'{end:g}'} s of {motion.name!r}"
    if not np.isfinite(start) or start < 0:
        raise ValueError(f"{what}: start must be >= 0 s")
    if end is not None and (not np.isfinite(end) or end <= start):
        raise ValueError(f"{what}: end must be after start")
    if start > dur + _TIME_EPS or (end is not None and end > dur + 1e-6):
        raise ValueError(f"{what}: outside the clip, which lasts {dur:.3f} s")
    if start == 0 and (end is None or end >= dur - _TIME_EPS):
        return motion
    m = motion if motion.completed else kinematics.complete(motion.primary())
    t = m.times
    keep = (t >= start - _TIME_EPS) & (t <= (dur if end is None else end) + _TIME_EPS)
    if keep.sum() < 2:
        raise ValueError(f"{what}: holds {keep.sum()} frame(s) at {m.fps:g} fps; a window needs two")
    out = dataclasses.replace(
        m,
        body_names=list(m.body_names),
        **{
            f.name: np.array(getattr(m, f.name)[keep])
            for f in dataclasses.fields(m)
            if isinstance(getattr(m, f.name), np.ndarray)
        },
    )
    end_s = start + out.duration
    out.source = f"{motion.source} [{start:g}-{end_s:g} s]" if motion.source else f"[{start:g}-{end_s:g} s]"
    return out


def hold_error(motion: Motion) -> float:
    """The clip's hold-the-first-pose baseline E_track [m]: the tracking error (world-frame body positions, mean
    over bodies and frames, as bcg-eval's E_track) of a robot that stays frozen in the clip's first frame.

    A policy whose E_track is not well below this has not tracked the clip, whatever it did."""
    m = motion if motion.completed else kinematics.complete(motion.primary())
    return float(np.linalg.norm(m.body_pos_w - m.body_pos_w[:1], axis=-1).mean())


def ground_offset(motion: Motion) -> float:
    """Height (m) of the ground under the clip: the median lowest-sole height over its stance frames.

    Robust to noise: a long noisy clip has a few frames whose sole dips far below the others, and aligning
    on that minimum would lift every stance frame off the ground. Contacts depend on the height, so the
    clip is first shifted by a low quantile of its per-frame lowest sole, then the contact rule picks the
    stance frames and the median of their sole heights (per contacting foot) becomes the ground, repeated
    (config/motions.yaml `ground`). A clip without stance frames falls back to that quantile.
    """
    cfg = motions_config().ground
    m = motion if motion.completed else kinematics.complete(motion.primary())
    ground = float(np.quantile(kinematics.foot_heights(m).min(axis=1), cfg.initial_quantile))
    for _ in range(cfg.iterations):
        shifted = _shift_z(m, -ground)
        stance = shifted.foot_contact  # [T, 2]
        if not stance.any():
            break
        ground += float(np.median(kinematics.foot_heights(shifted)[stance]))
    return ground


def align_ground(motion: Motion) -> Motion:
    """The clip shifted vertically so that `ground_offset` becomes 0."""
    return _shift_z(motion, -ground_offset(motion))


def _shift_z(motion: Motion, dz: float) -> Motion:
    out = motion.primary()
    out.root_pos_w = out.root_pos_w + np.array([0.0, 0.0, dz])
    return kinematics.complete(out)


def to_23dof(joint_pos: np.ndarray) -> np.ndarray:
    """[..., 29] motor-order joints -> [..., 23] of Unitree's 23-DoF G1 (drops waist roll/pitch, wrist
    pitch/yaw: indices 13, 14, 20, 21, 27, 28)."""
    return np.asarray(joint_pos)[..., index_29_to_23()]


def from_23dof(joint_pos_23: np.ndarray) -> np.ndarray:
    """[..., 23] Unitree 23-DoF joints -> [..., 29]; the six missing joints are 0 rad."""
    q23 = np.asarray(joint_pos_23, dtype=float)
    out = np.zeros(q23.shape[:-1] + (len(JOINTS_29),))
    out[..., index_29_to_23()] = q23
    return out
