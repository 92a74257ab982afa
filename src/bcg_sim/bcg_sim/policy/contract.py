"""The policy contract: everything deployment must agree on with training, stored as policy.yaml.

Joint order, default pose, PD gains, effort limits, action scale, observation layout and normalization,
control period and the reference clip. `PolicyContract.validate()` checks it against this bcg (joint
table, feature sizes) and names the first thing that is wrong.

Action: a [29] raw network output a (clipped to +-action_clip) gives joint targets
q_target = default_joint_pos + action_scale * a [rad], kept within each joint's range widened by
target_reach * effort_limit / kp, tracked by the motors' PD (kp, kd) and limited to +-effort_limit by the motors.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import yaml

from bcg_sim.config import ConfigError, from_dict, load_yaml
from bcg_sim.g1.joints import JOINTS_29, MOTORS, joint_limits, stand_gains
from bcg_sim.policy.observation import STANDARD_LAYOUT, _like, feature_size
from bcg_sim.quat import is_torch

# [29] rad, motor order: the joint ranges, which target_range() widens (read once: targets are made every control step)
_JOINT_LOWER, _JOINT_UPPER = joint_limits()
_JOINT_LOWER.setflags(write=False)
_JOINT_UPPER.setflags(write=False)

FORMAT = "bcg_policy"
METADATA_VERSION = 1
NUM_JOINTS = len(JOINTS_29)
DEFAULTS_FILE = "policy_contract.yaml"  # in config/ (bcg_sim.config.config_dir)
# Where the pelvis position behind ref_root_offset_xy comes from on the robot: leg odometry alone
# (bcg_sim.policy.odometry) or a pose source (lidar odometry) carried by it between poses (bcg_sim.policy.pose)
RootSource = Literal["leg_odometry", "pose"]
ROOT_SOURCES = get_args(RootSource)


class ArtifactError(ValueError):
    """A policy artifact that cannot be used (missing, unreadable, damaged or not matching this bcg).

    The one error type artifact loading raises (`load_policy`, `PolicyContract.load`, `ReferenceTrack.load_npz`):
    its message names the file and the problem, so callers print it as one line."""


class PolicyContractError(ArtifactError):
    """policy.yaml (or a network) does not match this bcg; the message says what and how to fix it."""


@dataclass
class ObsSlice:
    name: str  # a feature of bcg_sim.policy.observation.FEATURES
    size: int


@dataclass
class ObservationSpec:
    ref_horizon: int  # K reference frames (the next K control steps)
    layout: list[ObsSlice]
    mean: list[float]  # [n_obs] normalization: (obs - mean) / std, then clipped to +-clip
    std: list[float]
    clip: float = 100.0
    root_source: RootSource = "leg_odometry"  # one of ROOT_SOURCES; read only with ref_root_offset_xy in the layout


@dataclass
class ReferenceSpec:
    name: str  # e.g. "run", or "stand" for the hold policy
    file: str = "reference.npz"  # relative to the artifact folder (ReferenceTrack.save_npz)
    source: str = ""  # where the clip came from (motion file / generator), informational


@dataclass
class PolicyContract:
    joint_names: list[str]  # MJCF names in motor order; must equal bcg_sim.g1 JOINTS_29
    default_joint_pos: list[float]  # [29] rad
    kp: list[float]  # [29] N m/rad
    kd: list[float]  # [29] N m s/rad
    effort_limit: list[float]  # [29] N m
    action_scale: list[float]  # [29] rad per unit action
    control_dt: float  # s, policy period (0.02 = 50 Hz)
    observation: ObservationSpec
    reference: ReferenceSpec
    action_clip: float = 100.0  # raw action clip before scaling
    # How far PD targets may go past a joint's range, in units of its effort_limit / kp [rad]. 0: up to the
    # range's ends, so a joint at its end gets no PD torque towards it (a deep crouch cannot be held against
    # load at the ankle's end); 1: far enough that the PD can push with the motor's full effort at the end,
    # and never more than the motor gives. Absent in policy.yaml: 0 (every artifact before this key).
    target_reach: float = 0.0
    files: dict[str, str] = field(default_factory=dict)  # runtime -> file, e.g. {"onnx": "policy.onnx"}
    format: str = FORMAT
    version: int = METADATA_VERSION
    robot: str = "g1_29dof"
    description: str = ""
    # contact stiffness [kN/m per sphere] of the bcg_sim it was trained in (None: not trained there, e.g. the
    # hold policy); bcg-eval's delta_d uses it by default, since penetration depends on it
    train_kappa: float | None = None

    # --- derived ---
    @property
    def n_obs(self) -> int:
        return sum(s.size for s in self.observation.layout)

    def slices(self) -> dict[str, slice]:
        """Feature name -> slice of the observation vector."""
        out, i = {}, 0
        for s in self.observation.layout:
            out[s.name] = slice(i, i + s.size)
            i += s.size
        return out

    def normalize(self, obs):
        """(obs - mean) / std clipped to +-clip, numpy or torch [..., n_obs]."""
        x = (obs - _like(self.observation.mean, obs)) / _like(self.observation.std, obs)
        c = self.observation.clip
        return x.clamp(-c, c) if is_torch(x) else np.clip(x, -c, c).astype(np.float32)

    def action_to_target(self, action):
        """Joint position targets [..., 29] rad from raw actions [..., 29] (numpy or torch), inside
        `target_range()`: training, evaluation and the node clip the same way, so a policy never learns to count
        on PD torque from targets the robot would not be sent."""
        c = self.action_clip
        a = action.clamp(-c, c) if is_torch(action) else np.clip(action, -c, c)
        q = _like(self.default_joint_pos, a) + _like(self.action_scale, a) * a
        lower, upper = (_like(x, a) for x in self.target_range())
        return q.clamp(min=lower, max=upper) if is_torch(q) else np.clip(q, lower, upper)

    def target_range(self) -> tuple[np.ndarray, np.ndarray]:
        """[29] lower and upper PD targets [rad]: the joint ranges widened by target_reach * effort_limit / kp."""
        if self.target_reach == 0.0:
            return _JOINT_LOWER, _JOINT_UPPER
        reach = self.target_reach * np.asarray(self.effort_limit) / np.maximum(np.asarray(self.kp), 1e-9)
        return _JOINT_LOWER - reach, _JOINT_UPPER + reach

    # --- io ---
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        head = {k: d.pop(k) for k in ("format", "version", "robot", "description")}  # readable file top
        return {**head, **d}

    def save(self, path: str | Path) -> None:
        with open(path, "w") as f:
            yaml.safe_dump(self.to_dict(), f, sort_keys=False, width=120)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "policy.yaml") -> "PolicyContract":
        if not isinstance(data, dict):
            raise PolicyContractError(f"{where}: top level must be a mapping")
        if data.get("format") != FORMAT:
            raise PolicyContractError(
                f"{where}: format is {data.get('format')!r}, expected {FORMAT!r} (not a bcg policy artifact)"
            )
        if data.get("version") != METADATA_VERSION:
            raise PolicyContractError(
                f"{where}: metadata version {data.get('version')!r}, this bcg reads "
                f"version {METADATA_VERSION}; re-export the policy with this bcg"
            )
        try:
            c = from_dict(cls, data, where)
        except ConfigError as exc:
            raise PolicyContractError(str(exc)) from exc
        c.validate(where)
        return c

    @classmethod
    def load(cls, path: str | Path) -> "PolicyContract":
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except UnicodeDecodeError as exc:
            raise PolicyContractError(f"{path}: not a text file (binary data at byte {exc.start})") from exc
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise PolicyContractError(f"{path}: YAML syntax error{where}: {problem}") from exc
        except OSError as exc:
            raise PolicyContractError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        return cls.from_dict(data, str(path))

    # --- checks ---
    def validate(self, where: str = "policy contract") -> None:
        """Raise PolicyContractError naming the first mismatch with this bcg."""
        expected = [j.mjcf_name for j in JOINTS_29]
        if list(self.joint_names) != expected:
            diff = next(
                (i for i, (a, b) in enumerate(zip(self.joint_names, expected)) if a != b),
                min(len(self.joint_names), len(expected)),
            )
            got = self.joint_names[diff] if diff < len(self.joint_names) else "<missing>"
            raise PolicyContractError(
                f"{where}: joint order differs from bcg_sim.g1.joints at index {diff}: "
                f"{got!r} != {expected[diff] if diff < 29 else '<none>'!r} "
                f"({len(self.joint_names)} names, expected 29 in motor order)"
            )
        for name in ("default_joint_pos", "kp", "kd", "effort_limit", "action_scale"):
            v = np.asarray(getattr(self, name), dtype=np.float64)
            if v.shape != (NUM_JOINTS,) or not np.all(np.isfinite(v)):
                raise PolicyContractError(f"{where}: {name} must be 29 finite numbers, got shape {v.shape}")
        if min(self.kp) < 0 or min(self.kd) < 0 or min(self.effort_limit) <= 0:
            raise PolicyContractError(f"{where}: kp, kd must be >= 0 and effort_limit > 0")
        for j, lim in zip(JOINTS_29, self.effort_limit):
            if lim > MOTORS[j.motor].effort_limit + 1e-6:
                raise PolicyContractError(
                    f"{where}: effort_limit {lim} of {j.name} exceeds its motor's {MOTORS[j.motor].effort_limit} N m"
                )
        if not (isinstance(self.target_reach, (int, float)) and 0.0 <= self.target_reach <= 10.0):
            raise PolicyContractError(
                f"{where}: target_reach must be a number in [0, 10] (units of effort_limit / kp), "
                f"got {self.target_reach!r}"
            )
        if not (self.control_dt > 0 and math.isfinite(self.control_dt)):
            raise PolicyContractError(f"{where}: control_dt must be > 0, got {self.control_dt}")
        if self.train_kappa is not None and not (
            isinstance(self.train_kappa, (int, float)) and math.isfinite(self.train_kappa) and self.train_kappa > 0
        ):
            raise PolicyContractError(
                f"{where}: train_kappa must be a stiffness > 0 kN/m or absent, got {self.train_kappa!r}"
            )
        self._validate_observation(where)

    def _validate_observation(self, where: str) -> None:
        o = self.observation
        if o.ref_horizon < 1:
            raise PolicyContractError(f"{where}: observation.ref_horizon must be >= 1")
        names = [s.name for s in o.layout]
        if len(set(names)) != len(names):
            raise PolicyContractError(f"{where}: observation.layout repeats a feature: {names}")
        for s in o.layout:
            try:
                size = feature_size(s.name, o.ref_horizon)
            except ValueError as exc:
                raise PolicyContractError(f"{where}: observation.layout: {exc}") from exc
            if s.size != size:
                raise PolicyContractError(
                    f"{where}: observation feature {s.name} has size {s.size}, the "
                    f"builder makes {size} (ref_horizon {o.ref_horizon})"
                )
        if o.root_source not in ROOT_SOURCES:
            raise PolicyContractError(
                f"{where}: observation.root_source must be one of {ROOT_SOURCES}, got {o.root_source!r}"
            )
        n = self.n_obs
        if len(o.mean) != n or len(o.std) != n:
            raise PolicyContractError(
                f"{where}: observation mean/std have {len(o.mean)}/{len(o.std)} entries, the layout has {n}"
            )
        std = np.asarray(o.std)
        if not (np.all(np.isfinite(o.mean)) and np.all(np.isfinite(std)) and np.all(std > 0)):
            raise PolicyContractError(f"{where}: observation mean must be finite and std finite and > 0")


def load_defaults() -> dict[str, Any]:
    """The contract defaults (config/policy_contract.yaml): K, action scale factor, control dt..."""
    return load_yaml(DEFAULTS_FILE)


def default_contract(
    ref_horizon: int | None = None,
    control_dt: float | None = None,
    layout: tuple[str, ...] = STANDARD_LAYOUT,
    reference_name: str = "stand",
    gains: str = "policy",
    root_source: RootSource = "leg_odometry",
) -> PolicyContract:
    """A contract from the G1 joint table and config/policy_contract.yaml: identity normalization (mean 0, std 1),
    action_scale = action_scale_factor * effort_limit / kp_motor (BeyondMimic). `gains`: "policy" = the
    motors' gains (bcg_sim.g1.joints.MOTORS, for trained policies that balance), "stand" = the bring-up
    gains (bcg_sim.g1.stand_gains) with which a zero-action policy holds the robot up. `root_source`: one of
    ROOT_SOURCES (where ref_root_offset_xy's pelvis position comes from on the robot)."""
    d = load_defaults()
    k = int(d["ref_horizon"] if ref_horizon is None else ref_horizon)
    motors = [MOTORS[j.motor] for j in JOINTS_29]
    motor_kp = [m.kp for m in motors]
    if gains == "policy":
        kp, kd = motor_kp, [m.kd for m in motors]
    elif gains == "stand":
        kp, kd = stand_gains("29dof")
    else:
        raise ValueError(f"gains must be 'policy' or 'stand', got {gains!r}")
    layout_slices = [ObsSlice(n, feature_size(n, k)) for n in layout]
    n = sum(s.size for s in layout_slices)
    c = PolicyContract(
        joint_names=[j.mjcf_name for j in JOINTS_29],
        default_joint_pos=[j.default for j in JOINTS_29],
        kp=list(kp),
        kd=list(kd),
        effort_limit=[m.effort_limit for m in motors],
        action_scale=[float(d["action_scale_factor"]) * m.effort_limit / p for m, p in zip(motors, motor_kp)],
        control_dt=float(d["control_dt"] if control_dt is None else control_dt),
        observation=ObservationSpec(k, layout_slices, [0.0] * n, [1.0] * n, float(d["obs_clip"]), root_source),
        reference=ReferenceSpec(reference_name),
        action_clip=float(d["action_clip"]),
        target_reach=float(d["target_reach"]),
    )
    c.validate("default contract")
    return c
