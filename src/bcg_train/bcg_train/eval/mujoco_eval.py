"""The policy on its reference clip in MuJoCo: the G1 drivers' PD at physics rate, the policy at its control
rate through the policy node's own `PolicyRunner` (observation builder, checks, target clipping).

Motor PD per physics step is the bridge's `G1Sim` (tau = kp (q* - q) + kd (0 - dq), clipped to the effort
limits), so this loop, `bcg-sim2sim` and the robot run the same driver law. Any G1 MJCF works: it must have
the 29 G1 hinge joints (by name) and a free joint; its actuators on those joints are turned into plain torque
motors (the Menagerie G1 ships position servos), and a floor plane is added when the world has none.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from bcg_sim.config import load_yaml
from bcg_sim.g1 import FOOT_BODIES, JOINTS_29, joint_limits, load_mujoco
from bcg_sim.policy import Policy, RobotState
from bcg_sim.policy.pose import SimulatedPoseSource
from bcg_sim.quat import yaw
from bcg_train.eval.config import EvalConfig
from bcg_train.eval.metrics import Rollout, kinematics

BRIDGE_CONFIG = "mujoco_bridge.yaml"


class EvalError(ValueError):
    """Bad evaluation input (MJCF, policy, options); the message names the file and the problem."""


# --- model ------------------------------------------------------------------------------------------------
def load_eval_model(mjcf: str | None, notes: list[str] | None = None) -> mujoco.MjModel:
    """The project's G1 (mjcf None) or a G1 MJCF file, with torque motors on the 29 joints and a floor.
    What was changed in a given MJCF is appended to `notes` (one line each) for the user to see."""
    notes = [] if notes is None else notes
    if mjcf is None:
        return load_mujoco("29dof", floor=True)
    path = Path(mjcf)
    if not path.is_file():
        raise EvalError(f"MJCF {mjcf}: file not found")
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - MuJoCo's parser errors are ValueError or its own types
        raise EvalError(f"MJCF {mjcf}: cannot parse: {str(exc).splitlines()[0]}") from exc
    joints = {j.name: j for j in spec.joints}
    missing = [j.mjcf_name for j in JOINTS_29 if j.mjcf_name not in joints]
    if missing:
        raise EvalError(
            f"MJCF {mjcf}: not a 29-DoF G1, missing joint(s) {missing[:4]}"
            f"{' ...' if len(missing) > 4 else ''} ({len(missing)} of 29)"
        )
    if not any(j.type == mujoco.mjtJoint.mjJNT_FREE for j in spec.joints):
        raise EvalError(f"MJCF {mjcf}: no free joint (the G1 must have a floating base)")
    g1_joints = {j.mjcf_name for j in JOINTS_29}
    driven, converted = set(), 0
    for a in spec.actuators:
        if a.target in g1_joints:
            converted += a.gaintype != mujoco.mjtGain.mjGAIN_FIXED or a.biastype != mujoco.mjtBias.mjBIAS_NONE
            a.set_to_motor()  # ctrl = torque; the PD runs in our code like the robot's motor drivers
            a.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE  # G1Sim clips to the motors' effort limits
            a.forcelimited = mujoco.mjtLimited.mjLIMITED_FALSE
            driven.add(a.target)
    if converted:
        notes.append(
            f"MJCF {path.name}: {converted} servo actuator(s) on G1 joints turned into torque motors "
            "(the PD runs in the eval loop, like the robot's drivers)"
        )
    for name in sorted(g1_joints - driven):
        spec.add_actuator(name=f"{name}_motor", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
    if g1_joints - driven:
        notes.append(f"MJCF {path.name}: torque motors added on {len(g1_joints - driven)} undriven G1 joint(s)")
    if not any(g.type == mujoco.mjtGeom.mjGEOM_PLANE for g in spec.worldbody.geoms):
        _add_floor(spec)
        notes.append(f"MJCF {path.name}: no ground plane; added the project model's floor (z = 0)")
    try:
        model = spec.compile()
    except Exception as exc:  # noqa: BLE001
        raise EvalError(f"MJCF {mjcf}: does not compile: {str(exc).splitlines()[0]}") from exc
    if model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE or model.jnt_qposadr[0] != 0:
        raise EvalError(f"MJCF {mjcf}: the free joint must be the first joint (qpos[0:7])")
    return model


def _add_floor(spec: mujoco.MjSpec) -> None:
    """The project model's floor plane (same size and friction), added to a model without one."""
    ref = load_mujoco("29dof", floor=True)
    i = mujoco.mj_name2id(ref, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    spec.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=ref.geom_size[i].tolist(),
        friction=ref.geom_friction[i].tolist(),
    )


def bridge_config(physics_dt: float):
    """The bridge's BridgeConfig (config/mujoco_bridge.yaml) for an offline loop: our physics_dt, no start-pose
    hold, no node-level noise or latency (this loop adds its own)."""
    from bcg_policy_node.mujoco_bridge import BridgeConfig

    p = dict(load_yaml(BRIDGE_CONFIG)["mujoco_bridge"]["ros__parameters"])
    p.update(
        physics_dt=physics_dt,
        lowstate_rate_hz=1.0 / physics_dt,
        hold_start_pose=False,
        realtime=False,
        noise_q_std=0.0,
        noise_dq_std=0.0,
        noise_gyro_std=0.0,
        noise_acc_std=0.0,
        state_latency_s=0.0,
        cmd_latency_s=0.0,
    )
    return BridgeConfig(**p)


