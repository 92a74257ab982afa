"""The one place where the motion library touches the G1 model (the project's own, `bcg_sim.g1`).

Everything else in `bcg_sim.motion` calls these helpers, so the model source can change in one line.
"""

from __future__ import annotations

import functools

import mujoco
import numpy as np

from bcg_sim import g1

VARIANT = "29dof"
# The freejoint takes qpos[0:7] (x y z, qw qx qy qz) and qvel[0:6]; the 29 hinges follow in motor order.
ROOT_QPOS = 7
ROOT_QVEL = 6
SKY_TEXTURE_SIZE = 256  # [px] per skybox face; a smooth gradient needs little resolution


@functools.lru_cache(maxsize=None)
def model(floor: bool = True) -> mujoco.MjModel:
    """The project's 29-DoF G1 (with a floor plane for rendering). Cached: treat as read-only."""
    m = g1.load_mujoco(VARIANT, floor=floor)
    _check_joint_order(m)
    return m


def render_model(width: int, height: int, sky: tuple[list[float], list[float]] | None = None) -> mujoco.MjModel:
    """The G1 with floor, an offscreen buffer of at least width x height, and an optional gradient skybox
    (rgb top, rgb bottom). A fresh model per call (rendering tweaks must not touch the cached one)."""
    spec = mujoco.MjSpec.from_string(g1.to_mjcf(VARIANT, floor=True))
    spec.visual.global_.offwidth = max(width, spec.visual.global_.offwidth)
    spec.visual.global_.offheight = max(height, spec.visual.global_.offheight)
    if sky is not None:
        spec.add_texture(
            name="bcg_sky",
            type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
            builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
            rgb1=sky[0],
            rgb2=sky[1],
            width=SKY_TEXTURE_SIZE,
            height=6 * SKY_TEXTURE_SIZE,
        )  # a skybox is 6 square faces
    for light in spec.lights:  # keep lights (and their shadow maps) over the robot as it travels
        light.mode = mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM
    m = spec.compile()
    _check_joint_order(m)
    return m


def _check_joint_order(m: mujoco.MjModel) -> None:
    """The library assumes qpos[7:] is JOINTS_29 in motor order; fail loudly if the model disagrees."""
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)]
    expected = g1.joint_names(VARIANT)
    hinges = names[1:]
    if m.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE or hinges != expected or m.nq != ROOT_QPOS + len(expected):
        raise RuntimeError(f"G1 model joints {hinges} do not match JOINTS_29 order {expected}")


def body_names() -> list[str]:
    """Bodies of the G1 (world excluded) in MuJoCo depth-first order; index 0 is the pelvis."""
    m = model()
    return [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) for b in _robot_body_ids()]


def _robot_body_ids() -> list[int]:
    """Body ids of the robot: every body whose root is the pelvis (skips world and any scenery)."""
    m = model()
    pelvis = int(m.jnt_bodyid[0])
    return [b for b in range(m.nbody) if int(m.body_rootid[b]) == pelvis]


def robot_body_ids() -> np.ndarray:
    return np.asarray(_robot_body_ids(), dtype=int)


def foot_body_ids() -> tuple[int, int]:
    """MuJoCo body ids of the (left, right) foot bodies."""
    m = model()
    left, right = (mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in g1.FOOT_BODIES)
    return left, right


def foot_spheres() -> np.ndarray:
    """[4, 3] centres of the foot contact spheres in the foot (ankle-roll) body frame, m."""
    return np.asarray(g1.foot_sphere_positions(), dtype=float)


def foot_sphere_radius() -> float:
    return float(g1.FOOT_SPHERE_RADIUS)


def default_joint_pos() -> np.ndarray:
    """[29] standing pose, rad."""
    return np.array([j.default for j in g1.JOINTS_29])
