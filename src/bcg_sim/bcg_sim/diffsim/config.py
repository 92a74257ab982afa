"""Typed configuration of the differentiable simulator and of Bundled Contact Gradients (config/sim.yaml).

`load_sim_config()` reads the YAML through `bcg_sim.config.load_config`, then `SimConfig.validate()` checks
every physical bound and raises `ConfigError` naming the key, so a bad value fails at construction and not
as a NaN twenty seconds into a rollout. The YAML documents each value; the dataclass defaults are the same
values (tests/test_diffsim.py holds them equal), so a sim YAML that leaves a key out means config/sim.yaml's.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from bcg_sim.config import checker, from_dict, load_config

Backend = Literal["native", "newton"]
Gains = Literal["policy", "stand"]
Perturbation = Literal["base", "leg"]
BundleStart = Literal["step", "contact"]


@dataclass
class SolverConfig:
    use_tile_gemm: bool = True
    angular_damping: float = 0.05
    max_stable_dt: float = 0.0005  # [s], newton backend: measured for the G1 with Featherstone (docs/sim.md)
    stability_safety: float = 0.2  # newton backend: dt <= safety * 2 / omega_contact as well
    native_stability_safety: float = 0.9  # native backend: dt <= this x its computed bound (native.stable_dt_bound)
    stable_pd: bool = True  # native backend: implicit PD (gains on the mass-matrix diagonal)
    # native backend, with stable_pd: keep the PD's damping at kd (the explicit law's): the stable PD's implicit
    # position error adds dt*kp of damping, so kd - dt*kp is passed as its damping (docs/sim.md)
    stable_pd_exact_damping: bool = True
    implicit_contact: bool = True  # native backend: contact damping implicit (a point mass dt*c per sphere)
    # native backend, with implicit_contact: the normal spring implicit too (backward Euler in contact: ke acts on
    # the end-of-substep penetration, a damping kd + dt*ke on the end-of-substep normal velocity; docs/sim.md)
    implicit_contact_spring: bool = False
    # ...its implicit part beyond the friction's along the contact normal only (a small solve per substep, exact
    # tangential law) or, false, as an isotropic point mass (cheaper; extra tangential inertia; docs/sim.md)
    implicit_spring_normal_only: bool = True
    # ...the spring on the penetration this far to the end of the substep, pen - theta dt vz': 1 backward Euler
    # (numerical damping dt*ke), 0.5 the trapezoidal rule (half of it); below 0.5 the spring is not stable
    implicit_spring_theta: float = 1.0
    threads: int = 1  # native backend: C++ threads over worlds


@dataclass
class ContactConfig:
    """Penalty sphere-vs-ground contact; the single stiffness knob is `kappa` [kN/m] (see docs/sim.md)."""

    kappa: float = 100.0  # [kN/m] per contact sphere; ke = 1000 * kappa [N/m]
    damping_ratio: float = 0.5  # zeta
    effective_mass: float = 1.0  # m_eff per sphere [kg]
    friction_mu: float = 0.8
    friction_slope_ratio: float = 1.0  # kf = ratio * kd
    body_spheres: dict[str, float] = field(
        default_factory=lambda: {  # body -> radius [m], at its COM
            "pelvis": 0.10,
            "torso_link": 0.12,
            "left_knee_link": 0.06,
            "right_knee_link": 0.06,
            "left_elbow_link": 0.05,
            "right_elbow_link": 0.05,
            "left_wrist_yaw_link": 0.05,
            "right_wrist_yaw_link": 0.05,
        }
    )

    @property
    def ke(self) -> float:
        """Normal stiffness [N/m]."""
        return 1000.0 * self.kappa

    @property
    def kd(self) -> float:
        """Normal damping [N s/m]: a damping ratio on the sphere's effective mass."""
        return 2.0 * self.damping_ratio * math.sqrt(self.ke * self.effective_mass)

    @property
    def kf(self) -> float:
        """Tangential (regularised friction) slope [N s/m]."""
        return self.friction_slope_ratio * self.kd

    @property
    def omega(self) -> float:
        """Undamped natural frequency of one sphere on its effective mass [rad/s]."""
        return math.sqrt(self.ke / self.effective_mass)


@dataclass
class ActuationConfig:
    action_scale: float = 0.25  # [rad] per unit action
    min_armature: float = 0.01  # [kg m^2]
    gains: Gains = "policy"  # "policy": MOTORS kp/kd (BeyondMimic); "stand": bcg_sim.g1.stand_gains()
    kp_scale: float = 1.0  # multiplies the chosen kp
    kd_scale: float = 1.0  # multiplies the chosen kd
    joint_limit_ke: float = 10000.0  # [N m/rad] joint-range stop stiffness past a hinge's range (both backends)
    joint_limit_kd: float = 10.0  # [N m s/rad] its damping, while past the range