# --- one run ----------------------------------------------------------------------------------------------
@dataclass
class MujocoRun:
    rollout: Rollout
    fault: str = ""  # a PolicyFault that ended the run early
    max_contacts: int = 0  # most simultaneous MuJoCo contacts
    warnings: dict[str, int] = field(default_factory=dict)  # MuJoCo warning counters that fired
    missed_contacts: int = 0  # control steps where a sole penetrated > 1 mm but MuJoCo had no contact on it


WATCHED_WARNINGS = ("mjWARN_CONTACTFULL", "mjWARN_CNSTRFULL", "mjWARN_BADQACC", "mjWARN_BADQPOS", "mjWARN_BADQVEL")
MISSED_CONTACT_DEPTH = 0.001  # [m] geometric penetration that must show up as a MuJoCo contact


class MujocoEvaluator:
    """Runs one policy in MuJoCo; `run(seed)` is one rollout with that seed's initial-state noise."""

    def __init__(self, policy: Policy, cfg: EvalConfig, model: mujoco.MjModel, seconds: float):
        from bcg_policy_node.mujoco_bridge import G1Sim

        self.policy, self.cfg, self.seconds = policy, cfg, seconds
        c = policy.contract
        n = c.control_dt / cfg.physics_dt
        if abs(n - round(n)) > 1e-6:
            raise EvalError(
                f"policy control_dt {c.control_dt} s is not a whole number of physics steps ({cfg.physics_dt} s)"
            )
        self.substeps = round(n)
        try:
            self.sim = G1Sim(bridge_config(cfg.physics_dt), model=model)
        except ValueError as exc:
            raise EvalError(f"MJCF: {exc}") from exc
        self.kp, self.kd = np.asarray(c.kp, float), np.asarray(c.kd, float)
        self._foot_bodies = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f) for f in FOOT_BODIES]
        if min(self._foot_bodies) < 0:
            raise EvalError(f"MJCF has no foot bodies {FOOT_BODIES}")
        self._probe = mujoco.MjData(model)  # collision of the current state, apart from the simulation's data

    def _qpos(self) -> np.ndarray:
        d = self.sim.data
        return np.concatenate([d.qpos[:7], d.qpos[self.sim.qadr]])

    def _set_state(
        self, qpos: np.ndarray, root_lin_vel_w: np.ndarray, root_ang_vel_w: np.ndarray, joint_vel: np.ndarray
    ) -> None:
        d, m = self.sim.data, self.sim.model
        mujoco.mj_resetData(m, d)
        d.qpos[:7], d.qpos[self.sim.qadr] = qpos[:7], qpos[7:]
        d.qvel[:3] = root_lin_vel_w
        # MuJoCo's free-joint angular velocity is in the body frame
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, qpos[3:7])
        d.qvel[3:6] = rot.reshape(3, 3).T @ root_ang_vel_w
        d.qvel[self.sim.vadr] = joint_vel
        mujoco.mj_forward(m, d)

    def _command(self, q_target: np.ndarray):
        from bcg_policy_node.lowlevel import MotorCommand

        z = np.zeros(len(JOINTS_29))
        return MotorCommand(
            q=np.asarray(q_target, float),
            dq=z,
            tau=z,
            kp=self.kp,
            kd=self.kd,
            mode=np.ones(len(JOINTS_29), dtype=np.uint8),
        )

    def _measure(self, rng: np.random.Generator) -> RobotState:
        s, c = self.sim.measure(), self.cfg
        q = s.q + rng.normal(0.0, c.noise_q_std, s.q.shape) if c.noise_q_std > 0 else s.q
        dq = s.dq + rng.normal(0.0, c.noise_dq_std, s.dq.shape) if c.noise_dq_std > 0 else s.dq
        gyro = s.gyro + rng.normal(0.0, c.noise_gyro_std, 3) if c.noise_gyro_std > 0 else s.gyro
        return RobotState(q, dq, s.quat, gyro)

    def run(self, seed: int) -> MujocoRun:
        from bcg_policy_node.policy_runner import PolicyFault, PolicyRunner

        rng = np.random.default_rng(seed)
        cfg, dt = self.cfg, self.policy.contract.control_dt
        qpos0, v0, w0, jv0 = start_state(self.policy, self.cfg, rng)
        self._set_state(qpos0, v0, w0, jv0)
        self.sim.command, self.sim.holding = self._command(qpos0[7:]), False  # motors hold the start pose
        runner = PolicyRunner(self.policy, pose_timeout_s=cfg.pose_timeout_s, root_source=cfg.root_source or None)
        poses = pose_source(runner, cfg, seed)
        runner.start(self._measure(rng))
        pending: deque = deque()
        times, qpos, fault = [0.0], [self._qpos()], ""
        out = MujocoRun(Rollout(np.zeros(0), np.zeros((0, 36)), np.zeros((0, 36))))
        for k in range(round(self.seconds / dt)):
            if poses is not None:  # the pelvis as a lidar odometry would report it
                pose = poses.step(self.sim.data.qpos[:2], yaw(self.sim.data.qpos[3:7]))
                if pose is not None:
                    runner.observe_pose(*pose)
            try:
                target = runner.step(self._measure(rng))
            except PolicyFault as exc:
                fault = str(exc)
                break
            pending.append((self.sim.data.time + cfg.action_latency_s, self._command(target)))
            for _ in range(self.substeps):
                while pending and pending[0][0] <= self.sim.data.time + 1e-9:
                    self.sim.set_command(pending.popleft()[1])
                self.sim.step(1)
                out.max_contacts = max(out.max_contacts, int(self.sim.data.ncon))
            times.append((k + 1) * dt)
            qpos.append(self._qpos())
            out.missed_contacts += self._missed_contacts(qpos[-1])
            if qpos[-1][2] < cfg.fall_height:
                break
        out.fault = fault
        out.warnings = {
            w: int(self.sim.data.warning[getattr(mujoco.mjtWarning, w)].number)
            for w in WATCHED_WARNINGS
            if self.sim.data.warning[getattr(mujoco.mjtWarning, w)].number
        }
        t = np.array(times)
        out.rollout = Rollout(t, np.array(qpos), reference_qpos(self.policy.reference, t))
        return out

    def _missed_contacts(self, qpos: np.ndarray) -> int:
        """1 when a foot penetrates deeper than MISSED_CONTACT_DEPTH but MuJoCo's collision of this very state has
        no contact on it. The simulation's own contact list is from the start of the last physics step (before
        integration), so a fast-falling foot would look missed; a probe MjData runs collision at the current
        qpos instead and leaves the simulation untouched."""
        sole_z = kinematics(qpos[None]).sole_z[0]
        if not (sole_z < -MISSED_CONTACT_DEPTH).any():
            return 0
        d, m, p = self.sim.data, self.sim.model, self._probe
        p.qpos[:] = d.qpos
        mujoco.mj_fwdPosition(m, p)
        touching = {int(m.geom_bodyid[c.geom1]) for c in p.contact[: p.ncon]} | {
            int(m.geom_bodyid[c.geom2]) for c in p.contact[: p.ncon]
        }
        return int(
            any(sole_z[k] < -MISSED_CONTACT_DEPTH and b not in touching for k, b in enumerate(self._foot_bodies))
        )


