"""Safety checks of the policy node. Each returns None when fine, else the cause (a sentence for the log).

A cause sends the node to DAMPING (kp 0, kd > 0): the robot sinks slowly instead of falling stiff or limp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bcg_sim.g1.joints import JOINTS_29, joint_limits

JOINT_NAMES = [j.name for j in JOINTS_29]


@dataclass(frozen=True)
class SafetyLimits:
    stale_timeout_s: float  # LowState older than this -> fault
    max_tilt_rad: float  # angle between the pelvis z axis and world up
    joint_limit_margin_rad: float  # measured q may exceed the joint table's range by this much
    lower: np.ndarray  # [29] rad, joint table
    upper: np.ndarray  # [29] rad

    @classmethod
    def from_params(cls, stale_timeout_s: float, max_tilt_rad: float, joint_limit_margin_rad: float) -> "SafetyLimits":
        return cls(stale_timeout_s, max_tilt_rad, joint_limit_margin_rad, *joint_limits())


def tilt_angle(projected_gravity_b: np.ndarray) -> float:
    """Angle [rad] between body z and world up, from the unit gravity direction in the body frame [3]."""
    return math.acos(float(np.clip(-projected_gravity_b[2], -1.0, 1.0)))


def check_stale(age_s: float, limits: SafetyLimits) -> str | None:
    if age_s > limits.stale_timeout_s:
        return (
            f"stale /lowstate: last valid message {1e3 * age_s:.0f} ms old "
            f"(limit {1e3 * limits.stale_timeout_s:.0f} ms)"
        )
    return None


def check_tilt(projected_gravity_b: np.ndarray, limits: SafetyLimits) -> str | None:
    a = tilt_angle(projected_gravity_b)
    if a > limits.max_tilt_rad:
        return f"torso tilt {math.degrees(a):.0f} deg exceeds {math.degrees(limits.max_tilt_rad):.0f} deg"
    return None


def check_joint_limits(q: np.ndarray, limits: SafetyLimits) -> str | None:
    m = limits.joint_limit_margin_rad
    bad = np.flatnonzero((q < limits.lower - m) | (q > limits.upper + m))
    if bad.size:
        i = int(bad[0])
        return (
            f"joint limit breach: {JOINT_NAMES[i]} at {q[i]:.3f} rad outside "
            f"[{limits.lower[i]:.3f}, {limits.upper[i]:.3f}] +- {m} rad ({bad.size} joint(s))"
        )
    return None


def check_finite(what: str, x: np.ndarray, names: dict[str, slice] | None = None) -> str | None:
    """Non-finite entries of x; `names` (feature -> slice) says which feature they are in."""
    bad = np.flatnonzero(~np.isfinite(x))
    if not bad.size:
        return None
    where = ""
    if names:
        feats = sorted({n for n, s in names.items() for i in bad if s.start <= i < s.stop})
        where = f" in {', '.join(feats)}"
    return f"non-finite {what}{where} (index {bad[:5].tolist()})"