@dataclass
class TerminationConfig:
    min_root_height: float = 0.3  # [m]
    max_tracking_error: float = 0.5  # [m]


@dataclass
class BCGConfig:
    enabled: bool = True
    branches: int = 6  # B
    horizon: int = 1  # H, control steps
    sigma: float = 0.005  # [m]
    sigma_v: float = 0.05  # [m/s]
    trigger_force: float = 50.0  # [N]
    rearm_force: float = 0.0  # [N] a foot re-arms after a control step whose peak force stayed <= this
    pool_size: int = 192  # branch worlds, a multiple of B
    antithetic: bool = True
    seed: int = 0
    # How the foot perturbation enters the generalized coordinates: "base" shifts the floating base (the whole
    # robot moves, exactly dp / dv at every point); "leg" moves only the contacting leg's 6 joints by
    # dq = J+ dp, dqd = J+ dv (J: sole-centre translational Jacobian, damped least squares).
    perturbation: Perturbation = "leg"
    leg_damping: float = 0.03  # [m] DLS damping lambda of J+ = J^T (J J^T + lambda^2 I)^-1; |J+| <= 1/(2 lambda)
    # Where a touchdown's branches start: "step" at the start of the touchdown's control step; "contact" at the
    # last substep state before the foot's contact onset in it (native backend only). Both end at the same
    # control-step boundary, so the bundle spans the same contact; "contact" skips simulating the flight before.
    start: BundleStart = "contact"


