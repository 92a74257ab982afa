"""The G1's joints and motors: the one table every part of bcg reads.

Joint order is Unitree's motor order (slots 0..28 of LowCmd/LowState), which is also the order of the
LAFAN1-G1 CSV files and of the MuJoCo Menagerie model. Ranges and effort limits are those of Unitree's
published G1 (29-DoF, rev 1.0) description; motor armature, velocity limits and PD gains follow the
motor type of each joint (Unitree's actuator data as used by BeyondMimic/mjlab).

Units: rad, rad/s, N m, kg m^2; gains in N m/rad and N m s/rad.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

# PD gains are chosen per motor as a critically-overdamped second-order system on the reflected rotor
# inertia: kp = I_a * w^2, kd = 2 * zeta * I_a * w (w = 2 pi * 10 Hz, zeta = 2), as in BeyondMimic.
PD_NATURAL_FREQ_HZ = 10.0
PD_DAMPING_RATIO = 2.0


@dataclass(frozen=True)
class Motor:
    """One Unitree actuator type."""

    name: str
    armature: float  # reflected rotor inertia [kg m^2]
    effort_limit: float  # [N m]
    velocity_limit: float  # [rad/s]

    @property
    def kp(self) -> float:
        w = 2.0 * math.pi * PD_NATURAL_FREQ_HZ
        return self.armature * w * w

    @property
    def kd(self) -> float:
        w = 2.0 * math.pi * PD_NATURAL_FREQ_HZ
        return 2.0 * PD_DAMPING_RATIO * self.armature * w


MOTORS = {
    "7520-14": Motor("7520-14", armature=0.010177520, effort_limit=88.0, velocity_limit=32.0),
    "7520-22": Motor("7520-22", armature=0.025101925, effort_limit=139.0, velocity_limit=20.0),
    "5020": Motor("5020", armature=0.003609725, effort_limit=25.0, velocity_limit=37.0),
    # Ankles and waist roll/pitch are driven by two 5020 motors through a parallel linkage.
    "2x5020": Motor("2x5020", armature=2 * 0.003609725, effort_limit=50.0, velocity_limit=37.0),
    "4010": Motor("4010", armature=0.00425, effort_limit=5.0, velocity_limit=22.0),
}


@dataclass(frozen=True)
class Joint:
    name: str  # without the "_joint" suffix used in MJCF/URDF
    axis: tuple[float, float, float]  # in the child body frame
    lower: float  # [rad]
    upper: float  # [rad]
    motor: str  # key of MOTORS
    default: float  # default (standing) pose [rad]

    @property
    def mjcf_name(self) -> str:
        return f"{self.name}_joint"


_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


def _leg(side: str, s: float) -> list[Joint]:
    """s = +1 for the left leg, -1 for the right (mirrors hip roll range)."""
    roll = (-0.5236, 2.9671) if s > 0 else (-2.9671, 0.5236)
    return [
        Joint(f"{side}_hip_pitch", _Y, -2.5307, 2.8798, "7520-14", -0.312),
        Joint(f"{side}_hip_roll", _X, *roll, "7520-22", 0.0),
        Joint(f"{side}_hip_yaw", _Z, -2.7576, 2.7576, "7520-14", 0.0),
        Joint(f"{side}_knee", _Y, -0.087267, 2.8798, "7520-22", 0.669),
        Joint(f"{side}_ankle_pitch", _Y, -0.87267, 0.5236, "2x5020", -0.363),
        Joint(f"{side}_ankle_roll", _X, -0.2618, 0.2618, "2x5020", 0.0),
    ]


def _arm(side: str, s: float) -> list[Joint]:
    roll = (-1.5882, 2.2515) if s > 0 else (-2.2515, 1.5882)
    return [
        Joint(f"{side}_shoulder_pitch", _Y, -3.0892, 2.6704, "5020", 0.2),
        Joint(f"{side}_shoulder_roll", _X, *roll, "5020", 0.2 * s),
        Joint(f"{side}_shoulder_yaw", _Z, -2.618, 2.618, "5020", 0.0),
        Joint(f"{side}_elbow", _Y, -1.0472, 2.0944, "5020", 0.6),
        Joint(f"{side}_wrist_roll", _X, -1.97222, 1.97222, "5020", 0.0),
        Joint(f"{side}_wrist_pitch", _Y, -1.61443, 1.61443, "4010", 0.0),
        Joint(f"{side}_wrist_yaw", _Z, -1.61443, 1.61443, "4010", 0.0),
    ]


JOINTS_29: tuple[Joint, ...] = tuple(
    _leg("left", 1.0)
    + _leg("right", -1.0)
    + [
        Joint("waist_yaw", _Z, -2.618, 2.618, "7520-14", 0.0),
        Joint("waist_roll", _X, -0.52, 0.52, "2x5020", 0.0),
        Joint("waist_pitch", _Y, -0.52, 0.52, "2x5020", 0.0),
    ]
    + _arm("left", 1.0)
    + _arm("right", -1.0)
)

# Unitree's 23-DoF G1 has no waist roll/pitch and no wrist pitch/yaw.
REMOVED_IN_23DOF = (
    "waist_roll",
    "waist_pitch",
    "left_wrist_pitch",
    "left_wrist_yaw",
    "right_wrist_pitch",
    "right_wrist_yaw",
)
JOINTS_23: tuple[Joint, ...] = tuple(j for j in JOINTS_29 if j.name not in REMOVED_IN_23DOF)

Variant = Literal["29dof", "23dof"]
VARIANTS: dict[Variant, tuple[Joint, ...]] = {"29dof": JOINTS_29, "23dof": JOINTS_23}

# Bring-up ("stand") PD gains: used to move to and hold the default pose before a policy runs, and by
# the simulators' hold tests. The motors' policy gains above are soft (BeyondMimic's): with them a passive
# PD cannot hold the G1 upright — the two ankles give ~57 N m/rad against ~217 N m/rad of toppling
# stiffness (m g h), and it falls within ~1 s. Measured in MuJoCo (2 ms, project model): ankle kp >= ~200
# is needed; these gains hold the default pose for 5 s with < 1 mm pelvis drift. Keyed by a substring
# of the joint name; (kp [N m/rad], kd [N m s/rad]).
STAND_GAINS: dict[str, tuple[float, float]] = {
    "hip": (200.0, 5.0),
    "knee": (300.0, 6.0),
    "ankle": (300.0, 5.0),
    "waist": (300.0, 5.0),
    "shoulder": (50.0, 2.0),
    "elbow": (50.0, 2.0),
    "wrist": (20.0, 1.0),
}


def stand_gains(variant: str = "29dof") -> tuple[list[float], list[float]]:
    """(kp, kd) per joint of the variant, in motor order, for holding the default pose."""
    kp, kd = [], []
    for j in joints(variant):
        group = next(k for k in STAND_GAINS if k in j.name)
        kp.append(STAND_GAINS[group][0])
        kd.append(STAND_GAINS[group][1])
    return kp, kd


# Number of motor slots in unitree_hg LowCmd/LowState; joints fill slots 0..28 in JOINTS_29 order.
NUM_MOTOR_SLOTS = 35


def joints(variant: str = "29dof") -> tuple[Joint, ...]:
    if variant not in VARIANTS:
        raise ValueError(f"unknown G1 variant {variant!r}; expected one of {sorted(VARIANTS)}")
    return VARIANTS[variant]


def joint_limits(variant: str = "29dof") -> tuple[np.ndarray, np.ndarray]:
    """(lower [n], upper [n]) joint ranges in rad, motor order, float64: the one place limits become arrays."""
    js = joints(variant)
    return np.array([j.lower for j in js]), np.array([j.upper for j in js])


def joint_names(variant: str = "29dof") -> list[str]:
    """MJCF/URDF joint names ("..._joint") in motor order."""
    return [j.mjcf_name for j in joints(variant)]


def motor_slots(variant: str = "29dof") -> list[int]:
    """LowCmd/LowState motor slot of each joint of the variant (the 29-DoF index)."""
    names29 = [j.name for j in JOINTS_29]
    return [names29.index(j.name) for j in joints(variant)]


def index_29_to_23() -> list[int]:
    """Indices into a [.., 29] array that give the 23-DoF joints."""
    return motor_slots("23dof")
