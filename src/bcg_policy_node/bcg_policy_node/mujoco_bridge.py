"""MuJoCo bridge node: the G1 simulated in MuJoCo behind the robot's own unitree_hg interface.

It stands in for the robot's motor drivers and state publisher so that the policy node cannot tell the
difference (sim2sim):

- subscribes ``/lowcmd`` (unitree_hg/LowCmd). A message whose CRC is wrong is dropped, as the robot does,
  with a rate-limited warning.
- every physics step (``physics_dt``, 1 ms by default) computes the drivers' PD law per motor
  ``tau = tau_ff + kp (q* - q) + kd (dq* - dq)``, clipped to the motor's effort limit, and applies it
  through the model's torque actuators. A motor whose ``mode`` is 0 is passive (zero torque).
- publishes ``/lowstate`` (unitree_hg/LowState) at ``lowstate_rate_hz`` (500 Hz): pelvis IMU
  (quaternion w x y z world<-IMU, gyroscope rad/s and accelerometer m/s^2 in the IMU frame, rpy rad),
  motor q/dq/ddq/tau_est in slots 0..28, ``tick`` in ms of sim time, ``mode_machine`` and the CRC.
- optional sensor noise and state/command latency, emulated wireless-remote buttons, ground truth for
  evaluation, and sim time on ``/clock`` when not running in real time.
- a pose source off the soles (``pose_rate_hz``): the pelvis' horizontal position and heading as a lidar-inertial
  odometry on the G1's MID-360 reports them, ``pose_latency_s`` old (stamped when measured) with ``pose_noise_m``
  of noise and a drift of ``pose_drift`` m per sqrt(m) of path per axis: bcg_sim.policy.pose.SimulatedPoseSource,
  stepped once per LowState tick, for policies whose contract's observation.root_source is "pose".
- a seeded start-state spread (``start_joint_noise``, ``start_root_vel_noise``): `perturb_start` adds Gaussian
  noise to the joint angles and the pelvis linear velocity, drawn from a stream seeded by ``seed``.
  bcg-sim2sim --start applies it with the press that starts the policy (HOLD -> RUN), so that the N runs of
  ``bcg-eval --ros`` start from N states like bcg-eval's MuJoCo runs (config/eval.yaml init_joint_noise /
  init_root_vel_noise), not N times from the same one.

Topics (all names relative, so a namespace or remapping moves them):
  in : /lowcmd (unitree_hg/LowCmd), /sim/press (std_msgs/String, e.g. "start" or "L1+A": hold the
       buttons for ``remote_press_s``), /sim/wireless_remote (std_msgs/UInt8MultiArray, 40 raw bytes that
       stay until replaced)
  out: /lowstate (unitree_hg/LowState), /sim/ground_truth (geometry_msgs/PoseStamped, pelvis in world),
       /sim/body_poses (geometry_msgs/PoseArray, bodies ``ground_truth_bodies`` in world, same order),
       /odometry (nav_msgs/Odometry, pelvis in world: the simulated pose source; off at ``pose_rate_hz`` 0),
       /clock (rosgraph_msgs/Clock, only when ``realtime`` is false)
Services: /sim/press_start, /sim/press_select (std_srvs/Trigger), /sim/reset (std_srvs/Trigger: back to
  the start pose), /sim/perturb (std_srvs/Trigger: `perturb_start` now).
Parameters: config/mujoco_bridge.yaml (every key required; see BridgeConfig).
"""

from __future__ import annotations

import math
import sys
from collections import deque
from dataclasses import dataclass
from typing import Literal, Sequence, get_args

import mujoco
import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Pose, PoseArray, PoseStamped
from nav_msgs.msg import Odometry
from rclpy._rclpy_pybind11 import RCLError
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg
from std_msgs.msg import String, UInt8MultiArray
from std_srvs.srv import Trigger

from bcg_policy_node import lowlevel, startup
from bcg_policy_node.lowlevel import BadMessage, MotorCommand
from bcg_sim.config import ConfigError, checker, resolve_config_path
from bcg_sim.g1 import MOTORS, joints, load_mujoco
from bcg_sim.g1.joints import VARIANTS, Variant, stand_gains
from bcg_sim.policy.pose import SimulatedPoseSource
from bcg_sim.quat import from_yaw, yaw
from unitree_hg.msg import LowCmd, LowState

# ---------------------------------------------------------------------------------------------------------
# Configuration


StartPose = Literal["standing", "lying"]


