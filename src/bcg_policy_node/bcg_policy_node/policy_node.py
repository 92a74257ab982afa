"""bcg_policy_node: runs an exported policy on the G1 over unitree_hg LowState/LowCmd.

    bcg-policy-node [--help] --ros-args --params-file config/policy_node.yaml -p policy_path:=DIR

Topics: sub /lowstate (unitree_hg/LowState, best effort: matches reliable and best-effort writers), and
/odometry (nav_msgs/Odometry, parameter pose_topic: a lidar odometry's pelvis pose) only for a policy whose
contract's observation.root_source is "pose" (bcg_sim.policy.pose: RUN needs a fresh pose, silence damps);
pub /lowcmd (unitree_hg/LowCmd, reliable, CRC set, mode_machine copied from the robot), /joint_states and
/reference/joint_states (sensor_msgs/JointState), /reference/root_pose (geometry_msgs/PoseStamped, frame
`world` = the IMU's yaw-aligned frame), /diagnostics (diagnostic_msgs/DiagnosticArray),
~/transitions (std_msgs/String "SRC -> DST: cause", transient local).
Services (std_srvs/Trigger): ~/start, ~/stop, ~/damp, ~/reset.
Parameters: config/policy_node.yaml (policy_node: ros__parameters: ...), read into PolicyNodeConfig:
unknown keys, wrong types and out-of-range values are startup errors (one line, exit status 2).

Timing: one thread. Every valid LowState is answered at once from its subscription callback with one
control tick (the robot streams LowState at 500 Hz, so LowCmd follows at the same rate with the least
latency); a fallback timer, restarted by every tick, ticks 1.5 command periods after the last tick (and
every 1.5 periods while none comes), so commands (and the stale-state fault) keep coming when the robot's
stream stalls, each within the 2-period overrun limit. The policy runs every control_dt (from the
policy's metadata) on a tick. After start-up the Python heap is frozen (parameter gc_freeze). Time is the
node's clock: the steady wall clock, or /clock when use_sim_time is set (then move-to-default, stale
timeout and policy rate are in sim time).
The executor is rclpy's EventsExecutor (parameter `executor`; bench/node_latency.py measures both).
State machine and safety: see state_machine.py and safety.py. Gains: MOVE_TO_DEFAULT and HOLD use the joint
table's stand gains (bcg_sim.g1.stand_gains); RUN uses the policy's kp/kd from its metadata.
Source checks: a LowState whose mode_machine differs from the previous one, or whose tick does not
increase, is a source conflict (a second /lowstate publisher, a robot reboot): logged, counted on
/diagnostics, and for conflict_hold_s afterwards the node refuses to leave DAMPING or ZERO_TORQUE. RESET is
refused while the state is stale.
"""

from __future__ import annotations

import gc
import math
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from bcg_policy_node import lowlevel as ll
from bcg_policy_node import scheduling, startup
from bcg_policy_node.crc import lowcmd_crc
from bcg_policy_node.monitors import GcMonitor, LoopStats, SourceMonitor
from bcg_policy_node.policy_runner import PolicyFault, PolicyRunner
from bcg_policy_node.remote import RemoteMapper
from bcg_policy_node.safety import SafetyLimits, check_joint_limits, check_stale, check_tilt
from bcg_policy_node.state_machine import ACTIVE, CommandKind, Event, Mode, StateMachine, Transition
from bcg_sim.config import ConfigError, checker
from bcg_sim.g1.joints import joint_names, stand_gains
from bcg_sim.policy import load_policy, projected_gravity
from bcg_sim.quat import yaw as heading
from unitree_hg.msg import LowCmd, LowState  # noqa: F401 - LowState: the subscription's type (raw bytes)

PROG = "bcg-policy-node"
NODE_NAME = "policy_node"
PolicyRuntime = Literal["onnx", "torchscript", "auto"]  # bcg_sim.policy.load_policy's runtime
OnClipEnd = Literal["continue", "stop"]
LOG_THROTTLE_S = 1.0  # per-message warnings (rejected LowState, source conflict): at most one per this long


