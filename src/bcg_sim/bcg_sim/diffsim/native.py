"""The native CPU backend: G1 articulated-body dynamics with analytic gradients (Pinocchio, C++).

`NativeSimulator` has the `Simulator` interface (`step(target_q, joint_q, joint_qd) -> StepOutput` in Newton's
layout, `new_rollout()`, `default_state()`, `m`), so `G1DiffEnv`, BCG and the tools use either backend
(config `backend`). What differs is inside:

- dynamics: Pinocchio's articulated-body algorithm, O(n) on the G1's tree, and its analytic derivatives
  (`computeABADerivatives`), instead of a dense 35x35 mass matrix + Cholesky and its tape adjoint;
- contact and PD: the same laws as `kernels.py`, with hand-derived adjoints in `csrc/g1_dynamics.cpp`;
  the PD may be "stable" (`solver.stable_pd`: implicit in q and qd, its gains on the mass-matrix diagonal),
  which removes the PD's step-size limit (docs/sim.md, "Native backend");
- memory: a control step keeps only its substep states (S x (36 + 35) doubles per world), no tapes;
- both cores: `solver.threads` worlds-parallel C++ threads.

Body poses and twists (`StepOutput.body_q`, `body_qd`) of the last state come out of the same C++ step, with
their adjoint (body quaternions in the root's hemisphere, so they change continuously).

The shared library is compiled from `csrc/g1_dynamics.cpp` on first use (about 2-3 min; cached by source, flags
and CPU under $BCG_NATIVE_CACHE, default ~/.cache/bcg_native; `python -m bcg_sim.warmup` does it at setup).
"""

from __future__ import annotations

import ctypes
import dataclasses as dc
import hashlib
import os
import platform
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from bcg_sim import g1, quat
from bcg_sim.config import ConfigError
from bcg_sim.diffsim.bridge import StepOutput
from bcg_sim.diffsim.config import SimConfig
from bcg_sim.diffsim.model import COORDS_PER_WORLD, DOFS_PER_WORLD, NUM_JOINTS, contact_spheres, pd_gains
from bcg_sim.diffsim.world_params import MASS_BODIES, WorldParams

_SOURCE = Path(__file__).with_name("csrc") / "g1_dynamics.cpp"
# Pinocchio's own interface definitions (its CMake package exports them): boost::variant must hold all
# of its joint types.
_DEFINES = ["BOOST_MPL_LIMIT_LIST_SIZE=30", "BOOST_MPL_LIMIT_VECTOR_SIZE=30", "BOOST_MPL_CFG_NO_PREPROCESSED_HEADERS",
            "BOOST_FUSION_INVOKE_MAX_ARITY=12", "NDEBUG"]
# Pinocchio's algorithms are compiled into the library (no PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION: the wheel's
# instantiations are built for a generic x86-64) for this machine's vector units: the reverse step ran 1.3-1.4x
# faster (docs/results/bench.md). The library is built where it runs, so the cache key names the CPU.
_FLAGS = ["-O3", "-march=native", "-std=c++17", "-fPIC", "-shared"]
_EIGEN_INCLUDE = Path("/usr/include/eigen3")  # Debian/Ubuntu libeigen3-dev (scripts/setup.sh installs it)
_lib_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


class NativeBuildError(RuntimeError):
    """The native backend could not be compiled or loaded (the message says what is missing)."""


def _pinocchio_prefix() -> Path:
    try:
        import pinocchio
    except ImportError as exc:
        raise NativeBuildError("backend 'native' needs Pinocchio: pip install pin (requirements.txt)") from exc
    for parent in Path(pinocchio.__file__).resolve().parents:
        if (parent / "include" / "pinocchio" / "algorithm" / "aba-derivatives.hpp").exists():
            return parent
    raise NativeBuildError(f"Pinocchio's C++ headers were not found above {pinocchio.__file__}")


def _cache_dir() -> Path:
    return Path(os.environ.get("BCG_NATIVE_CACHE") or Path.home() / ".cache" / "bcg_native")


def library_path() -> Path:
    """Where the compiled library for the current source and Pinocchio lives (built or not)."""
    prefix = _pinocchio_prefix()
    build = " ".join([str(prefix), *_DEFINES, *_FLAGS, _cpu_id()])
    key = hashlib.sha256(_SOURCE.read_bytes() + build.encode()).hexdigest()
    return _cache_dir() / f"g1dyn-{key[:16]}.so"


