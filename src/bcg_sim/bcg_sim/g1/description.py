"""The G1's physical description: bodies, joint frames, inertias, collision/visual primitives, sites.

This is the one source of truth from which `mjcf.py` (MuJoCo, Newton) and `urdf.py` (rviz) are generated.
Joint limits, motor armature and effort/velocity limits come from `joints.py`; everything else is here.

Frames follow MuJoCo: each body has a position [m] and a unit quaternion (w, x, y, z) relative to its
parent; a hinge joint sits at the body origin and rotates about `Joint.axis` in the body frame.
Inertias are principal moments [kg m^2] in a frame at `com` rotated by `iquat` (MuJoCo `diaginertia`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from bcg_sim.g1.joints import JOINTS_29, Joint, joints
from bcg_sim.quat import normalize as quat_normalize
from bcg_sim.quat import to_matrix as quat_to_matrix

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]
IDENTITY_QUAT: Quat = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Inertial:
    mass: float  # [kg]
    com: Vec3  # centre of mass in the body frame [m]
    quat: Quat  # principal-axes frame relative to the body frame (w, x, y, z)
    diag: Vec3  # principal moments [kg m^2]


@dataclass(frozen=True)
class Body:
    name: str
    parent: str | None  # None for the floating root (pelvis)
    joint: str | None  # joints.py name of the hinge at this body's origin (29-DoF), None for the root
    pos: Vec3  # origin in the parent frame [m]
    quat: Quat  # orientation relative to the parent (w, x, y, z)
    inertial: Inertial


def _body(
    name: str,
    *,
    parent: str | None,
    joint: str | None,
    pos: Vec3,
    quat: Quat,
    mass: float,
    com: Vec3,
    iquat: Quat,
    diag: Vec3,
) -> Body:
    return Body(name, parent, joint, pos, quat, Inertial(mass, com, iquat, diag))


# Kinematic and inertial figures of the real robot (Unitree G1 29-DoF, rev 1.0), transcribed from Unitree's
# published description as packaged in MuJoCo Menagerie (unitree_g1/g1.xml, BSD-3-Clause, (c) Unitree
# Robotics). Bodies are listed in MuJoCo's depth-first order; the root's pose comes from `default_qpos`.
# The right side is written out rather than mirrored from the left so that each row matches its source:
# Menagerie gives most right-side principal axes (iquat) in another but equivalent form, the right knee's
# inertia differs slightly and the right shoulder sits at y = -0.10021 (left +0.10022).
# A data table, one body per four lines: the formatter would give each figure a line of its own.
# fmt: off
BODIES: tuple[Body, ...] = (
    _body("pelvis", parent=None, joint=None,
          pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
          mass=3.813, com=(0.0, 0.0, -0.07605),
          iquat=(1.0, 0.0, -0.000399148, 0.0), diag=(0.010549, 0.0093089, 0.0079184)),
    _body("left_hip_pitch_link", parent="pelvis", joint="left_hip_pitch",
          pos=(0.0, 0.064452, -0.1027), quat=(1.0, 0.0, 0.0, 0.0),
          mass=1.35, com=(0.002741, 0.047791, -0.02606),
          iquat=(0.954862, 0.293964, 0.0302556, 0.030122), diag=(0.00181517, 0.00153422, 0.00116212)),
    _body("left_hip_roll_link", parent="left_hip_pitch_link", joint="left_hip_roll",
          pos=(0.0, 0.052, -0.030465), quat=(0.996179, 0.0, -0.0873386, 0.0),
          mass=1.52, com=(0.029812, -0.001045, -0.087934),
          iquat=(0.977808, -1.97119e-05, 0.205576, -0.0403793), diag=(0.00254986, 0.00241169, 0.00148755)),
    _body("left_hip_yaw_link", parent="left_hip_roll_link", joint="left_hip_yaw",
          pos=(0.025001, 0.0, -0.12412), quat=(1.0, 0.0, 0.0, 0.0),
          mass=1.702, com=(-0.057709, -0.010981, -0.15078),
          iquat=(0.600598, 0.15832, 0.223482, 0.751181), diag=(0.00776166, 0.00717575, 0.00160139)),
    _body("left_knee_link", parent="left_hip_yaw_link", joint="left_knee",
          pos=(-0.078273, 0.0021489, -0.17734), quat=(0.996179, 0.0, 0.0873386, 0.0),
          mass=1.932, com=(0.005457, 0.003964, -0.12074),
          iquat=(0.923418, -0.0327699, 0.0158246, 0.382067), diag=(0.0113804, 0.0112778, 0.00146458)),
    _body("left_ankle_pitch_link", parent="left_knee_link", joint="left_ankle_pitch",
          pos=(0.0, -9.4445e-05, -0.30001), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.074, com=(-0.007269, 0.0, 0.011137),
          iquat=(0.603053, 0.369225, 0.369225, 0.603053), diag=(1.89e-05, 1.40805e-05, 6.9195e-06)),
    _body("left_ankle_roll_link", parent="left_ankle_pitch_link", joint="left_ankle_roll",
          pos=(0.0, 0.0, -0.017558), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.608, com=(0.026505, 0.0, -0.016425),
          iquat=(-0.000481092, 0.728482, -0.000618967, 0.685065), diag=(0.00167218, 0.0016161, 0.000217621)),
    _body("right_hip_pitch_link", parent="pelvis", joint="right_hip_pitch",
          pos=(0.0, -0.064452, -0.1027), quat=(1.0, 0.0, 0.0, 0.0),
          mass=1.35, com=(0.002741, -0.047791, -0.02606),
          iquat=(0.954862, -0.293964, 0.0302556, -0.030122), diag=(0.00181517, 0.00153422, 0.00116212)),
    _body("right_hip_roll_link", parent="right_hip_pitch_link", joint="right_hip_roll",
          pos=(0.0, -0.052, -0.030465), quat=(0.996179, 0.0, -0.0873386, 0.0),
          mass=1.52, com=(0.029812, 0.001045, -0.087934),
          iquat=(0.977808, 1.97119e-05, 0.205576, 0.0403793), diag=(0.00254986, 0.00241169, 0.00148755)),
    _body("right_hip_yaw_link", parent="right_hip_roll_link", joint="right_hip_yaw",
          pos=(0.025001, 0.0, -0.12412), quat=(1.0, 0.0, 0.0, 0.0),
          mass=1.702, com=(-0.057709, 0.010981, -0.15078),
          iquat=(0.751181, 0.223482, 0.15832, 0.600598), diag=(0.00776166, 0.00717575, 0.00160139)),
    _body("right_knee_link", parent="right_hip_yaw_link", joint="right_knee",
          pos=(-0.078273, -0.0021489, -0.17734), quat=(0.996179, 0.0, 0.0873386, 0.0),
          mass=1.932, com=(0.005457, -0.003964, -0.12074),
          iquat=(0.923439, 0.0345276, 0.0116333, -0.382012), diag=(0.011374, 0.0112843, 0.00146452)),
    _body("right_ankle_pitch_link", parent="right_knee_link", joint="right_ankle_pitch",
          pos=(0.0, 9.4445e-05, -0.30001), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.074, com=(-0.007269, 0.0, 0.011137),
          iquat=(0.603053, 0.369225, 0.369225, 0.603053), diag=(1.89e-05, 1.40805e-05, 6.9195e-06)),
    _body("right_ankle_roll_link", parent="right_ankle_pitch_link", joint="right_ankle_roll",
          pos=(0.0, 0.0, -0.017558), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.608, com=(0.026505, 0.0, -0.016425),
          iquat=(0.000481092, 0.728482, 0.000618967, 0.685065), diag=(0.00167218, 0.0016161, 0.000217621)),
    _body("waist_yaw_link", parent="pelvis", joint="waist_yaw",
          pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.214, com=(0.003494, 0.000233, 0.018034),
          iquat=(0.289697, 0.591001, -0.337795, 0.672821), diag=(0.000163531, 0.000107714, 0.000102205)),
    _body("waist_roll_link", parent="waist_yaw_link", joint="waist_roll",
          pos=(-0.0039635, 0.0, 0.044), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.086, com=(0.0, 2.3e-05, 0.0),
          iquat=(0.5, 0.5, -0.5, 0.5), diag=(8.245e-06, 7.079e-06, 6.339e-06)),
    _body("torso_link", parent="waist_roll_link", joint="waist_pitch",
          pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
          mass=7.818, com=(0.00203158, 0.000339683, 0.184568),
          iquat=(0.999803, -6.03319e-05, 0.0198256, 0.00131986), diag=(0.121847, 0.109825, 0.0273735)),
    _body("left_shoulder_pitch_link", parent="torso_link", joint="left_shoulder_pitch",
          pos=(0.0039563, 0.10022, 0.24778), quat=(0.990264, 0.139201, 1.38722e-05, -9.86868e-05),
          mass=0.718, com=(0.0, 0.035892, -0.011628),
          iquat=(0.654152, 0.0130458, -0.326267, 0.68225), diag=(0.000465864, 0.000432842, 0.000406394)),
    _body("left_shoulder_roll_link", parent="left_shoulder_pitch_link", joint="left_shoulder_roll",
          pos=(0.0, 0.038, -0.013831), quat=(0.990268, -0.139172, 0.0, 0.0),
          mass=0.643, com=(-0.000227, 0.00727, -0.063243),
          iquat=(0.701256, -0.0196223, -0.00710317, 0.712604), diag=(0.000691311, 0.000618011, 0.000388977)),
    _body("left_shoulder_yaw_link", parent="left_shoulder_roll_link", joint="left_shoulder_yaw",
          pos=(0.0, 0.00624, -0.1032), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.734, com=(0.010773, -0.002949, -0.072009),
          iquat=(0.716879, -0.0964829, -0.0679942, 0.687134), diag=(0.00106187, 0.00103217, 0.000400661)),
    _body("left_elbow_link", parent="left_shoulder_yaw_link", joint="left_elbow",
          pos=(0.015783, 0.0, -0.080518), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.6, com=(0.064956, 0.004454, -0.010062),
          iquat=(0.541765, 0.636132, 0.388821, 0.388129), diag=(0.000443035, 0.000421612, 0.000259353)),
    _body("left_wrist_roll_link", parent="left_elbow_link", joint="left_wrist_roll",
          pos=(0.1, 0.00188791, -0.01), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.085445, com=(0.0171394, 0.000537591, 4.8864e-07),
          iquat=(0.575338, 0.411667, -0.574906, 0.411094), diag=(5.48211e-05, 4.96646e-05, 3.57798e-05)),
    _body("left_wrist_pitch_link", parent="left_wrist_roll_link", joint="left_wrist_pitch",
          pos=(0.038, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.48405, com=(0.0229999, -0.00111685, -0.00111658),
          iquat=(0.249998, 0.661363, 0.293036, 0.643608), diag=(0.000430353, 0.000429873, 0.000164648)),
    _body("left_wrist_yaw_link", parent="left_wrist_pitch_link", joint="left_wrist_yaw",
          pos=(0.046, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.254576, com=(0.0708244, 0.000191745, 0.00161742),
          iquat=(0.510571, 0.526295, 0.468078, 0.493188), diag=(0.000646113, 0.000559993, 0.000147566)),
    _body("right_shoulder_pitch_link", parent="torso_link", joint="right_shoulder_pitch",
          pos=(0.0039563, -0.10021, 0.24778), quat=(0.990264, -0.139201, 1.38722e-05, 9.86868e-05),
          mass=0.718, com=(0.0, -0.035892, -0.011628),
          iquat=(0.68225, -0.326267, 0.0130458, 0.654152), diag=(0.000465864, 0.000432842, 0.000406394)),
    _body("right_shoulder_roll_link", parent="right_shoulder_pitch_link", joint="right_shoulder_roll",
          pos=(0.0, -0.038, -0.013831), quat=(0.990268, 0.139172, 0.0, 0.0),
          mass=0.643, com=(-0.000227, -0.00727, -0.063243),
          iquat=(0.712604, -0.00710317, -0.0196223, 0.701256), diag=(0.000691311, 0.000618011, 0.000388977)),
    _body("right_shoulder_yaw_link", parent="right_shoulder_roll_link", joint="right_shoulder_yaw",
          pos=(0.0, -0.00624, -0.1032), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.734, com=(0.010773, 0.002949, -0.072009),
          iquat=(0.687134, -0.0679942, -0.0964829, 0.716879), diag=(0.00106187, 0.00103217, 0.000400661)),
    _body("right_elbow_link", parent="right_shoulder_yaw_link", joint="right_elbow",
          pos=(0.015783, 0.0, -0.080518), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.6, com=(0.064956, -0.004454, -0.010062),
          iquat=(0.388129, 0.388821, 0.636132, 0.541765), diag=(0.000443035, 0.000421612, 0.000259353)),
    _body("right_wrist_roll_link", parent="right_elbow_link", joint="right_wrist_roll",
          pos=(0.1, -0.00188791, -0.01), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.085445, com=(0.0171394, -0.000537591, 4.8864e-07),
          iquat=(0.411667, 0.575338, -0.411094, 0.574906), diag=(5.48211e-05, 4.96646e-05, 3.57798e-05)),
    _body("right_wrist_pitch_link", parent="right_wrist_roll_link", joint="right_wrist_pitch",
          pos=(0.038, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.48405, com=(0.0229999, 0.00111685, -0.00111658),
          iquat=(0.643608, 0.293036, 0.661363, 0.249998), diag=(0.000430353, 0.000429873, 0.000164648)),
    _body("right_wrist_yaw_link", parent="right_wrist_pitch_link", joint="right_wrist_yaw",
          pos=(0.046, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
          mass=0.254576, com=(0.0708244, -0.000191745, 0.00161742),
          iquat=(0.493188, 0.468078, 0.526295, 0.510571), diag=(0.000646113, 0.000559993, 0.000147566)),
)
# fmt: on

BODY_NAMES: tuple[str, ...] = tuple(b.name for b in BODIES)
_BODY_BY_NAME = {b.name: b for b in BODIES}
_JOINT_BY_NAME = {j.name: j for j in JOINTS_29}

# --- contact geometry -----------------------------------------------------------------------------------
# The sole touches the ground through four small spheres at its corners, as the real rubber sole does
# (positions and radius as in Menagerie's G1, in the ankle-roll frame). Order: heel left, heel right,
# toe left, toe right (left/right of the foot's own x axis).
FOOT_BODIES = ("left_ankle_roll_link", "right_ankle_roll_link")
FOOT_SPHERE_RADIUS = 0.005  # [m]
_FOOT_SPHERES: tuple[Vec3, ...] = (
    (-0.05, 0.025, -0.03),
    (-0.05, -0.025, -0.03),
    (0.12, 0.03, -0.03),
    (0.12, -0.03, -0.03),
)
FOOT_FRICTION = 0.6  # sliding friction of the sole spheres (rubber on floor), as in Menagerie
BODY_FRICTION = 1.0  # MuJoCo's default sliding friction for the other colliders


@dataclass(frozen=True)
class Geom:
    """A primitive shape attached to a body.

    size: sphere (r,), capsule (r, half_length) along the geom's local z, box (half_x, half_y, half_z) [m].
    """

    name: str
    body: str
    kind: str  # "sphere" | "capsule" | "box"
    size: tuple[float, ...]
    pos: Vec3  # in the body frame [m]
    quat: Quat = IDENTITY_QUAT


def _quat_z_to(d: np.ndarray) -> Quat:
    """Shortest-arc quaternion (w, x, y, z) that turns +z onto the unit vector d."""
    z = np.array([0.0, 0.0, 1.0])
    c = float(np.dot(z, d))
    if c < -1.0 + 1e-9:  # antiparallel: half-turn about x
        return (0.0, 1.0, 0.0, 0.0)
    axis = np.cross(z, d)
    q = np.array([1.0 + c, *axis])
    q /= np.linalg.norm(q)
    return tuple(float(x) for x in q)


def capsule(name: str, body: str, a: Vec3, b: Vec3, radius: float) -> Geom:
    """Capsule of `radius` [m] whose segment runs from a to b (body frame, [m])."""
    pa, pb = np.asarray(a, float), np.asarray(b, float)
    length = float(np.linalg.norm(pb - pa))
    pos = tuple(float(x) for x in (pa + pb) / 2)
    return Geom(name, body, "capsule", (radius, length / 2), pos, _quat_z_to((pb - pa) / length))


def box(name: str, body: str, center: Vec3, half: Vec3) -> Geom:
    return Geom(name, body, "box", tuple(half), tuple(center))


def sphere(name: str, body: str, center: Vec3, radius: float) -> Geom:
    return Geom(name, body, "sphere", (radius,), tuple(center))


def _y(p: Vec3, s: float) -> Vec3:
    """Mirror a left-side point to side s (+1 left, -1 right) by flipping y."""
    return (p[0], s * p[1], p[2])


def _side_colliders(side: str, s: float) -> list[Geom]:
    """Limb colliders of one side.

    Sized to the extents of Unitree's link meshes (checked by test_colliders_cover_the_link_meshes) so that a
    fall touches the ground where the robot would; small links inside their neighbours' colliders get none.
    """
    return [
        capsule(f"{side}_hip", f"{side}_hip_roll_link", (0.025, 0.0, 0.0), (0.025, 0.0, -0.08), 0.052),
        capsule(f"{side}_thigh", f"{side}_hip_yaw_link", (0.0, 0.0, -0.03), _y((-0.07, 0.002, -0.17), s), 0.05),
        capsule(f"{side}_shin", f"{side}_knee_link", (0.015, 0.0, 0.0), (0.0, 0.0, -0.25), 0.045),
        capsule(
            f"{side}_shoulder",
            f"{side}_shoulder_pitch_link",
            _y((0.0, 0.025, -0.005), s),
            _y((0.0, 0.05, -0.005), s),
            0.04,
        ),
        capsule(
            f"{side}_upper_arm_top",
            f"{side}_shoulder_roll_link",
            _y((0.0, 0.004, 0.0), s),
            _y((0.0, 0.004, -0.07), s),
            0.04,
        ),
        capsule(f"{side}_upper_arm", f"{side}_shoulder_yaw_link", (0.0, 0.0, 0.0), (0.0158, 0.0, -0.08), 0.035),
        capsule(f"{side}_forearm", f"{side}_elbow_link", (0.0, 0.0, 0.0), _y((0.1, 0.002, -0.01), s), 0.03),
        capsule(f"{side}_wrist", f"{side}_wrist_pitch_link", (0.0, 0.0, 0.0), (0.046, 0.0, 0.0), 0.03),
        box(f"{side}_hand", f"{side}_wrist_yaw_link", _y((0.078, -0.005, 0.01), s), (0.09, 0.035, 0.05)),
    ] + [
        sphere(f"{side}_foot_{i}", f"{side}_ankle_roll_link", p, FOOT_SPHERE_RADIUS)
        for i, p in enumerate(_FOOT_SPHERES)
    ]


COLLIDERS: tuple[Geom, ...] = tuple(
    [
        box("pelvis_collision", "pelvis", (0.0015, 0.0, -0.075), (0.06, 0.07, 0.075)),
        box("torso_collision", "torso_link", (0.008, 0.0, 0.15), (0.075, 0.105, 0.16)),
        sphere("head", "torso_link", (0.008, 0.0, 0.385), 0.085),
    ]
    + _side_colliders("left", 1.0)
    + _side_colliders("right", -1.0)
)


def foot_sphere_positions() -> np.ndarray:
    """[4, 3] sole sphere centres in the ankle-roll frame [m] (same for both feet): heel L, heel R, toe L, toe R."""
    return np.array(_FOOT_SPHERES, dtype=float)


def foot_sphere_names(foot: str | None = None) -> list[str]:
    """Names of the sole-sphere geoms: left_foot_0..3, right_foot_0..3 (or one side: foot="left"/"right")."""
    sides = ("left", "right") if foot is None else (foot,)
    return [f"{s}_foot_{i}" for s in sides for i in range(len(_FOOT_SPHERES))]


# --- visual geometry: primitives only (no meshes), sized to the link meshes' bounding boxes -------------------
def _side_visuals(side: str, s: float) -> list[Geom]:
    return [
        capsule(f"{side}_hip_pitch_visual", f"{side}_hip_pitch_link", (0.0, 0.0, 0.0), _y((0.0, 0.07, -0.03), s), 0.04),
        box(f"{side}_sole_visual", f"{side}_ankle_roll_link", (0.038, 0.0, -0.018), (0.104, 0.038, 0.016)),
        sphere(f"{side}_ankle_visual", f"{side}_ankle_pitch_link", (0.0, 0.0, 0.0), 0.02),
        capsule(f"{side}_wrist_roll_visual", f"{side}_wrist_roll_link", (0.0, 0.0, 0.0), (0.038, 0.0, 0.0), 0.028),
    ]


def _visual_copy(g: Geom) -> Geom:
    """The collider g drawn as a visual: pelvis_collision -> pelvis_visual, left_thigh -> left_thigh_visual."""
    stem = g.name.removesuffix("_collision")
    return Geom(f"{stem}_visual", g.body, g.kind, g.size, g.pos, g.quat)


VISUALS: tuple[Geom, ...] = tuple(
    [_visual_copy(g) for g in COLLIDERS if g.name not in foot_sphere_names()]
    + [
        capsule("waist_visual", "waist_yaw_link", (0.0, 0.0, 0.0), (0.0, 0.0, 0.044), 0.042),
        sphere("waist_roll_visual", "waist_roll_link", (0.0, 0.0, 0.0), 0.02),
    ]
    + _side_visuals("left", 1.0)
    + _side_visuals("right", -1.0)
)


# --- sites --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Site:
    name: str
    body: str
    pos: Vec3  # [m] in the body frame


# IMU mounting points of the real robot (Unitree's description): one in the pelvis, one in the torso.
SITES: tuple[Site, ...] = (
    Site("imu_in_pelvis", "pelvis", (0.04525, 0.0, -0.08339)),
    Site("imu_in_torso", "torso_link", (-0.03959, -0.00224, 0.14792)),
    Site("left_foot", "left_ankle_roll_link", (0.0, 0.0, 0.0)),
    Site("right_foot", "right_ankle_roll_link", (0.0, 0.0, 0.0)),
)


# --- variants -----------------------------------------------------------------------------------------------
def body_names(variant: str = "29dof") -> list[str]:
    """All 30 body names in MuJoCo depth-first order, pelvis first (the 23-DoF variant keeps every body)."""
    joints(variant)  # validates the variant name
    return list(BODY_NAMES)


def body(name: str) -> Body:
    if name not in _BODY_BY_NAME:
        raise KeyError(f"no G1 body {name!r}")
    return _BODY_BY_NAME[name]


def body_joint(b: Body, variant: str = "29dof") -> Joint | None:
    """The hinge of body b in this variant, or None where the body is welded to its parent (or is the root)."""
    active = {j.name for j in joints(variant)}
    return _JOINT_BY_NAME[b.joint] if b.joint in active else None


def total_mass(variant: str = "29dof") -> float:
    """Total mass [kg] (all bodies; the 23-DoF variant welds bodies but keeps them)."""
    joints(variant)
    return float(sum(b.inertial.mass for b in BODIES))


# --- kinematics ---------------------------------------------------------------------------------------------
def quat_to_mat(q) -> np.ndarray:
    """(w, x, y, z), any norm -> [3, 3] rotation matrix (MJCF quaternions need not be unit)."""
    return quat_to_matrix(quat_normalize(np.asarray(q, float)))


def _cross_matrix(u) -> np.ndarray:
    """[3, 3] K with K v = u x v."""
    k = np.asarray(u, float)
    return np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])


def _axis_angle_mat(axis, angle: float) -> np.ndarray:
    """Rodrigues: [3, 3] rotation by `angle` [rad] about the unit `axis`."""
    kx = _cross_matrix(axis)
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def forward_kinematics(
    qpos, variant: str = "29dof", bodies: tuple[str, ...] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """World pose of every body for MuJoCo qpos [..., 7 + n] (pelvis xyz [m], quat wxyz, joints [rad]).

    Returns positions [..., 30, 3] [m] and rotation matrices [..., 30, 3, 3], in `body_names()` order; a whole
    trajectory [T, 7 + n] at once (numpy over T, one pass over the 30 bodies). `bodies` (names): only those,
    [..., len(bodies), ...] in that order, from their chains alone (leg odometry needs the two feet: 13 of the
    30 bodies, the same numbers).
    """
    qpos = np.asarray(qpos, float)
    n = 7 + len(joints(variant))
    if qpos.ndim == 0 or qpos.shape[-1] != n:
        raise ValueError(f"qpos must have shape (..., {n}) for {variant}, got {qpos.shape}")
    q = qpos.reshape(-1, n)
    pos = np.empty((len(q), len(BODIES), 3))
    rot = np.empty((len(q), len(BODIES), 3, 3))
    chain = _chain(variant)
    needed, rows = (range(len(BODIES)), None) if bodies is None else _subset(tuple(bodies))
    for i in needed:
        parent, offset, fixed, qidx, axis_k, axis_k2 = chain[i]
        if parent < 0:
            pos[:, i], rot[:, i] = q[:, :3], quat_to_matrix(quat_normalize(q[:, 3:7]))
            continue
        pos[:, i] = pos[:, parent] + rot[:, parent] @ offset
        rot[:, i] = rot[:, parent] if fixed is None else rot[:, parent] @ fixed
        if qidx >= 0:  # Rodrigues about the joint axis: I + sin(a) K + (1 - cos(a)) K^2
            a = q[:, qidx, None, None]
            rot[:, i] = rot[:, i] @ (_EYE3 + np.sin(a) * axis_k + (1.0 - np.cos(a)) * axis_k2)
    if rows is not None:
        pos, rot = pos[:, rows], rot[:, rows]
    batch = qpos.shape[:-1]
    return pos.reshape(*batch, pos.shape[1], 3), rot.reshape(*batch, pos.shape[1], 3, 3)


@functools.lru_cache(maxsize=None)
def _subset(bodies: tuple[str, ...]) -> tuple[list[int], list[int]]:
    """BODIES indices that forward_kinematics computes for `bodies` (them and every body above them, parents
    first), and the rows it returns (`bodies` in the order given)."""
    unknown = [b for b in bodies if b not in _BODY_BY_NAME]
    if unknown:
        raise ValueError(f"unknown bodies {unknown}; known: {BODY_NAMES}")
    need: set[int] = set()
    for name in bodies:
        while name is not None and BODY_NAMES.index(name) not in need:
            need.add(BODY_NAMES.index(name))
            name = _BODY_BY_NAME[name].parent
    return sorted(need), [BODY_NAMES.index(b) for b in bodies]  # BODIES lists parents before their children


_EYE3 = np.eye(3)


@functools.lru_cache(maxsize=None)
def _chain(variant: str) -> tuple[tuple[int, np.ndarray, np.ndarray | None, int, np.ndarray, np.ndarray], ...]:
    """Per body (BODIES order, parents first): parent index (-1: root), offset [3] m and fixed rotation [3, 3] in
    the parent frame (None: the identity), qpos index of its joint (-1: none or welded in `variant`), the joint
    axis' cross matrix K and K @ K."""
    qidx = {j.name: 7 + k for k, j in enumerate(joints(variant))}
    index = {b.name: i for i, b in enumerate(BODIES)}
    out = []
    for b in BODIES:
        j = None if b.parent is None else body_joint(b, variant)
        k = np.zeros((3, 3)) if j is None else _cross_matrix(j.axis)
        fixed = quat_to_mat(b.quat)
        out.append(
            (
                -1 if b.parent is None else index[b.parent],
                np.asarray(b.pos, float),
                None if np.array_equal(fixed, _EYE3) else fixed,
                -1 if j is None else qidx[j.name],
                k,
                k @ k,
            )
        )
    return tuple(out)


def default_joint_pos(variant: str = "29dof") -> np.ndarray:
    """[n] default (standing) joint angles [rad] from joints.py, motor order."""
    return np.array([j.default for j in joints(variant)], dtype=float)


def standing_height(variant: str = "29dof") -> float:
    """Pelvis height [m] that puts the lowest sole sphere on the floor (z = 0) in the default pose."""
    qpos = np.concatenate([[0.0, 0.0, 0.0], IDENTITY_QUAT, default_joint_pos(variant)])
    pos, rot = forward_kinematics(qpos, variant)
    lowest = math.inf
    for foot in FOOT_BODIES:
        i = BODY_NAMES.index(foot)
        centres = pos[i] + foot_sphere_positions() @ rot[i].T
        lowest = min(lowest, float(centres[:, 2].min()) - FOOT_SPHERE_RADIUS)
    return -lowest


def default_qpos(variant: str = "29dof") -> np.ndarray:
    """MuJoCo qpos [7 + n]: pelvis xyz [m], quat (w, x, y, z), joints [rad] -- default pose, soles on the floor."""
    return np.concatenate([[0.0, 0.0, standing_height(variant)], IDENTITY_QUAT, default_joint_pos(variant)])