@dataclass(frozen=True)
class BridgeConfig:
    """The bridge's parameters (ROS 2 parameters of node ``mujoco_bridge``; config/mujoco_bridge.yaml)."""

    variant: Variant  # G1 model variant
    physics_dt: float  # [s] MuJoCo timestep; the PD law is recomputed every step
    lowstate_rate_hz: float  # /lowstate publication rate in sim time [Hz]
    realtime: bool  # true: sim time follows the wall clock; false: sim time on /clock, lockstep (below)
    lockstep_timeout_s: float  # realtime false: step when the last LowState was answered by a LowCmd or
    # after this many wall s without one (0: free-running, as fast as possible)
    start_pose: StartPose  # "standing" (default joint pose, feet on the ground) or "lying" (on the back)
    hold_start_pose: bool  # PD-hold the start pose (stand gains) until the first LowCmd with kp > 0 (gantry)
    mode_machine: int  # robot type reported in LowState (G1 = 5); a LowCmd with another one is dropped
    noise_q_std: float  # [rad] Gaussian noise on reported joint positions
    noise_dq_std: float  # [rad/s]
    noise_gyro_std: float  # [rad/s]
    noise_acc_std: float  # [m/s^2]
    state_latency_s: float  # [s] sim-time delay between measuring a state and publishing it
    cmd_latency_s: float  # [s] sim-time delay between receiving a LowCmd and the drivers using it
    ground_truth_rate_hz: float  # [Hz] /sim/ground_truth and /sim/body_poses; 0 disables
    ground_truth_bodies: list[str]  # body names for /sim/body_poses; ["*"] = every body but the world
    remote_press_s: float  # [s] how long /sim/press and the press services hold a button
    bad_crc_log_period_s: float  # [s] at most one bad-CRC warning per period (the count is reported)
    max_catchup_steps: int  # real time: most LowState periods stepped per timer callback when lagging
    seed: int  # noise seed (sensor noise; the start-state spread draws from a stream of its own)
    start_joint_noise: float  # [rad] std of the noise `perturb_start` adds to the joint angles (0: none)
    start_root_vel_noise: float  # [m/s] std of the noise it adds to the pelvis linear velocity (world frame)
    pose_rate_hz: float  # [Hz] /odometry, the simulated pose source; 0 disables
    pose_latency_s: float  # [s] sim-time delay from measuring a pose to publishing it
    pose_noise_m: float  # [m] Gaussian noise per horizontal axis on its position
    pose_drift: float  # [m per sqrt(m) of path] random walk of its position per horizontal axis

    def __post_init__(self) -> None:
        need = checker()
        need(self.variant in VARIANTS, "variant", f"must be one of {sorted(VARIANTS)}, got {self.variant!r}")
        need(0 < self.physics_dt <= 0.005, "physics_dt", f"must be in (0, 0.005] s, got {self.physics_dt}")
        steps = 1.0 / (self.lowstate_rate_hz * self.physics_dt) if self.lowstate_rate_hz > 0 else 0.5
        need(
            abs(steps - round(steps)) < 1e-6,
            "lowstate_rate_hz",
            f"must be > 0 with a period of a whole number "
            f"of physics steps; got {self.lowstate_rate_hz} Hz with physics_dt {self.physics_dt} s",
        )
        need(
            self.start_pose in get_args(StartPose),
            "start_pose",
            f"must be one of {get_args(StartPose)}, got {self.start_pose!r}",
        )
        for name in (
            "noise_q_std",
            "noise_dq_std",
            "noise_gyro_std",
            "noise_acc_std",
            "state_latency_s",
            "cmd_latency_s",
            "ground_truth_rate_hz",
            "remote_press_s",
            "lockstep_timeout_s",
            "start_joint_noise",
            "start_root_vel_noise",
            "pose_rate_hz",
            "pose_latency_s",
            "pose_noise_m",
            "pose_drift",
        ):
            need(getattr(self, name) >= 0, name, f"must be >= 0, got {getattr(self, name)}")
        need(self.max_catchup_steps >= 1, "max_catchup_steps", f"must be >= 1, got {self.max_catchup_steps}")

    @property
    def steps_per_state(self) -> int:
        """Physics steps per published LowState."""
        return round(1.0 / (self.lowstate_rate_hz * self.physics_dt))


# ---------------------------------------------------------------------------------------------------------
# Model


def load_model(variant: str) -> mujoco.MjModel:
    """The project's G1 (bcg_sim.g1) with one torque actuator per joint (ctrl = torque [N m]) and a floor."""
    return load_mujoco(variant=variant, floor=True)