@dataclass(frozen=True)
class PolicyNodeConfig:
    """The policy node's parameters (config/policy_node.yaml documents each; these are the defaults)."""

    policy_path: str = ""
    policy_runtime: PolicyRuntime = "onnx"
    lowstate_topic: str = "/lowstate"
    lowcmd_topic: str = "/lowcmd"
    cmd_rate_hz: float = 500.0
    stale_timeout_s: float = 0.05
    check_lowstate_crc: bool = True
    move_to_default_s: float = 2.0
    zero_torque_auto_start_s: float = -1.0
    damping_kd: float = 8.0
    max_tilt_rad: float = 0.8
    joint_limit_margin_rad: float = 0.1
    on_clip_end: OnClipEnd = "continue"
    mode_pr: Literal[0, 1] = 0  # LowCmd.mode_pr: 0 pitch/roll ankles, 1 A/B
    remote_start: list[str] = field(default_factory=lambda: ["start"])
    remote_stop: list[str] = field(default_factory=lambda: ["X"])
    remote_damp: list[str] = field(default_factory=lambda: ["select", "L2+B"])
    remote_reset: list[str] = field(default_factory=lambda: ["L1+Y"])
    state_pub_rate_hz: float = 50.0
    diagnostics_rate_hz: float = 1.0
    shutdown_damping_s: float = 0.2
    conflict_hold_s: float = 1.0
    executor: scheduling.Executor = "events"
    rt_priority: int = 0
    nice: int = -5
    fallback_tick_periods: float = 1.5
    cpu_affinity: str | int = ""  # a cpu list; `-p cpu_affinity:=1` arrives as an integer
    gc_freeze: bool = True
    pose_topic: str = "/odometry"
    pose_timeout_s: float = 0.5

    def __post_init__(self) -> None:
        need = checker()
        need(
            self.policy_runtime in get_args(PolicyRuntime),
            "policy_runtime",
            f"must be {', '.join(get_args(PolicyRuntime))}, got {self.policy_runtime!r}",
        )
        need(self.cmd_rate_hz > 0, "cmd_rate_hz", f"must be > 0, got {self.cmd_rate_hz}")
        need(self.stale_timeout_s > 0, "stale_timeout_s", f"must be > 0, got {self.stale_timeout_s}")
        need(self.move_to_default_s >= 0, "move_to_default_s", f"must be >= 0, got {self.move_to_default_s}")
        need(self.damping_kd >= 0, "damping_kd", f"must be >= 0, got {self.damping_kd}")
        need(0 < self.max_tilt_rad <= math.pi, "max_tilt_rad", f"must be in (0, pi], got {self.max_tilt_rad}")
        need(
            self.joint_limit_margin_rad >= 0,
            "joint_limit_margin_rad",
            f"must be >= 0, got {self.joint_limit_margin_rad}",
        )
        need(
            self.on_clip_end in get_args(OnClipEnd),
            "on_clip_end",
            f"must be {' or '.join(get_args(OnClipEnd))}, got {self.on_clip_end!r}",
        )
        need(self.mode_pr in (0, 1), "mode_pr", f"must be 0 (pitch/roll) or 1 (A/B), got {self.mode_pr}")
        need(self.state_pub_rate_hz >= 0, "state_pub_rate_hz", f"must be >= 0 (0 = off), got {self.state_pub_rate_hz}")
        need(
            self.diagnostics_rate_hz >= 0,
            "diagnostics_rate_hz",
            f"must be >= 0 (0 = off), got {self.diagnostics_rate_hz}",
        )
        need(self.shutdown_damping_s >= 0, "shutdown_damping_s", f"must be >= 0, got {self.shutdown_damping_s}")
        need(self.conflict_hold_s >= 0, "conflict_hold_s", f"must be >= 0, got {self.conflict_hold_s}")
        need(
            self.executor in scheduling.EXECUTORS,
            "executor",
            f"must be {' or '.join(scheduling.EXECUTORS)}, got {self.executor!r}",
        )
        need(0 <= self.rt_priority <= 99, "rt_priority", f"must be in 0..99, got {self.rt_priority}")
        need(-20 <= self.nice <= 19, "nice", f"must be in -20..19, got {self.nice}")
        need(
            1.0 <= self.fallback_tick_periods < 2.0,
            "fallback_tick_periods",
            f"must be in [1, 2), got {self.fallback_tick_periods}",
        )
        scheduling.parse_cpu_list(self.cpu_affinity)  # a ConfigError naming the key
        need(self.pose_timeout_s > 0, "pose_timeout_s", f"must be > 0, got {self.pose_timeout_s}")


