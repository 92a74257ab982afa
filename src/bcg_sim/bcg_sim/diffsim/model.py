"""The Newton model of N G1 worlds with bcg's contact law and actuation tables.

The G1 comes only from the project's description, `bcg_sim.g1.to_mjcf(variant, floor=False)`: Newton parses
the MJCF (no meshes, no sites, no self-collision); we then

- set each hinge's armature from its motor (`bcg_sim.g1.joints.MOTORS`), at least `actuation.min_armature`
  (Featherstone at dt 0.5 ms goes NaN with less, see docs/sim.md);
- zero Newton's built-in joint drive (kp = kd = 0): PD with effort limits is our own kernel, so gains (the
  motors' policy gains, or `bcg_sim.g1.stand_gains()` with actuation.gains = "stand") and effort limits come
  from the joint table and the torque is clamped the way the real motor is;
- build the contact sphere table (`contact_spheres`, shared with the native backend): the four sole spheres
  of each foot (`g1.foot_sphere_positions()`, `g1.FOOT_SPHERE_RADIUS`) and one sphere per body listed in
  `contact.body_spheres`, at that body's COM, so a falling robot lands on its pelvis, torso, knees or hands.
  Newton's own collision shapes and pipeline are not used: contact is an analytic sphere-vs-plane(z = 0) law,
  evaluated on every substep inside the tape.

Conventions: Newton stores the free joint as (p_w, q_wb in x y z w) and its velocity as (v of the pelvis COM
in world, omega in world); `bcg_sim.diffsim.state` converts to bcg's (w x y z, pelvis-origin velocity).
"""

from __future__ import annotations

from dataclasses import dataclass

import newton
import numpy as np
import warp as wp

from bcg_sim import g1
from bcg_sim.config import ConfigError
from bcg_sim.diffsim import kernels
from bcg_sim.diffsim.config import SimConfig

NUM_JOINTS = len(g1.JOINTS_29)
COORDS_PER_WORLD = kernels.FREE_COORDS + NUM_JOINTS  # 36
DOFS_PER_WORLD = kernels.FREE_DOFS + NUM_JOINTS  # 35


def g1_mjcf(variant: str = "29dof") -> str:
    """The one place the simulator gets its robot from: the project's G1 MJCF, without a floor body
    (the ground is the analytic plane z = 0 of the contact kernel)."""
    return g1.to_mjcf(variant, floor=False)


def newton_builder(variant: str = "29dof", *, armature_min: float = 0.0) -> newton.ModelBuilder:
    """One G1 (no worlds replicated) as a Newton ModelBuilder, with motor armature set.

    Shared by the bcg model and the stock-Newton benchmark, so both simulate exactly the same robot.
    """
    b = newton.ModelBuilder()
    b.add_mjcf(g1_mjcf(variant), parse_meshes=False, parse_sites=False, enable_self_collisions=False)
    names = [lbl.split("/")[-1] for lbl in b.joint_label]
    want = ["floating_base_joint"] + g1.joint_names(variant)
    if names != want:
        raise RuntimeError(f"G1 MJCF joint order {names} differs from the motor order {want}")
    for j, joint in enumerate(g1.joints(variant)):
        dof = kernels.FREE_DOFS + j
        b.joint_armature[dof] = max(g1.MOTORS[joint.motor].armature, armature_min)
    return b


def pd_gains(cfg: SimConfig) -> tuple[list[float], list[float]]:
    """(kp [29] N m/rad, kd [29] N m s/rad) in motor order: the motors' policy gains or the bring-up stand
    gains (actuation.gains), times actuation.kp_scale / kd_scale."""
    if cfg.actuation.gains == "stand":  # bring-up gains that hold the default pose without a policy
        kp, kd = g1.stand_gains(cfg.variant)
    else:  # the motors' policy gains (joint table)
        motors = [g1.MOTORS[j.motor] for j in g1.joints(cfg.variant)]
        kp, kd = [m.kp for m in motors], [m.kd for m in motors]
    return [cfg.actuation.kp_scale * k for k in kp], [cfg.actuation.kd_scale * k for k in kd]


@dataclass(frozen=True)
class ContactSpheres:
    """The contact sphere table both backends simulate, by contact body (CSR): the two feet first (their four
    sole spheres each), then each `contact.body_spheres` entry in config order (one sphere at its body's COM)."""

    body: list[int]  # [C] local body index of each contact body; body[:2] are the (left, right) feet
    start: list[int]  # [C + 1] offsets of each contact body's spheres into pos_b / radius; start[:3]: the feet's
    pos_b: np.ndarray  # [S, 3] float64 sphere centres in their body's frame [m]
    radius: np.ndarray  # [S] float64 [m]

    def sphere_body(self) -> np.ndarray:
        """[S] local body index of each sphere."""
        return np.repeat(self.body, np.diff(self.start))