@dataclass
class SimState:
    """One measured state (what a LowState reports), before noise. Joint arrays are [n_joints] in motor order."""

    time: float  # [s] sim time
    q: np.ndarray  # [rad]
    dq: np.ndarray  # [rad/s]
    ddq: np.ndarray  # [rad/s^2]
    tau: np.ndarray  # [N m] torque the drivers applied in the last step
    quat: np.ndarray  # [4] w x y z, IMU frame -> world
    gyro: np.ndarray  # [3] rad/s, IMU frame
    acc: np.ndarray  # [3] m/s^2 proper acceleration (gravity included: +9.81 z at rest), IMU frame


class G1Sim:
    """MuJoCo G1 with Unitree-driver PD per physics step. No ROS here; the node wraps it.

    Joint arrays are in motor order (joint i = LowCmd/LowState slot ``slots[i]``).
    """

    def __init__(self, cfg: BridgeConfig, model: mujoco.MjModel | None = None) -> None:
        self.cfg = cfg
        self.model = model if model is not None else load_model(cfg.variant)
        self.model.opt.timestep = cfg.physics_dt
        self.data = mujoco.MjData(self.model)
        self.joints = joints(cfg.variant)
        names29 = [j.name for j in joints("29dof")]
        self.slots = np.array([names29.index(j.name) for j in self.joints])
        self._bind_joints()
        self.effort_limit = np.array([MOTORS[j.motor].effort_limit for j in self.joints])
        self.default_q = np.array([j.default for j in self.joints])
        self.joint_lower = np.array([j.lower for j in self.joints])
        self.joint_upper = np.array([j.upper for j in self.joints])
        # The bring-up stand gains (the motors' own gains are meant for a balancing policy and let a passive
        # stand fold); the same gains the hold artifact and the policy node's MOVE_TO_DEFAULT/HOLD use.
        kp, kd = stand_gains(cfg.variant)
        self.hold_kp, self.hold_kd = np.array(kp), np.array(kd)
        self.imu_site = self._id(mujoco.mjtObj.mjOBJ_SITE, "imu_in_pelvis")
        self.pelvis_body = self._id(mujoco.mjtObj.mjOBJ_BODY, "pelvis")
        self.command: MotorCommand | None = None  # None: no valid LowCmd yet
        self.holding = cfg.hold_start_pose
        self.tau = np.zeros(len(self.joints))
        self.reset()

    def _id(self, kind: mujoco.mjtObj, name: str) -> int:
        i = mujoco.mj_name2id(self.model, kind, name)
        if i < 0:
            raise ValueError(f"G1 model has no {kind.name[6:].lower()} named {name!r}")
        return i

    def _bind_joints(self) -> None:
        """qpos/qvel addresses and actuator of each joint; every joint needs a plain torque actuator."""
        m = self.model
        jids = [self._id(mujoco.mjtObj.mjOBJ_JOINT, j.mjcf_name) for j in self.joints]
        self.qadr = np.array([m.jnt_qposadr[i] for i in jids])
        self.vadr = np.array([m.jnt_dofadr[i] for i in jids])
        act_of_joint = {
            int(m.actuator_trnid[a, 0]): a for a in range(m.nu) if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
        }
        missing = [j.mjcf_name for j, i in zip(self.joints, jids) if i not in act_of_joint]
        if missing:
            raise ValueError(f"G1 model has no actuator for joints {missing}")
        self.act = np.array([act_of_joint[i] for i in jids])
        for a in self.act:
            # ctrl must be torque: gain 1, no bias (a position actuator would add its own PD).
            if m.actuator_biastype[a] != mujoco.mjtBias.mjBIAS_NONE or m.actuator_gainprm[a, 0] != 1.0:
                raise ValueError(
                    f"actuator {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a)!r} "
                    "is not a torque motor (gain 1, no bias)"
                )

    # -- pose ----------------------------------------------------------------------------------------

    def reset(self) -> None:
        """Start pose: joints at the default pose; standing upright or lying on the back, just above ground."""
        d, m = self.data, self.model
        mujoco.mj_resetData(m, d)
        d.qpos[self.qadr] = self.default_q
        if self.cfg.start_pose == "standing":
            d.qpos[3:7] = (1.0, 0.0, 0.0, 0.0)
        else:  # pitched -90 deg about y: the pelvis' forward axis points up, i.e. lying on the back
            d.qpos[3:7] = (math.cos(-math.pi / 4), 0.0, math.sin(-math.pi / 4), 0.0)
        d.qpos[2] = self._clearance_height()
        mujoco.mj_forward(m, d)
        self.tau[:] = 0.0
        self.holding = self.cfg.hold_start_pose

    def _clearance_height(self) -> float:
        """Lowest pelvis height (1 mm steps from 0) at which the robot does not touch the ground, plus 2 mm."""
        d, m = self.data, self.model
        world_geom = m.geom_bodyid == 0  # the floor (and anything else fixed to the world)
        z = 0.0
        for _ in range(2000):
            d.qpos[2] = z
            mujoco.mj_forward(m, d)
            ground = [c for c in d.contact[: d.ncon] if world_geom[c.geom1] or world_geom[c.geom2]]
            if not any(c.dist < 0 for c in ground):
                return z + 0.002
            z += 0.001
        raise RuntimeError("could not find a collision-free start height for the G1 within 2 m")

    def perturb(self, rng: np.random.Generator, joint_std: float, root_vel_std: float) -> np.ndarray:
        """Add N(0, joint_std) to each joint angle (kept within the joint limits, like bcg-eval's MuJoCo start) and
        N(0, root_vel_std) to the pelvis linear velocity (world frame); returns the 29 + 3 numbers drawn (joint
        offsets before the clip, velocity change). Draws nothing for a zero std, so a stream is not advanced."""
        d = self.data
        dq = rng.normal(0.0, joint_std, len(self.joints)) if joint_std > 0 else np.zeros(len(self.joints))
        dv = rng.normal(0.0, root_vel_std, 3) if root_vel_std > 0 else np.zeros(3)
        d.qpos[self.qadr] = np.clip(d.qpos[self.qadr] + dq, self.joint_lower, self.joint_upper)
        d.qvel[0:3] += dv  # free joint: linear velocity of the pelvis in the world frame
        mujoco.mj_forward(self.model, d)
        return np.concatenate([dq, dv])

    # -- commands and stepping -----------------------------------------------------------------------

    def set_command(self, command: MotorCommand) -> None:
        """New driver commands (from a valid LowCmd, slots 0..28).

        The start-pose hold (a gantry stand-in) ends with the first command that asks for a position (an
        enabled motor with kp > 0): zero-torque and damping commands, which a policy node sends while the real
        robot still hangs in its gantry, leave the robot held.
        """
        self.command = command
        if self.holding and bool(np.any((command.mode[self.slots] != 0) & (command.kp[self.slots] > 0))):
            self.holding = False

    def _pd_torque(self) -> np.ndarray:
        """Driver PD law per joint [N m], clipped to the motor effort limits."""
        q = self.data.qpos[self.qadr]
        dq = self.data.qvel[self.vadr]
        if self.holding:
            tau = self.hold_kp * (self.default_q - q) - self.hold_kd * dq
        elif self.command is None:
            tau = np.zeros_like(q)  # drivers not commanded yet: motors passive
        else:
            c, s = self.command, self.slots
            tau = c.tau[s] + c.kp[s] * (c.q[s] - q) + c.kd[s] * (c.dq[s] - dq)
            tau = np.where(c.mode[s] != 0, tau, 0.0)  # mode 0: motor disabled, passive
        return np.clip(tau, -self.effort_limit, self.effort_limit)

    def step(self, n: int = 1) -> None:
        """Advance n physics steps, recomputing the PD torque before each."""
        for _ in range(n):
            self.tau = self._pd_torque()
            self.data.ctrl[self.act] = self.tau
            mujoco.mj_step(self.model, self.data)

    # -- measurements --------------------------------------------------------------------------------

    def measure(self) -> SimState:
        """Joint and pelvis-IMU state now (no noise)."""
        m, d = self.model, self.data
        # cacc (needed for the accelerometer) is only filled by mj_rnePostConstraint.
        mujoco.mj_rnePostConstraint(m, d)
        vel = np.zeros(6)
        acc = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_SITE, self.imu_site, vel, 1)
        mujoco.mj_objectAcceleration(m, d, mujoco.mjtObj.mjOBJ_SITE, self.imu_site, acc, 1)
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, d.site_xmat[self.imu_site])
        return SimState(
            time=d.time,
            q=d.qpos[self.qadr].copy(),
            dq=d.qvel[self.vadr].copy(),
            ddq=d.qacc[self.vadr].copy(),
            tau=self.tau.copy(),
            quat=quat,
            gyro=vel[:3].copy(),
            acc=acc[3:].copy(),
        )

    def pelvis_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Pelvis position [3] m and orientation [4] w x y z, world frame (z up)."""
        return self.data.xpos[self.pelvis_body].copy(), self.data.xquat[self.pelvis_body].copy()

    def body_ids(self, names: Sequence[str]) -> list[int]:
        if list(names) == ["*"]:
            return list(range(1, self.model.nbody))
        return [self._id(mujoco.mjtObj.mjOBJ_BODY, n) for n in names]


# ---------------------------------------------------------------------------------------------------------
# ROS 2 node


def _stamp(t: float) -> Time:
    """Sim time [s] -> builtin_interfaces/Time."""
    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _pose(pos: np.ndarray, quat_wxyz: np.ndarray) -> Pose:
    p = Pose()
    p.position.x, p.position.y, p.position.z = (float(v) for v in pos)
    p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z = (float(v) for v in quat_wxyz)
    return p


class MujocoBridge(Node):
    """The G1 in MuJoCo behind /lowcmd and /lowstate (topics, services: see the module docstring)."""

    def __init__(self, name: str = "mujoco_bridge", **node_kwargs) -> None:
        super().__init__(name, automatically_declare_parameters_from_overrides=True, **node_kwargs)
        self.cfg = startup.config_from_node(
            self, BridgeConfig, "pass --ros-args --params-file config/mujoco_bridge.yaml"
        )
        self.sim = G1Sim(self.cfg)
        self.rng = np.random.default_rng(self.cfg.seed)
        # the start-state spread: a stream of its own, so that it does not shift the sensor noise (and back)
        self.start_rng = np.random.default_rng(np.random.SeedSequence(self.cfg.seed, spawn_key=(1,)))
        self.perturbations = 0  # perturb_start calls that changed the state
        self.pose_rng = np.random.default_rng(np.random.SeedSequence(self.cfg.seed, spawn_key=(2,)))
        self.pose_source = self._new_pose_source()
        self._state_queue: deque[tuple[float, LowState]] = deque()  # (measured at sim time, message)
        self._msg_buffer = LowState()
        self._cmd_queue: deque[tuple[float, MotorCommand]] = deque()  # (apply at sim time, command)
        self._remote_base = lowlevel.encode_remote()
        self._presses: list[tuple[float, int]] = []  # (release at sim time, button bits)
        try:
            self._gt_bodies = self.sim.body_ids(self.cfg.ground_truth_bodies)
        except ValueError as exc:
            raise ConfigError(f"parameters of node {self.get_name()!r}: ground_truth_bodies: {exc}") from None
        self._next_gt = 0.0
        self.bad_cmd_count = 0  # LowCmds dropped (bad CRC, wrong length, non-finite, wrong mode_machine)
        self.wrong_mode_machine_count = 0  # of those, with a mode_machine other than this robot's
        self._last_drop = ""
        self._answered = True  # lockstep: the last LowState got a LowCmd
        self._last_step_wall = -math.inf
        self.cmd_count = 0  # LowCmds accepted
        self.lag_events = 0  # real time: times the sim skipped ahead because the process lagged
        self.pub_state = self.create_publisher(LowState, "lowstate", 10)
        self.pub_gt = self.create_publisher(PoseStamped, "sim/ground_truth", 10)
        self.pub_bodies = self.create_publisher(PoseArray, "sim/body_poses", 10)
        self.pub_pose = self.create_publisher(Odometry, "odometry", 10)
        self.pub_clock = None if self.cfg.realtime else self.create_publisher(ClockMsg, "/clock", 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(LowCmd, "lowcmd", self._on_lowcmd, 10)
        self.create_subscription(String, "sim/press", self._on_press, 10)
        self.create_subscription(UInt8MultiArray, "sim/wireless_remote", self._on_remote, 10)
        self.create_service(Trigger, "sim/press_start", lambda _rq, rs: self._press_srv("start", rs))
        self.create_service(Trigger, "sim/press_select", lambda _rq, rs: self._press_srv("select", rs))
        self.create_service(Trigger, "sim/reset", self._on_reset)
        self.create_service(Trigger, "sim/perturb", self._on_perturb)
        # Stepping runs on the steady wall clock: it must not follow /clock, which this node publishes.
        self._wall = Clock(clock_type=ClockType.STEADY_TIME)
        self._wall_t0 = self._now_wall()
        self._sim_t0 = self.sim.data.time
        c = self.cfg
        # Lockstep: LowCmd callbacks step the sim; the timer only restarts it after lockstep_timeout_s.
        period = (
            1.0 / c.lowstate_rate_hz if c.realtime else c.lockstep_timeout_s / 4 if c.lockstep_timeout_s > 0 else 0.0
        )
        self.timer = self.create_timer(period, self._on_timer, clock=self._wall)
        self.create_timer(1.0, self._publish_diagnostics, clock=self._wall)
        pace = (
            "real time"
            if c.realtime
            else f"lockstep with /lowcmd (+/clock, {c.lockstep_timeout_s} s timeout)"
            if c.lockstep_timeout_s > 0
            else "as fast as possible (+/clock)"
        )
        self.get_logger().info(
            f"G1 {c.variant} in MuJoCo: physics {1 / c.physics_dt:.0f} Hz, lowstate {c.lowstate_rate_hz:.0f} Hz, "
            f"{pace}, start {c.start_pose}"
            f"{' (held until the first position LowCmd)' if c.hold_start_pose else ''}"
        )

    def _now_wall(self) -> float:
        return self._wall.now().nanoseconds * 1e-9

    @property
    def sim_time(self) -> float:
        return float(self.sim.data.time)

    # -- inputs ------------------------------------------------------------------------------------
    def _on_lowcmd(self, msg: LowCmd) -> None:
        try:
            cmd = lowlevel.lowcmd_to_command(msg, check_crc=True)
            if msg.mode_machine != self.cfg.mode_machine:  # a command meant for another robot type
                self.wrong_mode_machine_count += 1
                raise BadMessage(f"mode_machine {msg.mode_machine}, this robot is {self.cfg.mode_machine}")
        except BadMessage as exc:  # the robot drops it too; warn at most once per period
            self.bad_cmd_count += 1
            self._last_drop = str(exc)
            self.get_logger().warning(
                f"dropped LowCmd ({self.bad_cmd_count} so far): {exc}",
                throttle_duration_sec=self.cfg.bad_crc_log_period_s,
            )
        else:
            self.cmd_count += 1
            if self.cfg.cmd_latency_s > 0:
                self._cmd_queue.append((self.sim_time + self.cfg.cmd_latency_s, cmd))
            else:
                self.sim.set_command(cmd)
        if self._lockstep and not self._answered:  # the LowState was answered: next step
            self._answered = True
            self.tick()

    @property
    def _lockstep(self) -> bool:
        return not self.cfg.realtime and self.cfg.lockstep_timeout_s > 0 and not self.timer.is_canceled()

    def press(self, combo: str) -> None:
        """Hold the buttons of `combo` ('start', 'L1+A'; names of lowlevel.BUTTONS) for remote_press_s."""
        names = [n.strip() for n in combo.split("+")]
        bits = int.from_bytes(lowlevel.encode_remote(names)[2:4], "little")  # ValueError on unknown names
        self._presses.append((self.sim_time + self.cfg.remote_press_s, bits))

    @property
    def pressing(self) -> bool:
        """An emulated remote press is still held (sim time)."""
        return any(until > self.sim_time for until, _ in self._presses)

    def _on_press(self, msg: String) -> None:
        try:
            self.press(msg.data)
        except ValueError as exc:
            self.get_logger().error(f"sim/press: {exc}")

    def _press_srv(self, combo: str, response: Trigger.Response) -> Trigger.Response:
        self.press(combo)
        response.success, response.message = True, f"{combo} held for {self.cfg.remote_press_s} s"
        return response

    def _on_remote(self, msg: UInt8MultiArray) -> None:
        if len(msg.data) != lowlevel.REMOTE_SIZE:
            self.get_logger().error(f"sim/wireless_remote needs {lowlevel.REMOTE_SIZE} bytes, got {len(msg.data)}")
            return
        self._remote_base = bytes(msg.data)

    def perturb_start(self) -> bool:
        """The seeded start-state spread (start_joint_noise, start_root_vel_noise) added to the state now; False
        (nothing drawn) when both are 0. The k-th call of a bridge with a given seed draws the same numbers."""
        c = self.cfg
        if c.start_joint_noise <= 0 and c.start_root_vel_noise <= 0:
            return False
        drawn = self.sim.perturb(self.start_rng, c.start_joint_noise, c.start_root_vel_noise)
        self.perturbations += 1
        self.get_logger().info(
            f"start-state spread at sim time {self.sim_time:.3f} s (seed {c.seed}): joints "
            f"{np.abs(drawn[:-3]).max():.4f} rad max, pelvis velocity "
            f"{drawn[-3:].round(4).tolist()} m/s"
        )
        return True

    def _on_perturb(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success = self.perturb_start()
        response.message = (
            "start-state spread applied"
            if response.success
            else "start_joint_noise and start_root_vel_noise are 0: nothing to apply"
        )
        return response

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        t = self.sim_time
        self.sim.reset()
        self.pose_source = self._new_pose_source()  # a jump back to the start is no path the source walked
        self.sim.data.time = t  # sim time (and /clock) must stay monotonic
        self._cmd_queue.clear()
        response.success, response.message = True, f"reset to the {self.cfg.start_pose} pose"
        return response

    # -- stepping ----------------------------------------------------------------------------------
    def _on_timer(self) -> None:
        if not self.cfg.realtime:
            if not self._lockstep or self._now_wall() - self._last_step_wall >= self.cfg.lockstep_timeout_s:
                self.tick()  # free-running, or nobody answered (no policy node yet, a lost message)
            return
        behind = self._sim_t0 + (self._now_wall() - self._wall_t0) - self.sim_time
        n = int(behind * self.cfg.lowstate_rate_hz + 1e-6)
        if n > self.cfg.max_catchup_steps:
            # The process cannot keep up (or was paused): skip ahead instead of spiralling.
            self.lag_events += 1
            self.get_logger().warning(
                f"sim fell {behind * 1e3:.1f} ms behind real time; skipping ahead", throttle_duration_sec=5.0
            )
            self._wall_t0 += (n - 1) / self.cfg.lowstate_rate_hz
            n = 1
        for _ in range(n):
            self.tick()

    def tick(self) -> None:
        """One LowState period: apply due commands, step physics, publish clock, state and ground truth."""
        while self._cmd_queue and self._cmd_queue[0][0] <= self.sim_time + 1e-9:
            self.sim.set_command(self._cmd_queue.popleft()[1])
        self.sim.step(self.cfg.steps_per_state)
        t = self.sim_time
        self._answered = False
        self._last_step_wall = self._now_wall()
        if self.pub_clock is not None:
            self.pub_clock.publish(ClockMsg(clock=_stamp(t)))
        self._state_queue.append((t, self._lowstate(t)))
        while self._state_queue and self._state_queue[0][0] + self.cfg.state_latency_s <= t + 1e-9:
            self.pub_state.publish(self._state_queue.popleft()[1])
        if self.cfg.ground_truth_rate_hz > 0 and t + 1e-9 >= self._next_gt:
            self._next_gt = t + 1.0 / self.cfg.ground_truth_rate_hz
            self._publish_ground_truth(t)
        if self.pose_source is not None:
            pos, quat = self.sim.pelvis_pose()
            pose = self.pose_source.step(np.asarray(pos[:2], float), yaw(np.asarray(quat, float)))
            if pose is not None:
                self.pub_pose.publish(self._odometry_msg(t, *pose))

    # -- outputs -----------------------------------------------------------------------------------
    def _remote_bytes(self) -> bytes:
        t = self.sim_time
        self._presses = [(until, bits) for until, bits in self._presses if until > t]
        raw = bytearray(self._remote_base)
        bits = int.from_bytes(raw[2:4], "little")
        for _, b in self._presses:
            bits |= b
        raw[2:4] = bits.to_bytes(2, "little")
        return bytes(raw)

    def _lowstate(self, t: float) -> LowState:
        """LowState of the current sim state (noise added), slots 0..28, with CRC."""
        s, c = self.sim.measure(), self.cfg
        if c.noise_q_std > 0:
            s.q += self.rng.normal(0.0, c.noise_q_std, s.q.shape)
        if c.noise_dq_std > 0:
            s.dq += self.rng.normal(0.0, c.noise_dq_std, s.dq.shape)
        if c.noise_gyro_std > 0:
            s.gyro += self.rng.normal(0.0, c.noise_gyro_std, 3)
        if c.noise_acc_std > 0:
            s.acc += self.rng.normal(0.0, c.noise_acc_std, 3)
        q, dq, ddq, tau = (np.zeros(lowlevel.NUM_JOINTS) for _ in range(4))
        slots = self.sim.slots  # a 23-DoF model leaves its 6 missing slots at zero
        q[slots], dq[slots], ddq[slots], tau[slots] = s.q, s.dq, s.ddq, s.tau
        # Without latency the message is published (serialized) at once, so one instance can be reused:
        # building 35 MotorState objects per message costs ~0.3 ms of the 2 ms period.
        msg = self._msg_buffer if c.state_latency_s == 0 else LowState()
        return lowlevel.fill_lowstate(
            msg,
            q,
            dq,
            s.quat,
            s.gyro,
            s.acc,
            tau,
            ddq,
            mode_machine=c.mode_machine,
            tick=int(round(t * 1000)),
            wireless_remote=self._remote_bytes(),
        )

    def _publish_diagnostics(self) -> None:
        st = DiagnosticStatus(name="bcg mujoco_bridge", hardware_id="g1-sim")
        st.level = DiagnosticStatus.WARN if self.bad_cmd_count else DiagnosticStatus.OK
        st.message = f"sim time {self.sim_time:.2f} s" + (
            f"; dropped LowCmd: {self._last_drop}" if self.bad_cmd_count else ""
        )
        values = {
            "sim_time_s": f"{self.sim_time:.3f}",
            "lowcmd_accepted": str(self.cmd_count),
            "lowcmd_dropped": str(self.bad_cmd_count),
            "lowcmd_wrong_mode_machine": str(self.wrong_mode_machine_count),
            "last_dropped": self._last_drop or "-",
            "lag_events": str(self.lag_events),
        }
        st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = _stamp(self.sim_time)
        self.pub_diag.publish(arr)

    def _new_pose_source(self) -> SimulatedPoseSource | None:
        """The simulated lidar odometry, stepped once per LowState tick (None at pose_rate_hz 0)."""
        c = self.cfg
        if c.pose_rate_hz <= 0:
            return None
        tick_s = c.steps_per_state * c.physics_dt
        return SimulatedPoseSource(
            tick_s, 1.0 / c.pose_rate_hz, c.pose_latency_s, c.pose_noise_m, self.pose_rng, c.pose_drift
        )

    def _odometry_msg(self, t: float, xy: np.ndarray, heading: float, age_s: float) -> Odometry:
        """A pose from the source, stamped when it was measured (t - age_s). The source models what the node
        reads, the horizontal position (noise_m) and heading (exact): z is 0 and roll/pitch level, marked
        unmeasured by a variance of 1e6 (the ROS convention)."""
        msg = Odometry()
        msg.header.stamp = _stamp(max(0.0, t - age_s))
        msg.header.frame_id = "odom"
        msg.child_frame_id = "pelvis"
        msg.pose.pose = _pose(np.array([xy[0], xy[1], 0.0]), from_yaw(float(heading)))
        var_xy = self.cfg.pose_noise_m**2
        msg.pose.covariance = [0.0] * 36
        for k, v in enumerate((var_xy, var_xy, 1e6, 1e6, 1e6, 0.0)):
            msg.pose.covariance[7 * k] = v
        return msg

    def _publish_ground_truth(self, t: float) -> None:
        pos, quat = self.sim.pelvis_pose()
        msg = PoseStamped()
        msg.header.stamp = _stamp(t)
        msg.header.frame_id = "world"
        msg.pose = _pose(pos, quat)
        self.pub_gt.publish(msg)
        arr = PoseArray()
        arr.header = msg.header
        d = self.sim.data
        arr.poses = [_pose(d.xpos[b], d.xquat[b]) for b in self._gt_bodies]
        self.pub_bodies.publish(arr)


# ---------------------------------------------------------------------------------------------------------
# Entry point


def ros_args_with_default_params(argv: list[str], default_yamls: Sequence[str]) -> list[str]:
    """argv with `--params-file config/<yaml>` for each default file, unless argv names a params file.

    The files go right after `--ros-args` so that later `-p name:=value` overrides still win.
    """
    if "--params-file" in argv:
        return list(argv)
    files: list[str] = []
    for name in default_yamls:
        files += ["--params-file", str(resolve_config_path(name))]
    if "--ros-args" not in argv:
        return list(argv) + ["--ros-args"] + files
    i = argv.index("--ros-args") + 1
    return list(argv[:i]) + files + list(argv[i:])


def help_text() -> str:
    return startup.help_text(
        "usage: bcg-mujoco-bridge [--help] [--ros-args --params-file FILE -p name:=value ...]\n"
        "(`ros2 run bcg_policy_node mujoco_bridge`; config/mujoco_bridge.yaml is used when no "
        "--params-file is given)\n",
        __doc__,
        params_file="mujoco_bridge.yaml",
        node="mujoco_bridge",
    )


def main(argv: list[str] | None = None) -> int:
    """`ros2 run bcg_policy_node mujoco_bridge [--ros-args -p realtime:=false ...]` / `bcg-mujoco-bridge`."""
    argv = list(sys.argv if argv is None else argv)
    if startup.wants_help(argv[1:]):
        print(help_text())
        return 0
    try:
        args = ros_args_with_default_params(argv, ["mujoco_bridge.yaml"])
        startup.check_params_files(args)
    except ConfigError as exc:
        print(f"bcg-mujoco-bridge: {exc}", file=sys.stderr)
        return 2
    startup.use_robot_dds_profile()
    rclpy.init(args=args)
    try:
        node = MujocoBridge()
    except (ConfigError, ValueError) as exc:
        print(f"bcg-mujoco-bridge: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RCLError:
        if rclpy.ok():  # a SIGTERM shutdown can surface as RCLError from the wait set; anything else is real
            raise
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