def _cpu_id() -> str:
    """The CPU model and instruction-set flags (-march=native code runs only on such a CPU)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    first = (line.split(":", 1) for line in text.split("\n\n")[0].splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in first}
    return " ".join(fields.get(k, "") for k in ("model name", "flags", "Features", "CPU part"))


def build_library(verbose: bool = True) -> Path:
    """Compile csrc/g1_dynamics.cpp against the installed Pinocchio (once per source, flags and CPU)."""
    out = library_path()
    if out.exists():
        return out
    prefix = _pinocchio_prefix()
    if not (_EIGEN_INCLUDE / "Eigen" / "Core").exists():
        raise NativeBuildError(f"Eigen headers not found in {_EIGEN_INCLUDE}: apt-get install libeigen3-dev")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = ["g++", *_FLAGS, *[f"-D{d}" for d in _DEFINES],
           f"-I{prefix / 'include'}", f"-I{_EIGEN_INCLUDE}", str(_SOURCE), f"-L{prefix / 'lib'}",
           "-lpinocchio_default", f"-Wl,-rpath,{prefix / 'lib'}", "-pthread", "-o", str(tmp)]
    if verbose:
        print(f"bcg_sim: compiling the native G1 dynamics (once, ~2-3 min) -> {out}", file=sys.stderr, flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise NativeBuildError(f"compiling {_SOURCE.name} failed:\n{res.stderr[-4000:]}")
    tmp.replace(out)  # atomic: a concurrent process sees either nothing or the whole library
    return out


def _load() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            lib = ctypes.CDLL(str(build_library()))
            P, I, D = ctypes.c_void_p, ctypes.c_int, ctypes.c_double
            lib.g1dyn_create.restype = P
            lib.g1dyn_create.argtypes = [I, P, P, P, P, P, P, P, P, I, P, P, P, P, D, D, D, D, D, I, I, I, I, I, D, I,
                                         P, P]
            lib.g1dyn_destroy.argtypes = [P]
            lib.g1dyn_set_joint_limits.argtypes = [P, P, P, D, D]
            lib.g1dyn_set_spring_theta.argtypes = [P, D]
            # ..., threads, then the per-world constants (mu, kf, kp, kd, K, joints [K], inertias; NULL: the model's)
            lib.g1dyn_forward.argtypes = [P, I, P, P, P, P, P, P, P, P, P, P, P, P, I, P, P, P, P, I, P, P]
            lib.g1dyn_backward.argtypes = [P, I, P, P, P, P, P, P, P, P, P, P, P, I, P, P, P, P, I, P, P]
            _lib = lib
        return _lib


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


# --------------------------------------------------------------------------------------------- the robot

@dataclass
class NativeModel:
    """The G1 as the native backend and the torch FK see it, plus what `Simulator.m` offers its users."""

    body_names: list[str]  # [30] Newton order == bcg_sim.g1.body_names()
    joint_names: list[str]  # [29] motor order
    bodies_per_world: int
    foot_body: tuple[int, int]
    root_com_b: np.ndarray  # [3]
    default_joint_q: np.ndarray  # [36] Newton layout
    kp: np.ndarray  # [29] N m/rad
    kd: np.ndarray  # [29] the damping the C++ law takes (kd - dt kp with solver.stable_pd_exact_damping)
    kd_law: np.ndarray  # [29] N m s/rad, the configured damping (what a kd scale multiplies)
    effort_limit: np.ndarray
    joint_lower: np.ndarray  # [29] rad, the joint-range stops (actuation.joint_limit_ke / _kd)
    joint_upper: np.ndarray
    # pinocchio tables (index 0 = universe, 1 = free joint)
    parent: np.ndarray  # [31] int32
    axis: np.ndarray  # [31, 3]
    placement: np.ndarray  # [31, 12] R row-major, t
    inertia: np.ndarray  # [31, 10]
    armature: np.ndarray  # [35]
    body_joint: np.ndarray  # [30] pinocchio joint of each body (Newton order)
    body_com: np.ndarray  # [30, 3] COM in the body frame
    sph_joint: np.ndarray  # [S] int32
    sph_pos: np.ndarray  # [S, 3]
    sph_rad: np.ndarray  # [S]
    foot_start: np.ndarray  # [3] int32
    mass_joint: np.ndarray  # [len(MASS_BODIES)] int32 pinocchio joint of each per-world mass/COM body


def build_native_model(cfg: SimConfig) -> NativeModel:
    """Tables of the project's G1 (its URDF, parsed by Pinocchio) with the contact spheres and PD of model.py."""
    import pinocchio as pin

    pm = pin.buildModelFromXML(g1.to_urdf(cfg.variant), pin.JointModelFreeFlyer())
    names = list(pm.names)[2:]
    if names != g1.joint_names(cfg.variant):
        raise RuntimeError(f"Pinocchio joint order {names} differs from the motor order")
    nj = pm.njoints
    parent = np.array(pm.parents, dtype=np.int32)
    axis = np.zeros((nj, 3))
    placement = np.zeros((nj, 12))
    inertia = np.zeros((nj, 10))
    for i in range(1, nj):
        X = pm.jointPlacements[i]
        placement[i, :9] = X.rotation.reshape(-1)
        placement[i, 9:] = X.translation
        Y = pm.inertias[i]
        Ic = Y.inertia
        inertia[i] = [Y.mass, *Y.lever, Ic[0, 0], Ic[0, 1], Ic[1, 1], Ic[0, 2], Ic[1, 2], Ic[2, 2]]
        if i > 1:
            short = pm.joints[i].shortname()
            if short in ("JointModelRX", "JointModelRY", "JointModelRZ"):
                axis[i, "XYZ".index(short[-1])] = 1.0
            elif short == "JointModelRevoluteUnaligned":
                axis[i] = np.asarray(pm.joints[i].extract().axis)
            else:
                raise RuntimeError(f"unexpected joint type {short} for {pm.names[i]}")
    body_names = list(g1.body_names(cfg.variant))
    frame_joint = {f.name: f.parentJoint for f in pm.frames if f.type == pin.FrameType.BODY}
    body_joint = np.array([frame_joint[b] for b in body_names], dtype=np.int32)
    body_com = np.array([inertia[j, 1:4] for j in body_joint])

    arm = np.zeros(DOFS_PER_WORLD)
    for j, joint in enumerate(g1.joints(cfg.variant)):
        arm[6 + j] = max(g1.MOTORS[joint.motor].armature, cfg.actuation.min_armature)

    foot_body = tuple(body_names.index(f) for f in g1.FOOT_BODIES)
    spheres = contact_spheres(cfg, body_names, body_com)  # the Newton backend's table, per sphere here

    kp, kd = (np.array(g, dtype=np.float64) for g in pd_gains(cfg))
    kd_law = kd.copy()
    if cfg.solver.stable_pd and cfg.solver.stable_pd_exact_damping:
        # The stable PD's torque kp (q* - q - dt qd') - kd' qd' = kp (q* - q) - (kd' + dt kp) qd': with
        # kd' = kd - dt kp the damping is the explicit law's kd again, on the end-of-substep velocity, and the
        # spring acts on the start-of-substep position (stable_dt_bound then bounds the PD's spring modes).
        kd = kd - cfg.sim_dt * kp
        if (kd < 0).any():
            j = int(np.argmin(kd))
            kd0 = kd + cfg.sim_dt * kp
            raise ConfigError(f"sim config: sim_dt: {cfg.sim_dt * 1e3:.3g} ms is above the native backend's bound "
                              f"{float(np.min(kd0 / kp)) * 1e3:.3g} ms (solver.stable_pd_exact_damping: sim_dt x kp "
                              f"exceeds kd at joint {g1.joint_names(cfg.variant)[j]}, kp {kp[j]:g}, kd "
                              f"{kd0[j]:g}); lower sim_dt or the gains' ratio")
    motors = [g1.MOTORS[j.motor] for j in g1.joints(cfg.variant)]
    lower, upper = g1.joint_limits(cfg.variant)
    default_q = np.concatenate([g1.default_qpos(cfg.variant)[:3], [0.0, 0.0, 0.0, 1.0],
                                g1.default_joint_pos(cfg.variant)])
    return NativeModel(
        body_names=body_names, joint_names=g1.joint_names(cfg.variant), bodies_per_world=len(body_names),
        foot_body=foot_body, root_com_b=body_com[0].copy(), default_joint_q=default_q,  # type: ignore[arg-type]
        kp=kp, kd=kd, kd_law=kd_law, effort_limit=np.array([m.effort_limit for m in motors]),
        joint_lower=lower, joint_upper=upper,
        parent=parent, axis=axis, placement=placement, inertia=inertia, armature=arm, body_joint=body_joint,
        body_com=body_com, sph_joint=body_joint[spheres.sphere_body()], sph_pos=spheres.pos_b,
        sph_rad=spheres.radius, foot_start=np.array(spheres.start[:3], dtype=np.int32),
        mass_joint=np.array([body_joint[body_names.index(b)] for b in MASS_BODIES], dtype=np.int32))