def contact_spheres(cfg: SimConfig, body_names: list[str], body_com: np.ndarray) -> ContactSpheres:
    """The one sphere table of both backends, checked against `body_names` (the backend's body order, ==
    `g1.body_names()`); `body_com` [bodies, 3] is each body's COM in its frame [m] as that backend parsed it."""
    foot_body = [body_names.index(f) for f in g1.FOOT_BODIES]
    foot_pos = g1.foot_sphere_positions()  # [4, 3] same for both feet, ankle-roll frame
    body, start, pos, rad = [], [0], [], []
    for fb in foot_body:
        body.append(fb)
        pos.extend(foot_pos)
        rad.extend([g1.FOOT_SPHERE_RADIUS] * len(foot_pos))
        start.append(len(pos))
    for name, radius in cfg.contact.body_spheres.items():
        if name not in body_names:
            raise ConfigError(f"sim config: contact.body_spheres: unknown body {name!r}; bodies: {body_names}")
        bi = body_names.index(name)
        if bi in foot_body:
            raise ConfigError(f"sim config: contact.body_spheres: {name!r} is a foot (its sole spheres are used)")
        body.append(bi)
        pos.append(np.asarray(body_com[bi], dtype=float))
        rad.append(radius)
        start.append(len(pos))
    return ContactSpheres(body, start, np.array(pos, dtype=float), np.array(rad, dtype=float))


@dataclass
class G1Model:
    """N replicated G1 worlds plus the tables the kernels read (all on `device`)."""

    model: newton.Model
    num_worlds: int
    device: str
    body_names: list[str]  # [30] local body names, Newton order == bcg_sim.g1.body_names()
    joint_names: list[str]  # [29] motor order
    bodies_per_world: int
    foot_body: tuple[int, int]  # local body index of (left, right) foot
    root_com_b: np.ndarray  # [3] pelvis COM in the pelvis frame [m]
    default_joint_q: np.ndarray  # [36] Newton layout: p, q xyzw, 29 joints
    # PD tables [29]
    kp: wp.array
    kd: wp.array
    effort_limit: wp.array
    # contact sphere table (CSR by contact body)
    contact_body: wp.array  # [C] int
    sphere_start: wp.array  # [C + 1] int
    sphere_pos_b: wp.array  # [S] vec3
    sphere_radius: wp.array  # [S] float
    foot_body_arr: wp.array  # [2] int
    foot_sphere_start: wp.array  # [3] int, offsets of the foot spheres (they come first)


def build_model(cfg: SimConfig, num_worlds: int, *, requires_grad: bool = True) -> G1Model:
    """Replicate the G1 into `num_worlds` separate worlds and attach bcg's contact/PD tables."""
    if num_worlds < 1:
        raise ConfigError(f"num_worlds must be >= 1, got {num_worlds}")
    one = newton_builder(cfg.variant, armature_min=cfg.actuation.min_armature)
    for dof in range(kernels.FREE_DOFS, DOFS_PER_WORLD):
        one.joint_target_ke[dof] = 0.0  # PD is our kernel (effort-limited), not Newton's drive
        one.joint_target_kd[dof] = 0.0
        one.joint_limit_ke[dof] = cfg.actuation.joint_limit_ke  # joint-range stops: the native backend's too
        one.joint_limit_kd[dof] = cfg.actuation.joint_limit_kd
    body_names = [lbl.split("/")[-1] for lbl in one.body_label]
    if body_names != list(g1.body_names(cfg.variant)):
        raise RuntimeError(f"Newton body order {body_names} differs from bcg_sim.g1.body_names()")

    builder = newton.ModelBuilder()
    builder.replicate(one, num_worlds, separate_worlds=True)
    with wp.ScopedDevice(cfg.device):
        model = builder.finalize(device=cfg.device, requires_grad=requires_grad)

    foot_body = tuple(body_names.index(f) for f in g1.FOOT_BODIES)
    spheres = contact_spheres(cfg, body_names, np.array([list(c) for c in one.body_com]))
    counts = np.diff(spheres.start)
    if counts.max() > kernels.MAX_SPHERES_PER_BODY:
        raise ConfigError(f"a contact body has {counts.max()} spheres; kernels handle {kernels.MAX_SPHERES_PER_BODY}")

    motors = [g1.MOTORS[j.motor] for j in g1.joints(cfg.variant)]
    kp_table, kd_table = pd_gains(cfg)
    default_q = np.concatenate(
        [g1.default_qpos(cfg.variant)[:3], [0.0, 0.0, 0.0, 1.0], g1.default_joint_pos(cfg.variant)]
    )
    dev = cfg.device

    def arr(x, dtype):
        return wp.array(x, dtype=dtype, device=dev)

    return G1Model(
        model=model,
        num_worlds=num_worlds,
        device=dev,
        body_names=body_names,
        joint_names=g1.joint_names(cfg.variant),
        bodies_per_world=len(body_names),
        foot_body=foot_body,  # type: ignore[arg-type]
        root_com_b=np.array(one.body_com[0], dtype=float),
        default_joint_q=default_q,
        kp=arr(kp_table, float),
        kd=arr(kd_table, float),
        effort_limit=arr([m.effort_limit for m in motors], float),
        contact_body=arr(spheres.body, int),
        sphere_start=arr(spheres.start, int),
        sphere_pos_b=arr(spheres.pos_b.astype(np.float32), wp.vec3),
        sphere_radius=arr(spheres.radius, float),
        foot_body_arr=arr(list(foot_body), int),
        foot_sphere_start=arr(spheres.start[:3], int),
    )
