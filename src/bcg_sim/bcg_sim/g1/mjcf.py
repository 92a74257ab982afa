"""MJCF export of the G1 description, for MuJoCo and Newton (`ModelBuilder.add_mjcf`).

Actuators are plain torque motors (ctrl = joint torque [N m], clipped to the motor's effort limit): the PD
loop runs in our code, as it does in the robot's motor drivers. Robot geoms collide only with the floor
(contype 1 / conaffinity 0 on the robot, 1 / 1 on the floor), so there is no self-collision in MuJoCo, nor in
Newton, which compiles the same masks into its collision groups (see `newton_model.py` for how to load it).
MuJoCo has no joint velocity limits: those are in the URDF and in `joints.MOTORS`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from bcg_sim.g1 import description as d
from bcg_sim.g1.joints import MOTORS, joints

TIMESTEP = 0.002  # [s] MuJoCo step; the robot's low-level loop runs at 500 Hz
INTEGRATOR = "implicitfast"  # stable with stiff PD-like contacts at this step, as in Menagerie
FLOOR_HALF_SIZE = 0.0  # 0 = infinite plane in MuJoCo
FLOOR_GRID_SPACING = 0.25  # [m] rendering only
ROBOT_CONTYPE, ROBOT_CONAFFINITY = 1, 0  # robot-robot pairs never match -> no self-collision
FLOOR_CONTYPE, FLOOR_CONAFFINITY = 1, 1
VISUAL_GROUP, COLLISION_GROUP = 2, 3  # MuJoCo viewer groups, as in Menagerie
COLOR_BODY = "0.7 0.7 0.7 1"
COLOR_COLLISION = "0.9 0.4 0.2 0.5"
SITE_SIZE = 0.01  # [m] rendering only


def _f(x) -> str:
    """Compact float formatting for XML attributes (12 significant digits keeps the table exact)."""
    return " ".join(f"{float(v) + 0.0:.12g}" for v in np.atleast_1d(x))  # + 0.0 turns -0 into 0


def _defaults(root: ET.Element) -> None:
    default = ET.SubElement(ET.SubElement(root, "default"), "default", {"class": "g1"})
    ET.SubElement(default, "site", {"size": _f(SITE_SIZE), "rgba": "1 0 0 1", "group": "5"})
    vis = ET.SubElement(default, "default", {"class": "visual"})
    ET.SubElement(
        vis,
        "geom",
        {"group": str(VISUAL_GROUP), "contype": "0", "conaffinity": "0", "density": "0", "material": "body"},
    )
    col = ET.SubElement(default, "default", {"class": "collision"})
    ET.SubElement(
        col,
        "geom",
        {
            "group": str(COLLISION_GROUP),
            "contype": str(ROBOT_CONTYPE),
            "conaffinity": str(ROBOT_CONAFFINITY),
            "density": "0",
            "friction": f"{d.BODY_FRICTION:g} 0.005 0.0001",
            "rgba": COLOR_COLLISION,
        },
    )
    foot = ET.SubElement(col, "default", {"class": "collision_foot"})
    # priority 1: the sole's friction wins over the floor's in a contact pair, as in Menagerie
    ET.SubElement(
        foot,
        "geom",
        {
            "type": "sphere",
            "size": _f(d.FOOT_SPHERE_RADIUS),
            "priority": "1",
            "friction": f"{d.FOOT_FRICTION:g} 0.005 0.0001",
            "condim": "3",
        },
    )


def _assets(root: ET.Element, floor: bool) -> None:
    asset = ET.SubElement(root, "asset")
    ET.SubElement(asset, "material", {"name": "body", "rgba": COLOR_BODY})
    if floor:
        ET.SubElement(
            asset,
            "texture",
            {
                "name": "grid",
                "type": "2d",
                "builtin": "checker",
                "width": "512",
                "height": "512",
                "rgb1": "0.2 0.3 0.4",
                "rgb2": "0.1 0.2 0.3",
            },
        )
        ET.SubElement(
            asset,
            "material",
            {"name": "grid", "texture": "grid", "texrepeat": "1 1", "texuniform": "true", "reflectance": "0.1"},
        )


def _geom(parent: ET.Element, g: d.Geom, cls: str) -> None:
    attrib = {"name": g.name, "class": cls, "type": g.kind, "size": _f(g.size), "pos": _f(g.pos)}
    if g.quat != d.IDENTITY_QUAT:
        attrib["quat"] = _f(g.quat)
    if cls == "collision_foot":
        del attrib["type"], attrib["size"]  # from the class
    ET.SubElement(parent, "geom", attrib)


def _inertial(parent: ET.Element, i: d.Inertial) -> None:
    ET.SubElement(
        parent, "inertial", {"pos": _f(i.com), "quat": _f(i.quat), "mass": _f(i.mass), "diaginertia": _f(i.diag)}
    )


def _joint(parent: ET.Element, b: d.Body, variant: str) -> None:
    j = d.body_joint(b, variant)
    if j is None:
        return  # root (freejoint added by the caller) or welded in this variant
    m = MOTORS[j.motor]
    ET.SubElement(
        parent,
        "joint",
        {
            "name": j.mjcf_name,
            "axis": _f(j.axis),
            "range": _f((j.lower, j.upper)),
            "armature": _f(m.armature),
            "actuatorfrcrange": _f((-m.effort_limit, m.effort_limit)),
        },
    )


def _body_element(parent: ET.Element, b: d.Body, variant: str) -> ET.Element:
    attrib = {"name": b.name, "pos": _f(b.pos)}
    if b.quat != d.IDENTITY_QUAT:
        attrib["quat"] = _f(b.quat)
    if b.parent is None:
        attrib["childclass"] = "g1"
        attrib["pos"] = _f((0.0, 0.0, d.standing_height(variant)))
    el = ET.SubElement(parent, "body", attrib)
    _inertial(el, b.inertial)
    if b.parent is None:
        ET.SubElement(el, "freejoint", {"name": "floating_base_joint"})
    _joint(el, b, variant)
    for g in d.VISUALS:
        if g.body == b.name:
            _geom(el, g, "visual")
    for g in d.COLLIDERS:
        if g.body == b.name:
            _geom(el, g, "collision_foot" if g.name in d.foot_sphere_names() else "collision")
    for s in d.SITES:
        if s.body == b.name:
            ET.SubElement(el, "site", {"name": s.name, "pos": _f(s.pos)})
    return el


def _worldbody(root: ET.Element, variant: str, floor: bool) -> None:
    world = ET.SubElement(root, "worldbody")
    if floor:
        ET.SubElement(world, "light", {"name": "sun", "pos": "0 0 4", "dir": "0 0 -1", "directional": "true"})
        ET.SubElement(
            world,
            "geom",
            {
                "name": "floor",
                "type": "plane",
                "size": f"{FLOOR_HALF_SIZE:g} {FLOOR_HALF_SIZE:g} {FLOOR_GRID_SPACING:g}",
                "material": "grid",
                "contype": str(FLOOR_CONTYPE),
                "conaffinity": str(FLOOR_CONAFFINITY),
            },
        )
    elements = {}
    for b in d.BODIES:
        elements[b.name] = _body_element(world if b.parent is None else elements[b.parent], b, variant)


def _actuators(root: ET.Element, variant: str) -> None:
    act = ET.SubElement(root, "actuator")
    for j in joints(variant):
        e = MOTORS[j.motor].effort_limit
        ET.SubElement(act, "motor", {"name": j.mjcf_name, "joint": j.mjcf_name, "ctrlrange": _f((-e, e))})


def _sensors(root: ET.Element) -> None:
    """Noise-free IMU readings at both IMU sites (the robot reports torso-frame gyro/accel from the pelvis IMU)."""
    sens = ET.SubElement(root, "sensor")
    for site in ("imu_in_pelvis", "imu_in_torso"):
        where = site.removeprefix("imu_in_")
        ET.SubElement(sens, "gyro", {"name": f"imu_{where}_gyro", "site": site})
        ET.SubElement(sens, "accelerometer", {"name": f"imu_{where}_accel", "site": site})
        ET.SubElement(sens, "framequat", {"name": f"imu_{where}_quat", "objtype": "site", "objname": site})


def _keyframe(root: ET.Element, variant: str) -> None:
    ET.SubElement(ET.SubElement(root, "keyframe"), "key", {"name": "stand", "qpos": _f(d.default_qpos(variant))})


def to_mjcf(variant: str = "29dof", floor: bool = True) -> str:
    """MJCF document (str) of the G1 variant ("29dof" | "23dof"); floor=True adds a ground plane and a light."""
    joints(variant)
    root = ET.Element("mujoco", {"model": f"bcg_g1_{variant}"})
    ET.SubElement(root, "compiler", {"angle": "radian", "autolimits": "true"})
    ET.SubElement(root, "option", {"timestep": _f(TIMESTEP), "integrator": INTEGRATOR})
    _defaults(root)
    _assets(root, floor)
    _worldbody(root, variant, floor)
    _actuators(root, variant)
    _sensors(root)
    _keyframe(root, variant)
    ET.indent(root)
    return (
        "<!-- Generated by bcg_sim.g1 (bcg-model export); do not edit. Physical figures: Unitree G1 "
        "as published in MuJoCo Menagerie (BSD-3-Clause). -->\n" + ET.tostring(root, encoding="unicode") + "\n"
    )


def write_mjcf(path, variant: str = "29dof", floor: bool = True) -> Path:
    """Write `to_mjcf(variant, floor)` to path (parent dirs created); returns the Path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_mjcf(variant, floor))
    return path


def load_mujoco(variant: str = "29dof", floor: bool = True):
    """Compiled `mujoco.MjModel` of the variant."""
    import mujoco  # imported here so the description is usable without MuJoCo

    return mujoco.MjModel.from_xml_string(to_mjcf(variant, floor))