def stable_dt_bound(cfg: SimConfig, m: NativeModel) -> float:
    """Largest substep [s] at which the native step is linearly stable on the G1 standing on both feet.

    Semi-implicit Euler on x'' = -A (K x + C x') is stable while dt^2 w^2 + 2 dt g < 4 for every mode, with
    A = Jc M~^-1 Jc^T the inverse effective mass of the 8 sole spheres' contact points (3 directions each; M~
    is the mass matrix with the armature and, with solver.stable_pd, the implicit PD terms dt kd + dt^2 kp),
    K the normal stiffnesses, C the explicit dampings: w^2 = max eig(A K), g = max eig(A C). With
    solver.implicit_contact the contact damping is implicit (C = 0), with solver.implicit_contact_spring the
    normal spring too (K = 0: backward Euler in contact, no contact bound). Without solver.stable_pd the PD's own modes
    (M~^-1 Kp, M~^-1 Kd) bound dt too; with stable_pd_exact_damping its spring (M~^-1 Kp) does, and dt <= kd / kp
    (its damping kd - dt kp stays >= 0).
    The bound depends on dt itself through M~: it is solved by fixed-point iteration.
    """
    import pinocchio as pin

    pm = pin.buildModelFromXML(g1.to_urdf(cfg.variant), pin.JointModelFreeFlyer())
    q = m.default_joint_q.astype(np.float64)
    c, stable, implicit = cfg.contact, cfg.solver.stable_pd, cfg.solver.implicit_contact
    exact_damping = stable and cfg.solver.stable_pd_exact_damping  # m.kd is then kd - dt kp (build_native_model)
    kd_law = m.kd + cfg.sim_dt * m.kp if exact_damping else m.kd  # the configured kd (m.kd is kd - sim_dt kp)
    n_s = int(m.foot_start[2])
    spring = implicit and cfg.solver.implicit_contact_spring  # backward Euler in contact: K = 0 as well
    K = np.diag(np.tile([0.0, 0.0, 0.0 if spring else c.ke], n_s))
    C = np.zeros_like(K) if implicit else np.diag(np.tile([c.kf, c.kf, c.kd], n_s))

    def modes(dt: float) -> tuple[float, float]:
        arm = m.armature.copy()
        if exact_damping:  # the diagonal a simulator at this dt would have: dt (kd - dt kp) + dt^2 kp = dt kd
            arm[6:] += dt * kd_law
        elif stable:
            arm[6:] += dt * m.kd + dt * dt * m.kp
        pm.armature = arm
        d = pm.createData()
        Minv = pin.computeMinverse(pm, d, q)
        Minv = np.triu(Minv) + np.triu(Minv, 1).T
        pin.computeJointJacobians(pm, d, q)
        rows = []
        for k in range(n_s):
            X = d.oMi[int(m.sph_joint[k])]
            r = X.rotation @ m.sph_pos[k] - np.array([0.0, 0.0, m.sph_rad[k]])
            J6 = pin.getJointJacobian(pm, d, int(m.sph_joint[k]), pin.LOCAL_WORLD_ALIGNED)
            rows.append(J6[:3] - pin.skew(r) @ J6[3:])
        A = np.vstack(rows) @ Minv @ np.vstack(rows).T
        w2 = float(np.max(np.real(np.linalg.eigvals(A @ K)))) if K.any() else 0.0
        g = float(np.max(np.real(np.linalg.eigvals(A @ C)))) if C.any() else 0.0
        if not stable or exact_damping:  # the PD's explicit spring (and, without stable PD, damping) modes
            Mj = np.linalg.inv(Minv)[6:, 6:]
            w2 = max(w2, float(np.max(np.real(np.linalg.eigvals(np.linalg.solve(Mj, np.diag(m.kp)))))))
            if not stable:
                g = max(g, float(np.max(np.real(np.linalg.eigvals(np.linalg.solve(Mj, np.diag(m.kd)))))))
        return w2, g

    dt = cfg.sim_dt
    for _ in range(8):  # M~ grows with dt (stable PD): iterate bound(dt) to its fixed point
        w2, g = modes(dt)
        if w2 > 0:
            dt_new = (-g + np.sqrt(g * g + 4.0 * w2)) / w2  # positive root of w2 dt^2 + 2 g dt - 4 = 0
        else:  # every spring implicit: only explicit damping (if any) bounds dt
            dt_new = 2.0 / g if g > 0 else float("inf")
        sprung = m.kp > 0  # joints without a PD spring (kp 0) put no limit here
        if exact_damping and sprung.any():  # its damping kd - dt kp must stay >= 0 (build_native_model refuses it)
            dt_new = min(dt_new, float(np.min(kd_law[sprung] / m.kp[sprung])))
        if not np.isfinite(dt_new):
            break
        if abs(dt_new - dt) < 1e-6:
            break
        dt = dt_new
    return float(dt_new)