@dataclass
class SimConfig:
    device: str = "cpu"
    backend: Backend = "native"  # "newton" (Warp Featherstone, CPU and CUDA) or "native" (Pinocchio ABA, CPU)
    variant: str = "29dof"
    control_hz: float = 50.0
    sim_dt: float = 0.002  # [s]
    max_tape_steps: int = 64
    solver: SolverConfig = field(default_factory=SolverConfig)
    contact: ContactConfig = field(default_factory=ContactConfig)
    actuation: ActuationConfig = field(default_factory=ActuationConfig)
    termination: TerminationConfig = field(default_factory=TerminationConfig)
    bcg: BCGConfig = field(default_factory=BCGConfig)

    @property
    def control_dt(self) -> float:
        return 1.0 / self.control_hz

    @property
    def substeps(self) -> int:
        """Featherstone steps per control step (control_dt / sim_dt, an integer by validate())."""
        return int(round(self.control_dt / self.sim_dt))

    @property
    def stable_dt(self) -> float:
        """Largest substep accepted: the measured bound and the explicit contact spring-damper bound."""
        return min(self.solver.max_stable_dt, self.solver.stability_safety * 2.0 / self.contact.omega)

    def with_backend(self, backend: Backend) -> SimConfig:
        """A copy on another backend. "newton": its own substep (solver.max_stable_dt) and the explicit PD and
        contact it implements (stable_pd, implicit_contact off); otherwise only `backend` changes."""
        if backend == "newton":
            solver = replace(self.solver, stable_pd=False, implicit_contact=False, implicit_contact_spring=False)
            bcg = replace(self.bcg, start="step")  # its simulator has no partial control step
            return replace(self, backend="newton", sim_dt=self.solver.max_stable_dt, solver=solver, bcg=bcg).validate()
        return replace(self, backend=backend).validate()

    def with_kappa(self, kappa: float) -> SimConfig:
        """A copy with another contact stiffness (validated)."""
        return replace(self, contact=replace(self.contact, kappa=float(kappa))).validate()

    def validate(self) -> SimConfig:
        """Raise ConfigError on any value outside its physical range; returns self for chaining."""
        need = checker("sim config")
        c, b = self.contact, self.bcg
        need(self.backend in get_args(Backend), "backend", f"must be one of {get_args(Backend)}, got {self.backend!r}")
        need(0 < self.solver.native_stability_safety <= 1, "solver.native_stability_safety", "must be in (0, 1]")
        need(self.solver.threads >= 1, "solver.threads", f"must be >= 1, got {self.solver.threads}")
        need(
            not (self.solver.stable_pd and self.backend == "newton"),
            "solver.stable_pd",
            "the implicit PD exists in the native backend only",
        )
        need(
            not (self.solver.implicit_contact and self.backend == "newton"),
            "solver.implicit_contact",
            "implicit contact damping exists in the native backend only",
        )
        need(
            not self.solver.implicit_contact_spring or self.solver.implicit_contact,
            "solver.implicit_contact_spring",
            "needs solver.implicit_contact (the spring's implicit part rides on the contact damping's point mass)",
        )
        need(
            0.5 <= self.solver.implicit_spring_theta <= 1,
            "solver.implicit_spring_theta",
            f"must be in [0.5, 1] (below 0.5 the implicit spring is not unconditionally stable), "
            f"got {self.solver.implicit_spring_theta}",
        )
        need(self.variant == "29dof", "variant", f"only '29dof' is simulated, got {self.variant!r}")
        need(self.control_hz > 0, "control_hz", f"must be > 0, got {self.control_hz}")
        need(c.kappa > 0, "contact.kappa", f"contact stiffness must be > 0 kN/m, got {c.kappa}")
        need(c.damping_ratio >= 0, "contact.damping_ratio", f"must be >= 0, got {c.damping_ratio}")
        need(c.effective_mass > 0, "contact.effective_mass", f"must be > 0 kg, got {c.effective_mass}")
        need(c.friction_mu >= 0, "contact.friction_mu", f"must be >= 0, got {c.friction_mu}")
        need(c.friction_slope_ratio >= 0, "contact.friction_slope_ratio", "must be >= 0")
        for body, r in c.body_spheres.items():
            need(r > 0, f"contact.body_spheres.{body}", f"radius must be > 0 m, got {r}")
        need(self.sim_dt > 0, "sim_dt", f"must be > 0 s, got {self.sim_dt}")
        need(
            self.backend == "native" or self.sim_dt <= self.stable_dt * (1 + 1e-9),  # native: its own bound
            "sim_dt",
            f"{self.sim_dt * 1e3:.3g} ms is above the stable bound {self.stable_dt * 1e3:.3g} ms "
            f"(min of solver.max_stable_dt and {self.solver.stability_safety} * 2/omega_contact at "
            f"kappa={c.kappa} kN/m)",
        )
        ratio = self.control_dt / self.sim_dt
        need(
            abs(ratio - round(ratio)) < 1e-6,
            "sim_dt",
            f"control period {self.control_dt} s is not a whole number of substeps of {self.sim_dt} s",
        )
        need(self.max_tape_steps >= 1, "max_tape_steps", "must be >= 1")
        need(self.actuation.min_armature >= 0, "actuation.min_armature", "must be >= 0")
        need(
            self.actuation.gains in get_args(Gains),
            "actuation.gains",
            f"must be one of {get_args(Gains)}, got {self.actuation.gains!r}",
        )
        need(self.actuation.kp_scale >= 0, "actuation.kp_scale", "must be >= 0")
        need(self.actuation.kd_scale >= 0, "actuation.kd_scale", "must be >= 0")
        need(self.actuation.joint_limit_ke >= 0, "actuation.joint_limit_ke", "must be >= 0")
        need(self.actuation.joint_limit_kd >= 0, "actuation.joint_limit_kd", "must be >= 0")
        need(self.termination.min_root_height >= 0, "termination.min_root_height", "must be >= 0")
        need(self.termination.max_tracking_error > 0, "termination.max_tracking_error", "must be > 0")
        need(b.branches >= 1, "bcg.branches", f"B must be >= 1, got {b.branches}")
        need(b.horizon >= 1, "bcg.horizon", f"H must be >= 1 control step, got {b.horizon}")
        need(b.sigma >= 0, "bcg.sigma", f"perturbation radius must be >= 0 m, got {b.sigma}")
        need(b.sigma_v >= 0, "bcg.sigma_v", f"perturbation radius must be >= 0 m/s, got {b.sigma_v}")
        need(b.trigger_force > 0, "bcg.trigger_force", f"must be > 0 N, got {b.trigger_force}")
        need(
            0 <= b.rearm_force < b.trigger_force,
            "bcg.rearm_force",
            f"must be in [0, trigger_force {b.trigger_force}) N, got {b.rearm_force}",
        )
        need(b.pool_size >= 0, "bcg.pool_size", f"must be >= 0, got {b.pool_size}")
        need(
            b.branches < 1 or b.pool_size % b.branches == 0,
            "bcg.pool_size",
            f"must be a multiple of B={b.branches} (the pool is pool_size/B simulators of B worlds), got {b.pool_size}",
        )
        need(
            b.perturbation in get_args(Perturbation),
            "bcg.perturbation",
            f"must be one of {get_args(Perturbation)}, got {b.perturbation!r}",
        )
        need(b.leg_damping > 0, "bcg.leg_damping", f"must be > 0 m, got {b.leg_damping}")
        need(b.start in get_args(BundleStart), "bcg.start", f"must be one of {get_args(BundleStart)}, got {b.start!r}")
        need(
            not (b.start == "contact" and self.backend == "newton"),
            "bcg.start",
            "'contact' (branches from the contact-onset substep) needs the native backend; newton: 'step'",
        )
        need(
            not (b.antithetic and b.branches % 2),
            "bcg.branches",
            f"antithetic sampling needs an even B, got {b.branches}",
        )
        return self


def sim_config_from_dict(data: dict) -> SimConfig:
    return from_dict(SimConfig, data, where="sim").validate()


def load_sim_config(name_or_path: str | os.PathLike = "sim") -> SimConfig:
    """config/sim.yaml (or a path) as a validated SimConfig."""
    return load_config(SimConfig, name_or_path).validate()