class PolicyNode(Node):
    def __init__(self) -> None:
        super().__init__(NODE_NAME, automatically_declare_parameters_from_overrides=True)
        self.cfg = cfg = startup.config_from_node(self, PolicyNodeConfig)
        if not cfg.policy_path:
            raise ConfigError(
                "parameter policy_path is empty: give an exported policy folder "
                "(e.g. `bcg-policy export-hold -o DIR` for the hold-the-default-pose policy)"
            )
        self._sim_time = bool(self.get_parameter("use_sim_time").value)
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.policy = load_policy(cfg.policy_path, runtime=cfg.policy_runtime)
        self.runner = PolicyRunner(self.policy, pose_timeout_s=cfg.pose_timeout_s)
        self._pose: tuple[np.ndarray, float, float] | None = None  # (xy [2] m, yaw rad, stamp s), newest
        self._pose_new = False  # not yet given to the runner
        c = self.policy.contract
        self.period = 1.0 / cfg.cmd_rate_hz
        self.control_dt = c.control_dt
        self._check_control_dt(c.control_dt)
        self.limits = SafetyLimits.from_params(cfg.stale_timeout_s, cfg.max_tilt_rad, cfg.joint_limit_margin_rad)
        stand_kp, stand_kd = stand_gains("29dof")
        self.sm = StateMachine(
            np.array(c.default_joint_pos),
            np.array(c.kp),
            np.array(c.kd),
            np.array(stand_kp),
            np.array(stand_kd),
            cfg.move_to_default_s,
            on_transition=self._on_transition,
        )
        self.modes_entered: set[Mode] = set()
        self.remote = RemoteMapper({e: list(getattr(cfg, f"remote_{e.value}")) for e in Event})
        self.stats = LoopStats(self.period)
        self.gc_monitor = GcMonitor()
        self.source = SourceMonitor()
        self._state: ll.RobotState | None = None
        self._state_time = -math.inf  # node-clock s of the last valid LowState
        self._last_tick_time = -math.inf
        self._conflict_time = -math.inf  # node-clock s of the last source conflict
        self._mode_machine = 0
        self._counts = {"lowstate": 0, "rejected": 0, "lowcmd": 0, "refused": 0}
        self._last_reject = ""
        self._last_refusal = ""
        self._warned_at: dict[str, float] = {}  # _warn_throttled: key -> time.monotonic() of its last warning
        self._policy_q: np.ndarray | None = None
        self._next_policy_t = 0.0
        self._tick = 0
        self._run_pending = False
        self._cmd = LowCmd()
        self._cmd_key: tuple | None = None  # what self._cmd currently holds
        self._make_ros_io()
        self.get_logger().info(
            f"policy {self.policy.path} ({self.policy.runtime}, n_obs {c.n_obs}, policy every "
            f"{c.control_dt * 1e3:.0f} ms, LowCmd per LowState, fallback {cfg.cmd_rate_hz:.0f} Hz, "
            f"{'sim time' if self._sim_time else 'wall time'}, {cfg.executor} executor); remote: "
            f"start={cfg.remote_start} stop={cfg.remote_stop} damp={cfg.remote_damp} reset={cfg.remote_reset}; "
            f"waiting for {cfg.lowstate_topic}"
        )

    # --- setup ---
    def _check_control_dt(self, control_dt: float) -> None:
        n = control_dt / self.period
        if n < 1 or abs(n - round(n)) > 1e-6:
            raise ConfigError(
                f"policy control_dt {control_dt} s is not a whole number of "
                f"{self.period} s command periods (cmd_rate_hz {self.cfg.cmd_rate_hz})"
            )

    def _make_ros_io(self) -> None:
        cfg = self.cfg
        state_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST)
        cmd_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        latched = QoSProfile(
            depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        # raw: the CDR bytes, read by lowlevel.lowstate_cdr_to_state (10x cheaper than rclpy's Python message)
        self.create_subscription(LowState, cfg.lowstate_topic, self._on_lowstate, state_qos, raw=True)
        if self.runner.uses_pose:  # the policy's contract asks for a pose source (observation.root_source)
            self.create_subscription(Odometry, cfg.pose_topic, self._on_pose, state_qos)
        self.pub_cmd = self.create_publisher(LowCmd, cfg.lowcmd_topic, cmd_qos)
        self.pub_js = self.create_publisher(JointState, "/joint_states", 10)
        self.pub_ref_js = self.create_publisher(JointState, "/reference/joint_states", 10)
        self.pub_ref_pose = self.create_publisher(PoseStamped, "/reference/root_pose", 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.pub_transitions = self.create_publisher(String, "~/transitions", latched)
        for event in Event:
            self.create_service(Trigger, f"~/{event.value}", self._service(event))
        self._names = joint_names("29dof")
        # The node clock follows /clock under use_sim_time, so the fallback then runs in sim time.
        # Fallback: a watchdog restarted by every tick (_safe_tick), so it fires fallback_tick_periods after the
        # last tick, and then every fallback_tick_periods while no LowState comes. (A timer polling at half a
        # period fired 1.5-2 periods after the last tick, right at the overrun limit, and ran 1000 Python
        # callbacks a second for nothing while LowState flowed.)
        self.timer = self.create_timer(
            self.cfg.fallback_tick_periods * self.period, self._on_timer, clock=None if self._sim_time else self._steady
        )

    def now(self) -> float:
        """The node's time in s: /clock under use_sim_time, else the steady (monotonic) wall clock."""
        clock = self.get_clock() if self._sim_time else self._steady
        return clock.now().nanoseconds * 1e-9

    def _on_pose(self, msg: Odometry) -> None:
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        yaw = float(heading(np.array([q.w, q.x, q.y, q.z])))
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if math.isfinite(p.x) and math.isfinite(p.y) and math.isfinite(yaw):
            self._pose, self._pose_new = (np.array([p.x, p.y]), yaw, stamp), True

    def pose_age(self) -> float:
        """s since the newest pose was measured, on the ROS clock its stamps use (inf: none yet)."""
        if self._pose is None:
            return math.inf
        return max(0.0, self.get_clock().now().nanoseconds * 1e-9 - self._pose[2])

    # --- inputs: every valid LowState is answered with one tick ---
    def _on_lowstate(self, data: bytes) -> None:
        now = self.now()
        try:
            state = ll.lowstate_cdr_to_state(data, check_crc=self.cfg.check_lowstate_crc)
        except ll.BadMessage as exc:
            self._counts["rejected"] += 1
            self._last_reject = why = str(exc)
            self._warn_throttled("rejected", lambda: f"rejected LowState ({self._counts['rejected']} so far): {why}")
            self._safe_tick(now)  # commands keep streaming; the state goes stale
            return
        conflict = self.source.conflict(state)
        if conflict:
            self._conflict_time = now
            self._warn_throttled("conflict", lambda: f"{conflict}; counts {self.source.counts}")
        self._state, self._state_time = state, now
        self._counts["lowstate"] += 1
        event = self.remote.update(state.remote)
        if event is not None:
            self._handle(now, event, "remote")
        self._safe_tick(now)

    def _warn_throttled(self, key: str, text) -> None:
        """Warning `text()` at most once per LOG_THROTTLE_S per key, decided before calling rclpy: its own
        throttle_duration_sec finds the caller's source line (inspect, file stats) on every call, 0.3 ms
        measured even when the message is then dropped; with a source conflict on every LowState (a second
        publisher, or bench/node_latency.py's markers) that was the largest part of a tick."""
        t = time.monotonic()
        if t - self._warned_at.get(key, -math.inf) >= LOG_THROTTLE_S:
            self._warned_at[key] = t
            self.get_logger().warning(text())

    def _on_timer(self) -> None:
        now = self.now()
        if now - self._last_tick_time >= self.cfg.fallback_tick_periods * self.period:
            self.stats.fallback_ticks += 1
            self._safe_tick(now)

    def _service(self, event: Event):
        def cb(_req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
            mode = self.sm.mode
            resp.success, why = self._handle(self.now(), event, "service")
            resp.message = f"{event.value} {'accepted' if resp.success else 'not accepted'} in {mode.value}{why}"
            return resp

        return cb

    def _refusal(self, now: float, event: Event) -> str:
        """Why `event` must not be applied now although the mode takes it ('' = fine)."""
        leaving_safe = event == Event.RESET or (event == Event.START and self.sm.mode == Mode.ZERO_TORQUE)
        if event == Event.START and self.sm.mode == Mode.HOLD and self.runner.uses_pose:
            age = self.pose_age()
            if age > self.cfg.pose_timeout_s:
                return f"no pose on {self.cfg.pose_topic}" + (f" for {age:.2f} s" if math.isfinite(age) else " yet")
        if not leaving_safe:
            return ""
        if now - self._conflict_time < self.cfg.conflict_hold_s:
            return f"source conflict {1e3 * (now - self._conflict_time):.0f} ms ago: {self.source.last}"
        age = now - self._state_time
        if event == Event.RESET and age > self.limits.stale_timeout_s:
            return "/lowstate stale" + (f" ({1e3 * age:.0f} ms old)" if math.isfinite(age) else " (none yet)")
        return ""

    def _handle(self, now: float, event: Event, source: str) -> tuple[bool, str]:
        """Apply an operator event now; (accepted, ': reason' when refused)."""
        if not self.sm.accepts(event):
            self.get_logger().info(f"ignored {event.value} from {source} in {self.sm.mode.value}")
            return False, ""
        why = self._refusal(now, event)
        if why:
            self._counts["refused"] += 1
            self._last_refusal = f"{event.value} from {source}: {why}"
            self.get_logger().warning(f"refused {self._last_refusal}")
            return False, f": {why}"
        state = self._state
        self.sm.handle(now, event, source, state.joint_pos if state is not None else None)
        return True, ""

    def _on_transition(self, t: Transition) -> None:
        self._run_pending = t.dst == Mode.RUN
        self.modes_entered.add(t.dst)
        text = f"{t.src.value} -> {t.dst.value}: {t.cause}"
        try:  # reporting must never break the transition itself
            if t.dst == Mode.DAMPING:  # rclpy: one severity per call site, hence two calls
                self.get_logger().warning(text)
            else:
                self.get_logger().info(text)
            self.pub_transitions.publish(String(data=text))
        except Exception as exc:  # noqa: BLE001
            print(f"policy_node: could not report transition {text!r}: {exc}", file=sys.stderr)

    def set_cpu_affinity(self) -> None:
        """Pin the node's threads to `cpu_affinity` (scheduling.pin_threads)."""
        scheduling.pin_threads(self.cfg.cpu_affinity, self.get_logger())

    def set_rt_priority(self) -> None:
        """The executor thread's priority: `rt_priority` or `nice` (scheduling.raise_priority)."""
        scheduling.raise_priority(self.cfg.rt_priority, self.cfg.nice, self.get_logger())

    def finish_startup(self) -> None:
        """Start-up is done (policy, ONNX session, ROS entities). With gc_freeze: collect once, then move
        every object that survived into the collector's permanent generation (gc.freeze), so later full
        collections do not scan the start-up heap (onnxruntime, numpy, rclpy, message modules): without it
        a generation-2 collection in this process took 28-39 ms (bench/README.md, node latency), a tick gap
        of many periods. Allocation-driven collections keep running (sub-ms). Then GC monitoring starts."""
        if self.cfg.gc_freeze:
            gc.collect()
            gc.freeze()
            self.gc_monitor.frozen = gc.get_freeze_count()
            self.get_logger().info(f"gc: {self.gc_monitor.frozen} start-up objects frozen")
        self.gc_monitor.start()

    @property
    def counts(self) -> dict[str, int]:
        """LowState received / rejected, LowCmd sent, operator events refused (a copy)."""
        return dict(self._counts)

    # --- control tick ---
    def _safe_tick(self, now: float) -> None:
        t0 = time.perf_counter()
        self.stats.tick(now)
        self._last_tick_time = now
        self.timer.reset()  # the fallback timer restarts from this tick
        try:
            self._tick_once(now)
        except Exception as exc:  # noqa: BLE001 - a bug must still end in damping, never in silence
            try:
                self.get_logger().error(f"control tick failed: {type(exc).__name__}: {exc}", throttle_duration_sec=1.0)
                self.sm.fault(now, f"internal error: {type(exc).__name__}: {exc}")
            finally:
                if self.sm.mode == Mode.DAMPING:
                    self._publish_cmd(CommandKind.DAMP)
        self._tick += 1
        self.stats.compute.append(time.perf_counter() - t0)

    def _tick_once(self, now: float) -> None:
        state, age = self._state, max(0.0, now - self._state_time)
        if state is not None:
            self._mode_machine = state.mode_machine
        sm = self.sm
        if sm.mode == Mode.WAIT:
            if state is None or age > self.limits.stale_timeout_s:
                return  # never commanded yet: stay silent until the robot talks
            sm.go(now, Mode.ZERO_TORQUE, "first valid LowState")
        self._check_faults(now, state, age)
        self._auto_start(now)
        if sm.mode == Mode.RUN:
            self._run_policy(now, state)
        targets = sm.targets(now, self._policy_q)
        self._publish_cmd(targets.kind, targets.q, targets.kp, targets.kd)
        self._publish_monitoring(now, state)

    def _check_faults(self, now: float, state: ll.RobotState | None, age: float) -> None:
        sm = self.sm
        if sm.mode == Mode.DAMPING:
            return
        cause = check_stale(age, self.limits)
        if cause is None and sm.mode in ACTIVE:
            cause = check_tilt(projected_gravity(state.base_quat_w), self.limits) or check_joint_limits(
                state.joint_pos, self.limits
            )
        if cause:
            sm.fault(now, cause)

    def _auto_start(self, now: float) -> None:
        wait = self.cfg.zero_torque_auto_start_s
        if self.sm.mode == Mode.ZERO_TORQUE and 0 <= wait <= now - self.sm.since:
            self._handle(now, Event.START, f"auto start after {wait} s")

    def _run_policy(self, now: float, state: ll.RobotState) -> None:
        sm = self.sm
        if self._run_pending:  # first RUN tick: reference time 0, clip aligned to the robot's heading
            self._run_pending = False
            self.runner.start(state)
            self._next_policy_t = now
        # Due within half a command period: LowStates arrive on the robot's clock, not exactly on ours.
        if now + 0.5 * self.period < self._next_policy_t:
            return
        self._next_policy_t += self.control_dt
        if self._next_policy_t < now:  # fell behind (stall): re-anchor instead of stepping in a burst
            self._next_policy_t = now + self.control_dt
        if self.runner.clip_ended and self.cfg.on_clip_end == "stop":
            sm.go(now, Mode.MOVE_TO_DEFAULT, "reference clip ended", state.joint_pos)
            return
        if self._pose_new:  # a lidar odometry's pose since the last step: its age at this step's state
            self._pose_new = False
            xy, yaw, _ = self._pose
            self.runner.observe_pose(xy, yaw, self.pose_age())
        try:
            self._policy_q = self.runner.step(state)
            self.stats.policy.append(self.runner.last_act_s)
        except PolicyFault as exc:
            sm.fault(now, str(exc))

    def _publish_cmd(self, kind: CommandKind, q=None, kp=None, kd=None) -> None:
        mm, pr = self._mode_machine, self.cfg.mode_pr
        if kind == CommandKind.NONE:
            return
        key = (kind, q.tobytes() if kind == CommandKind.PD else None)
        if key == self._cmd_key:  # same targets as last tick (HOLD, between policy steps): reuse the msg
            if self._cmd.mode_machine != mm:  # only the robot's mode_machine changed: new CRC, same targets
                self._cmd.mode_machine = mm
                self._cmd.crc = lowcmd_crc(self._cmd)
            self.pub_cmd.publish(self._cmd)
            self._counts["lowcmd"] += 1
            return
        self._cmd_key = None
        if kind == CommandKind.PD:
            try:
                ll.fill_lowcmd(self._cmd, q, kp, kd, mode_machine=mm, mode_pr=pr)
            except ValueError as exc:  # non-finite targets: never sent; damp instead
                self.sm.fault(self.now(), f"invalid targets: {exc}")
                kind = CommandKind.DAMP
        if kind == CommandKind.ZERO:
            ll.fill_zero_torque(self._cmd, mode_machine=mm, mode_pr=pr)
        elif kind == CommandKind.DAMP:
            ll.fill_damping(self._cmd, self.cfg.damping_kd, mode_machine=mm, mode_pr=pr)
        self._cmd_key = (kind, q.tobytes() if kind == CommandKind.PD else None)  # kp/kd are fixed per kind
        self.pub_cmd.publish(self._cmd)
        self._counts["lowcmd"] += 1

    # --- monitoring: joint states, reference ghost, diagnostics ---
    def _every(self, rate_hz: float) -> bool:
        n = max(1, int(round(self.cfg.cmd_rate_hz / rate_hz))) if rate_hz > 0 else 0
        return n > 0 and self._tick % n == 0

    def _publish_monitoring(self, now: float, state: ll.RobotState | None) -> None:
        if state is not None and self._every(self.cfg.state_pub_rate_hz):
            stamp = self.get_clock().now().to_msg()
            js = JointState(
                name=self._names,
                position=state.joint_pos.tolist(),
                velocity=state.joint_vel.tolist(),
                effort=state.joint_tau.tolist(),
            )
            js.header.stamp = stamp
            self.pub_js.publish(js)
            if self.sm.mode == Mode.RUN:
                self._publish_reference(stamp)
        if self._every(self.cfg.diagnostics_rate_hz):
            self._publish_diagnostics(now)

    def _publish_reference(self, stamp) -> None:
        ref = self.runner.reference_pose()
        js = JointState(name=self._names, position=ref["joint_pos"].tolist())
        js.header.stamp = stamp
        self.pub_ref_js.publish(js)
        pose = PoseStamped()
        pose.header.stamp, pose.header.frame_id = stamp, "world"
        p, q = ref["root_pos_w"], ref["root_quat_w"]
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = map(float, p)
        o = pose.pose.orientation
        o.w, o.x, o.y, o.z = map(float, q)
        self.pub_ref_pose.publish(pose)

    def _publish_diagnostics(self, now: float) -> None:
        age = max(0.0, now - self._state_time)
        st = DiagnosticStatus(name="bcg_policy_node: control", hardware_id="g1")
        mode = self.sm.mode
        conflicted = now - self._conflict_time < self.cfg.conflict_hold_s
        st.level = (
            DiagnosticStatus.ERROR
            if mode == Mode.DAMPING and self.sm.last_fault
            else DiagnosticStatus.WARN
            if mode in (Mode.WAIT, Mode.DAMPING) or conflicted
            else DiagnosticStatus.OK
        )
        st.message = mode.value + (f"; source conflict: {self.source.last}" if conflicted else "")
        values = {
            "mode": mode.value,
            "last_fault": self.sm.last_fault or "-",
            "last_rejected": self._last_reject or "-",
            "last_refused": self._last_refusal or "-",
            "last_source_conflict": self.source.last or "-",
            "lowstate_age_ms": f"{1e3 * age:.1f}" if math.isfinite(age) else "inf",
            **{k: str(v) for k, v in self._counts.items()},
            **{k: str(v) for k, v in self.source.counts.items()},
            **{k: f"{v:.3f}" for k, v in self.stats.summary().items()},
            **self.gc_monitor.summary(),
        }
        st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(arr)

    # --- shutdown ---
    def send_shutdown_damping(self) -> None:
        """Deliberate shutdown: if the robot was ever commanded, end with damping commands (wall time)."""
        if self.sm.mode == Mode.WAIT:
            return
        if self.sm.mode != Mode.DAMPING:
            self.sm.go(self.now(), Mode.DAMPING, "node shutdown")
        end = time.monotonic() + self.cfg.shutdown_damping_s
        while time.monotonic() < end:
            self._publish_cmd(CommandKind.DAMP)
            time.sleep(self.period)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    if startup.wants_help(argv[1:]):
        print(startup.help_text("", __doc__, PolicyNodeConfig))
        return 0
    try:
        startup.check_params_files(argv)
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    startup.use_robot_dds_profile()
    # Our own signal handling: rclpy's would shut the context down before we could send damping.
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    stop: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _f: stop.append(signum))
    try:
        node = PolicyNode()
    except Exception as exc:  # noqa: BLE001 - one clear startup line; nothing was commanded yet
        kind = "" if isinstance(exc, (ConfigError, ValueError, OSError)) else f"{type(exc).__name__}: "
        print(f"{PROG}: cannot start: {kind}{exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = scheduling.make_executor(node.cfg.executor)
    executor.add_node(node)
    try:
        node.set_cpu_affinity()
    except ConfigError as exc:
        print(f"{PROG}: cannot start: {exc}", file=sys.stderr)
        node.destroy_node()
        rclpy.try_shutdown()
        return 2
    node.finish_startup()
    node.set_rt_priority()
    try:
        while not stop:  # spin_once returns at least every 0.1 s, so a signal is seen promptly
            executor.spin_once(timeout_sec=0.1)
    finally:
        commanded = node.sm.mode != Mode.WAIT
        node.send_shutdown_damping()
        node.get_logger().info(
            "shut down (last commands: damping)" if commanded else "shut down (the robot was never commanded)"
        )
        executor.shutdown(timeout_sec=1.0)
        node.gc_monitor.close()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