_BOUNDS: dict[str, float] = {}


def check_gain_range(cfg: SimConfig, kp_scale_max: float, kd_scale_min: float, where: str) -> None:
    """ConfigError (naming `where`) unless worlds whose PD gains are scaled up to kp_scale_max (stiffest) and down
    to kd_scale_min (least damped) still meet the native step's bounds at sim_dt: the computed stability bound
    (the PD's spring modes grow with kp) and, with exact PD damping, kd >= dt kp. The per-world pelvis / torso
    masses are not in it (the bound is set by the soles and the PD's spring modes, not by the two heaviest links)."""
    a = cfg.actuation
    hard = dc.replace(cfg, actuation=dc.replace(a, kp_scale=a.kp_scale * kp_scale_max,
                                                kd_scale=a.kd_scale * kd_scale_min))
    try:
        m = build_native_model(hard)
    except ConfigError as exc:
        raise ConfigError(f"{where}: kp x {kp_scale_max:g} with kd x {kd_scale_min:g} breaks the native step: {exc}") \
            from None
    bound = cfg.solver.native_stability_safety * _cached_bound(hard, m)
    if cfg.sim_dt > bound * (1 + 1e-9):
        raise ConfigError(f"{where}: kp x {kp_scale_max:g} with kd x {kd_scale_min:g} puts sim_dt "
                          f"{cfg.sim_dt * 1e3:.3g} ms above the native backend's bound {bound * 1e3:.3g} ms "
                          f"(solver.native_stability_safety x the computed bound); narrow the gain range")


def _cached_bound(cfg: SimConfig, m: NativeModel) -> float:
    """stable_dt_bound, once per physical setting (a BCG pool builds many simulators of one config)."""
    key = repr((cfg.variant, cfg.sim_dt, cfg.solver, cfg.contact, cfg.actuation))
    if key not in _BOUNDS:
        _BOUNDS[key] = stable_dt_bound(cfg, m)
    return _BOUNDS[key]