def pose_source(runner, cfg: EvalConfig, seed: int) -> SimulatedPoseSource | None:
    """The simulated pose source of a runner whose policy reads one (None: it does not), with a noise stream of
    its own (the other noise draws stay those of a run without it)."""
    if not runner.uses_pose:
        return None
    rng = np.random.default_rng([seed, 0x905E])
    return SimulatedPoseSource(runner.dt, cfg.pose_period_s, cfg.pose_latency_s, cfg.pose_noise_m, rng, cfg.pose_drift)


def start_state(policy: Policy, cfg: EvalConfig, rng: np.random.Generator, t0: float = 0.0, reference=None):
    """The reference at time t0 [s] (clip placed so that its pose at t0 is at the origin, heading unchanged) plus
    a seed's initial-state noise (joint angles, root linear velocity): qpos [36], root linear / angular velocity
    [3] (world), joint velocity [29]. The same start for MuJoCo and the training simulator (delta_d).
    `reference`: the clip to align (default policy.reference)."""
    ref = policy.reference if reference is None else reference
    ref.align_yaw(ref.sample(np.array([t0]), aligned=False)["root_quat_w"][0], t0)
    s = {k: v[0] for k, v in ref.sample(np.array([t0])).items()}
    dt = policy.contract.control_dt
    jv = (ref.sample(np.array([t0 + dt]))["joint_pos"][0] - s["joint_pos"]) / dt
    q = s["joint_pos"] + rng.normal(0.0, cfg.init_joint_noise, len(JOINTS_29))
    lo, hi = joint_limits()
    qpos = np.concatenate([s["root_pos_w"], s["root_quat_w"], np.clip(q, lo, hi)])
    v = s["root_lin_vel_w"] + rng.normal(0.0, cfg.init_root_vel_noise, 3)
    return qpos, v, s["root_ang_vel_w"], jv


def reference_qpos(reference, times: np.ndarray) -> np.ndarray:
    """[T, 36] qpos of the (aligned) reference at times [T] s."""
    s = reference.sample(np.asarray(times, dtype=np.float64))
    return np.concatenate([s["root_pos_w"], s["root_quat_w"], s["joint_pos"]], axis=1)


def clip_seconds(policy: Policy, seconds: float) -> float:
    """Run length: `seconds`, or the reference clip's duration when 0 (at least one control step)."""
    s = seconds if seconds > 0 else policy.reference.duration
    return max(s, policy.contract.control_dt)