# ------------------------------------------------------- rotations by Newton's x y z w quaternions (bcg_sim.quat)

def _quat_rotate_xyzw(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return quat.rotate(quat.xyzw_to_wxyz(q), v)


def _quat_rotate_inv_xyzw(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return quat.rotate(quat.conjugate(quat.xyzw_to_wxyz(q)), v)


def newton_to_pin_velocity(joint_q, joint_qd, root_com_b):
    """Newton free-joint velocity (v_com_w, omega_w) -> Pinocchio's (v_origin_b, omega_b); joints unchanged."""
    quat = joint_q[:, 3:7]
    w_b = _quat_rotate_inv_xyzw(quat, joint_qd[:, 3:6])
    v_b = _quat_rotate_inv_xyzw(quat, joint_qd[:, 0:3]) - torch.cross(w_b, root_com_b.expand_as(w_b), dim=-1)
    return torch.cat([v_b, w_b, joint_qd[:, 6:]], dim=-1)


def pin_to_newton_velocity(joint_q, v, root_com_b):
    quat = joint_q[:, 3:7]
    w_b = v[:, 3:6]
    v_com = _quat_rotate_xyzw(quat, v[:, 0:3] + torch.cross(w_b, root_com_b.expand_as(w_b), dim=-1))
    return torch.cat([v_com, _quat_rotate_xyzw(quat, w_b), v[:, 6:]], dim=-1)


# ------------------------------------------------------------------------------- tangent <-> coordinates

def _tangent_grad_to_coords(joint_q: torch.Tensor, g_tan: torch.Tensor) -> torch.Tensor:
    """g_tan [N, 35] (Pinocchio tangent at the normalized q) -> gradient w.r.t. the 36 coordinates of the
    *unnormalized* input q: delta_p_b = R^T dp, delta_theta = 2 vec(q^* (x) dq) / |q| (the 3x4 map G)."""
    quat = joint_q[:, 3:7]
    norm = quat.norm(dim=-1, keepdim=True)
    qn = quat / norm
    u, w = qn[:, :3], qn[:, 3:]
    g_p = _quat_rotate_xyzw(qn, g_tan[:, 0:3])  # (R^T)^T g
    gt = g_tan[:, 3:6]
    # G = 2 [w I - [u]x | -u]; G^T gt = 2 (w gt + u x gt, -u . gt)
    g_vec = 2.0 * (w * gt + torch.cross(u, gt, dim=-1)) / norm
    g_w = -2.0 * (u * gt).sum(-1, keepdim=True) / norm
    return torch.cat([g_p, g_vec, g_w, g_tan[:, 6:]], dim=-1)


def _coords_grad_to_tangent(joint_q: torch.Tensor, g_coords: torch.Tensor) -> torch.Tensor:
    """g_coords [N, 36] w.r.t. the output coordinates -> tangent [N, 35] at that (unit) q:
    dp = R delta_p_b, dq = 1/2 q (x) (0, delta_theta) (the 4x3 map E)."""
    qn = joint_q[:, 3:7]
    u, w = qn[:, :3], qn[:, 3:]
    g_p = _quat_rotate_inv_xyzw(qn, g_coords[:, 0:3])
    gv, gw = g_coords[:, 3:6], g_coords[:, 6:7]
    # E = 1/2 [[w I + [u]x]; -u^T]; E^T g = 1/2 (w gv - u x gv - u gw)
    g_theta = 0.5 * (w * gv - torch.cross(u, gv, dim=-1) - u * gw)
    return torch.cat([g_p, g_theta, g_coords[:, 7:]], dim=-1)


# ------------------------------------------------------------------------------------------ simulator

class NativeSimulator:
    """N G1 worlds on the native backend, the `bridge.Simulator` interface (see the module docstring)."""

    def __init__(self, cfg: SimConfig, num_worlds: int, any_batch: bool = False):
        """`any_batch`: step() takes any number of worlds >= 1 per call (BCG's branch pool steps all active
        bundles in one call); else exactly num_worlds."""
        cfg.validate()
        if not cfg.device.startswith("cpu"):
            raise ConfigError(f"sim config: backend 'native' runs on the CPU only, device is {cfg.device!r} "
                              "(use backend: newton on CUDA)")
        if num_worlds < 1:
            raise ConfigError(f"num_worlds must be >= 1, got {num_worlds}")
        self.cfg = cfg
        self.num_worlds = num_worlds
        self.any_batch = any_batch
        self.substeps = cfg.substeps
        self.device = "cpu"
        self.m = build_native_model(cfg)
        self.stable_dt = _cached_bound(cfg, self.m)
        limit = cfg.solver.native_stability_safety * self.stable_dt
        if cfg.sim_dt > limit * (1 + 1e-9):
            raise ConfigError(
                f"sim config: sim_dt: {cfg.sim_dt * 1e3:.3g} ms is above the native backend's bound "
                f"{limit * 1e3:.3g} ms (solver.native_stability_safety {cfg.solver.native_stability_safety:g} x the "
                f"computed contact/PD stability bound {self.stable_dt * 1e3:.3g} ms at kappa={cfg.contact.kappa:g} kN/m, "
                f"damping_ratio {cfg.contact.damping_ratio:g}, stable_pd {cfg.solver.stable_pd}, implicit_contact "
                f"{cfg.solver.implicit_contact}, implicit_contact_spring {cfg.solver.implicit_contact_spring}, "
                f"gains {cfg.actuation.gains})")
        self.threads = cfg.solver.threads
        self._lib = _load()
        m, c = self.m, cfg.contact
        self._tables = [np.ascontiguousarray(a) for a in (m.parent, m.axis, m.placement, m.inertia, m.armature,
                                                           m.kp, m.kd, m.effort_limit, m.sph_joint, m.sph_pos,
                                                           m.sph_rad, m.foot_start, m.body_joint, m.body_com)]
        t = self._tables
        self._h = self._lib.g1dyn_create(
            len(m.parent), _ptr(t[0]), _ptr(t[1]), _ptr(t[2]), _ptr(t[3]), _ptr(t[4]), _ptr(t[5]), _ptr(t[6]),
            _ptr(t[7]), len(m.sph_joint), _ptr(t[8]), _ptr(t[9]), _ptr(t[10]), _ptr(t[11]),
            float(c.ke), float(c.kd), float(c.kf), float(c.friction_mu), float(cfg.sim_dt), int(self.substeps),
            int(cfg.solver.stable_pd), int(cfg.solver.implicit_contact), int(cfg.solver.implicit_contact_spring),
            int(cfg.solver.implicit_spring_normal_only), -9.81, len(m.body_joint), _ptr(t[12]),
            _ptr(t[13]))
        self._lib.g1dyn_set_spring_theta(self._h, float(cfg.solver.implicit_spring_theta))
        a = cfg.actuation
        if a.joint_limit_ke > 0 or a.joint_limit_kd > 0:
            lo, hi = np.ascontiguousarray(m.joint_lower), np.ascontiguousarray(m.joint_upper)  # copied by C++
            self._lib.g1dyn_set_joint_limits(self._h, _ptr(lo), _ptr(hi), float(a.joint_limit_ke),
                                             float(a.joint_limit_kd))
        self._root_com = torch.as_tensor(m.root_com_b, dtype=torch.float32)
        self._mass_joint = np.ascontiguousarray(m.mass_joint, dtype=np.int32)
        self._generation = 0

    def world_arrays(self, params: WorldParams | None) -> tuple | None:
        """The C step's per-world constants of `params` (rows = the call's worlds): (mu [n], friction slope kf [n]
        [N s/m], kp [n, 29], kd [n, 29] as the C law takes it, inertia rows [n, K, 10] of m.mass_joint), float64;
        None for None or nominal params
        (the model's own constants, no per-world work). A world given the nominal values gets the model's numbers
        bit for bit (same float64 operations as build_native_model)."""
        if params is None or params.is_nominal():
            return None
        m = self.m
        f64 = lambda t: np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float64)  # noqa: E731
        for name in ("friction_scale", "friction_slope_scale", "kp_scale", "kd_scale", "mass_scale"):
            if not (getattr(params, name) > 0).all():  # a zero mass or gain is another robot, not a variation
                raise ConfigError(f"world params: {name} must be > 0 in every world")
        mu = np.ascontiguousarray(self.cfg.contact.friction_mu * f64(params.friction_scale))
        kf = np.ascontiguousarray(self.cfg.contact.kf * f64(params.friction_slope_scale))
        kp = np.ascontiguousarray(m.kp * f64(params.kp_scale))
        kd = m.kd_law * f64(params.kd_scale)
        if self.cfg.solver.stable_pd and self.cfg.solver.stable_pd_exact_damping:
            kd = kd - self.cfg.sim_dt * kp  # as build_native_model: the law's damping on the end-of-substep velocity
            if (kd < 0).any():
                w, j = np.argwhere(kd < 0)[0]
                raise ConfigError(f"world params: world {w}, joint {m.joint_names[j]}: kp {kp[w, j]:g} x sim_dt "
                                  f"exceeds kd {kd[w, j] + self.cfg.sim_dt * kp[w, j]:g} (the native step's bound "
                                  "kd >= dt kp): narrow the kp / kd scale ranges")
        base = m.inertia[m.mass_joint]  # [K, 10] (mass, com 3, rotational inertia 6 about the com)
        scale = f64(params.mass_scale)  # [n, K]
        inert = np.empty((params.num_worlds, len(m.mass_joint), 10))
        inert[..., 0] = base[None, :, 0] * scale
        inert[..., 1:4] = base[None, :, 1:4] + f64(params.com_offset_b)
        inert[..., 4:] = base[None, :, 4:] * scale[..., None]  # uniform density: inertia scales with the mass
        return mu, kf, kp, np.ascontiguousarray(kd), inert

    def __del__(self):
        h = getattr(self, "_h", None)
        if h:
            self._lib.g1dyn_destroy(h)
            self._h = None

    @property
    def torch_device(self) -> torch.device:
        return torch.device("cpu")

    def new_rollout(self) -> None:
        """Mark earlier steps as belonging to a finished rollout (their backward still works: each step keeps
        its own substep states, so nothing is recycled)."""
        self._generation += 1

    def default_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        q = torch.as_tensor(self.m.default_joint_q, dtype=torch.float32).expand(self.num_worlds, -1).clone()
        return q, torch.zeros(self.num_worlds, DOFS_PER_WORLD)

    def step(self, target_q: torch.Tensor, joint_q: torch.Tensor, joint_qd: torch.Tensor,
             substeps: torch.Tensor | None = None, params: WorldParams | None = None) -> StepOutput:
        """One control period for all worlds; Newton layout in and out (see bridge.Simulator.step).

        substeps [n] ints in 0..cfg.substeps (None: all): world i runs only substeps[i] substeps and its outputs
        are of that state (BCG's partial steps: the main world up to a foot's contact onset, its branches from
        there to the end of the control step). `StepOutput.foot_onset` says where contact began.
        params: per-world constants of the dynamics, one row per world of this call (None: the config's model)."""
        n = target_q.shape[0] if self.any_batch else self.num_worlds
        for name, t, shape in (("target_q", target_q, (n, NUM_JOINTS)), ("joint_q", joint_q, (n, COORDS_PER_WORLD)),
                               ("joint_qd", joint_qd, (n, DOFS_PER_WORLD))):
            if tuple(t.shape) != shape:
                raise ValueError(f"Simulator.step: {name} has shape {tuple(t.shape)}, expected {shape}")
        nsub = None
        if substeps is not None:
            nsub = np.ascontiguousarray(np.asarray(substeps, dtype=np.int32).reshape(-1))
            if nsub.shape != (n,) or nsub.min(initial=0) < 0 or nsub.max(initial=0) > self.substeps:
                raise ValueError(f"Simulator.step: substeps must be [{n}] ints in 0..{self.substeps}, got {substeps}")
        if params is not None and params.num_worlds != n:
            raise ValueError(f"Simulator.step: params has {params.num_worlds} worlds, expected {n}")
        wargs = self.world_arrays(params)
        v = newton_to_pin_velocity(joint_q, joint_qd, self._root_com)
        diag = {}
        q1, v1, body_q, body_qd = _NativeStep.apply(self, diag, (nsub, wargs), target_q, joint_q, v)
        return StepOutput(joint_q=q1, joint_qd=pin_to_newton_velocity(q1, v1, self._root_com),
                                body_q=body_q, body_qd=body_qd, **diag)

    # used by _NativeStep
    def _forward(self, target: np.ndarray, q: np.ndarray, v: np.ndarray, nsub: np.ndarray | None = None,
                 wargs: tuple | None = None):
        n, S = q.shape[0], self.substeps
        traj_q = np.empty((n, S + 1, COORDS_PER_WORLD))
        traj_v = np.empty((n, S + 1, DOFS_PER_WORLD))
        fn, peak, pen = (np.empty((n, 2)) for _ in range(3))
        onset = np.empty((n, 2), dtype=np.int32)
        nb = self.m.bodies_per_world
        body_q, body_qd = np.empty((n, nb, 7)), np.empty((n, nb, 6))
        self._lib.g1dyn_forward(self._h, n, _ptr(q), _ptr(v), _ptr(target), _ptr(traj_q), _ptr(traj_v),
                                _ptr(fn), _ptr(peak), _ptr(pen), _ptr(body_q), _ptr(body_qd), _iptr(nsub),
                                _ptr(onset), self.threads, *self._wargs_ptrs(wargs))
        return traj_q, traj_v, fn, peak, pen, onset, body_q, body_qd

    def _wargs_ptrs(self, wargs: tuple | None) -> tuple:
        """world_arrays' output as the C step's trailing arguments (NULLs: the model's constants)."""
        if wargs is None:
            return (None, None, None, None, 0, None, None)
        mu, kf, kp, kd, inert = wargs
        return (_ptr(mu), _ptr(kf), _ptr(kp), _ptr(kd), len(self._mass_joint), _iptr(self._mass_joint), _ptr(inert))

    def _backward(self, traj_q, traj_v, target, gq_tan, gv, g_body_q=None, g_body_qd=None, nsub=None, wargs=None):
        """Reverse mode of one control step: gradients at its last state (tangent) and of its body outputs
        (None: zero) -> (tangent gradient at the first state, velocity gradient, target gradient). wargs: the
        forward's world_arrays (rows = these worlds)."""
        n = target.shape[0]
        gq_in = np.empty((n, DOFS_PER_WORLD))
        gv_in = np.empty((n, DOFS_PER_WORLD))
        g_t = np.empty((n, NUM_JOINTS))
        if (g_body_q is None) != (g_body_qd is None):  # the C side takes both or neither
            nb = self.m.bodies_per_world
            g_body_q = np.zeros((n, nb, 7)) if g_body_q is None else g_body_q
            g_body_qd = np.zeros((n, nb, 6)) if g_body_qd is None else g_body_qd
        gbq = ctypes.c_void_p(None) if g_body_q is None else _ptr(g_body_q)
        gbqd = ctypes.c_void_p(None) if g_body_qd is None else _ptr(g_body_qd)
        self._lib.g1dyn_backward(self._h, n, _ptr(traj_q), _ptr(traj_v), _ptr(target), _ptr(gq_tan), _ptr(gv),
                                 gbq, gbqd, _ptr(gq_in), _ptr(gv_in), _ptr(g_t), _iptr(nsub), self.threads,
                                 *self._wargs_ptrs(wargs))
        return gq_in, gv_in, g_t


def _iptr(a: np.ndarray | None) -> ctypes.c_void_p:
    """Pointer to an int32 array, or NULL."""
    return ctypes.c_void_p(None) if a is None else _ptr(a)


def _np64(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float64)


class _NativeStep(torch.autograd.Function):
    """(target [N, 29], q [N, 36], v [N, 35] Pinocchio layout) -> (q', v', body_q' [N, 30, 7], body_qd' [N, 30, 6])
    after one control step (or nsub [N] substeps per world; None: all), under per-world constants (world_arrays;
    None: the model's). No gradient w.r.t. those constants."""

    @staticmethod
    def forward(ctx, sim: NativeSimulator, diag: dict, nsub_wargs, target, q, v):
        nsub, wargs = nsub_wargs  # substeps per world (None: all), per-world constants (None: the model's)
        t64 = _np64(target)
        traj_q, traj_v, fn, peak, pen, onset, body_q, body_qd = sim._forward(t64, _np64(q), _np64(v), nsub, wargs)
        diag.update(foot_force=torch.as_tensor(fn, dtype=torch.float32),
                    foot_force_peak=torch.as_tensor(peak, dtype=torch.float32),
                    foot_penetration=torch.as_tensor(pen, dtype=torch.float32),
                    foot_onset=torch.as_tensor(onset, dtype=torch.long))
        ends = np.arange(q.shape[0]), (np.full(q.shape[0], sim.substeps) if nsub is None else nsub)
        ctx.sim, ctx.traj, ctx.target, ctx.nsub, ctx.wargs = sim, (traj_q, traj_v), t64, nsub, wargs
        ctx.q_in = q.detach()
        q1 = torch.as_tensor(traj_q[ends], dtype=torch.float32)
        # detached: an output tensor kept on ctx as-is forms an output -> grad_fn -> ctx -> output cycle that
        # Python's gc cannot see, so every step's graph (trajectories included) leaked (~8 MB per SHAC iteration)
        ctx.q_out = q1.detach()
        return (q1, torch.as_tensor(traj_v[ends], dtype=torch.float32),
                torch.as_tensor(body_q, dtype=torch.float32), torch.as_tensor(body_qd, dtype=torch.float32))

    @staticmethod
    @once_differentiable
    def backward(ctx, g_q, g_v, g_bq, g_bqd):
        n = ctx.q_out.shape[0]
        g_q = torch.zeros(n, COORDS_PER_WORLD) if g_q is None else g_q
        g_v = torch.zeros(n, DOFS_PER_WORLD) if g_v is None else g_v
        # Worlds that receive no gradient give none (the adjoint is linear): a world whose step was replaced
        # by its BCG bundle mean, for one. Their reverse pass is skipped (the other worlds' is unchanged).
        live = (g_q != 0).any(-1) | (g_v != 0).any(-1)
        for g in (g_bq, g_bqd):
            if g is not None:
                live |= (g != 0).flatten(1).any(-1)
        rows = live.nonzero().flatten()
        g_t = torch.zeros(n, NUM_JOINTS)
        g_q_in = torch.zeros(n, COORDS_PER_WORLD)
        g_v_in = torch.zeros(n, DOFS_PER_WORLD)
        if rows.numel():
            full = rows.numel() == n
            sel = (lambda a: a) if full else (lambda a: a[rows.numpy()])
            pick = (lambda t: t) if full else (lambda t: t[rows])
            g_tan = _coords_grad_to_tangent(pick(ctx.q_out).double(), pick(g_q).double())
            gq_in, gv_in, gt = ctx.sim._backward(*(sel(a) for a in ctx.traj), sel(ctx.target), _np64(g_tan),
                                                 _np64(pick(g_v)), None if g_bq is None else _np64(pick(g_bq)),
                                                 None if g_bqd is None else _np64(pick(g_bqd)),
                                                 None if ctx.nsub is None else np.ascontiguousarray(sel(ctx.nsub)),
                                                 None if ctx.wargs is None else
                                                 tuple(np.ascontiguousarray(sel(a)) for a in ctx.wargs))
            g_t[rows] = torch.as_tensor(gt, dtype=torch.float32)
            g_q_in[rows] = _tangent_grad_to_coords(pick(ctx.q_in).double(), torch.as_tensor(gq_in)).float()
            g_v_in[rows] = torch.as_tensor(gv_in, dtype=torch.float32)
        return None, None, None, g_t, g_q_in, g_v_in
