"""bcg_policy_node: runs an exported policy on the G1 over unitree_hg LowState/LowCmd.

Topics: sub /lowstate (unitree_hg/LowState, best effort: matches reliable and best-effort writers);
pub /lowcmd (unitree_hg/LowCmd, reliable, CRC set, mode_machine copied from the robot), /joint_states and
/reference/joint_states (sensor_msgs/JointState), /reference/root_pose (geometry_msgs/PoseStamped, frame
`world` = the IMU's yaw-aligned frame), /diagnostics (diagnostic_msgs/DiagnosticArray),
~/transitions (std_msgs/String "SRC -> DST: cause", transient local).
Services (std_srvs/Trigger): ~/start, ~/stop, ~/damp, ~/reset.
Parameters: config/policy_node.yaml (policy_node: ros__parameters: ...).

Timing: a dedicated loop thread ticks at cmd_rate_hz (500 Hz) with absolute deadlines and sends a LowCmd
every tick (holding the latest targets); the policy runs every control_dt (from the policy's metadata) on
a tick. The ROS executor (subscription, services) runs in another thread and only stores the latest
validated state and queues operator events, so the loop never waits on ROS callbacks.
State machine and safety: see state_machine.py and safety.py. Gains: MOVE_TO_DEFAULT and HOLD use the joint
table's stand gains (bcg_sim.g1.stand_gains); RUN uses the policy's kp/kd from its metadata.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from collections import deque
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from unitree_hg.msg import LowCmd, LowState

from bcg_policy_node import lowlevel as ll
from bcg_policy_node.policy_runner import PolicyFault, PolicyRunner
from bcg_policy_node.safety import SafetyLimits, check_joint_limits, check_stale, check_tilt
from bcg_policy_node.state_machine import ACTIVE, Event, Mode, StateMachine, Transition
from bcg_sim.g1.joints import joint_names, stand_gains
from bcg_sim.policy import load_policy, projected_gravity

PARAMS: dict[str, Any] = {  # name -> default; config/policy_node.yaml documents each
    "policy_path": "",
    "policy_runtime": "onnx",
    "lowstate_topic": "/lowstate",
    "lowcmd_topic": "/lowcmd",
    "cmd_rate_hz": 500.0,
    "stale_timeout_s": 0.05,
    "check_lowstate_crc": True,
    "move_to_default_s": 2.0,
    "zero_torque_auto_start_s": -1.0,
    "damping_kd": 8.0,
    "max_tilt_rad": 0.8,
    "joint_limit_margin_rad": 0.1,
    "on_clip_end": "continue",
    "mode_pr": 0,
    "remote_start": ["start"],
    "remote_stop": ["X"],
    "remote_damp": ["select", "L2+B"],
    "remote_reset": ["L1+Y"],
    "state_pub_rate_hz": 50.0,
    "diagnostics_rate_hz": 1.0,
    "shutdown_damping_s": 0.2,
    "gil_switch_interval_s": 0.0005,
    "rt_priority": 0,
}


class RemoteMapper:
    """Wireless-remote buttons -> operator events. A chord ("L2+B") fires when all its buttons are held and
    one of them was pressed in this message; priority damp > stop > reset > start."""

    ORDER = (Event.DAMP, Event.STOP, Event.RESET, Event.START)

    def __init__(self, chords: dict[Event, list[str]]):
        self._chords = {}
        for event, specs in chords.items():
            sets = [frozenset(s.split("+")) for s in specs]
            for s in sets:
                unknown = s - set(ll.BUTTONS)
                if unknown:
                    raise ValueError(f"remote_{event.value}: unknown button(s) {sorted(unknown)}; known {ll.BUTTONS}")
            self._chords[event] = sets
        self._held: frozenset[str] = frozenset()

    def update(self, remote: ll.RemoteState) -> Event | None:
        pressed = remote.buttons - self._held
        self._held = remote.buttons
        if not pressed:
            return None
        for event in self.ORDER:
            if any(c <= remote.buttons and c & pressed for c in self._chords.get(event, ())):
                return event
        return None


class LoopStats:
    """Control-loop timing over the last N ticks: period (tick to tick) and compute time, in s."""

    def __init__(self, nominal_s: float, n: int = 2000):
        self.nominal = nominal_s
        self.period = deque(maxlen=n)
        self.compute = deque(maxlen=n)
        self.policy = deque(maxlen=n // 10)
        self.overruns = 0  # ticks that started more than one period late

    def summary(self) -> dict[str, float]:
        def pct(d, q):
            return 1e3 * float(np.percentile(np.asarray(d), q)) if d else float("nan")

        return {"period_p50_ms": pct(self.period, 50), "period_p99_ms": pct(self.period, 99),
                "period_max_ms": pct(self.period, 100), "compute_p99_ms": pct(self.compute, 99),
                "policy_p99_ms": pct(self.policy, 99), "overruns": float(self.overruns)}


class PolicyNode(Node):
    def __init__(self) -> None:
        super().__init__("policy_node")
        self.p = {k: self.declare_parameter(k, v).value for k, v in PARAMS.items()}
        self._check_params()
        sys.setswitchinterval(self.p["gil_switch_interval_s"])  # loop thread gets the GIL back quickly
        self.policy = self._load_policy()
        self.runner = PolicyRunner(self.policy)
        c = self.policy.contract
        self.decimation = self._decimation(c.control_dt)
        self.limits = SafetyLimits.from_params(self.p["stale_timeout_s"], self.p["max_tilt_rad"],
                                               self.p["joint_limit_margin_rad"])
        stand_kp, stand_kd = stand_gains("29dof")
        self.sm = StateMachine(np.array(c.default_joint_pos), np.array(c.kp), np.array(c.kd),
                               np.array(stand_kp), np.array(stand_kd),
                               self.p["move_to_default_s"], on_transition=self._on_transition)
        self.remote = RemoteMapper({e: list(self.p[f"remote_{e.value}"]) for e in Event})
        self.stats = LoopStats(1.0 / self.p["cmd_rate_hz"])
        self._lock = threading.Lock()
        self._state: ll.RobotState | None = None
        self._state_time = -math.inf  # monotonic s of the last valid LowState
        self._mode_machine = 0
        self._events: deque[tuple[Event, str]] = deque()
        self._counts = {"lowstate": 0, "rejected": 0, "lowcmd": 0}
        self._last_reject = ""
        self._policy_q: np.ndarray | None = None
        self._tick = 0
        self._run_tick0 = 0
        self._run_pending = False
        self._cmd = LowCmd()
        self._cmd_key: tuple | None = None  # what self._cmd currently holds
        self._make_ros_io()
        self.get_logger().info(
            f"policy {self.policy.path} ({self.policy.runtime}, n_obs {c.n_obs}, policy every "
            f"{c.control_dt * 1e3:.0f} ms = {self.decimation} ticks at {self.p['cmd_rate_hz']:.0f} Hz); "
            f"remote: start={self.p['remote_start']} stop={self.p['remote_stop']} damp={self.p['remote_damp']} "
            f"reset={self.p['remote_reset']}; waiting for {self.p['lowstate_topic']}")

    # --- setup ---
    def _check_params(self) -> None:
        p = self.p
        if not p["policy_path"]:
            raise ValueError("parameter policy_path is empty: give an exported policy folder "
                             "(e.g. `bcg-policy export-hold -o DIR` for the hold-the-default-pose policy)")
        if p["on_clip_end"] not in ("continue", "stop"):
            raise ValueError(f"on_clip_end must be 'continue' or 'stop', got {p['on_clip_end']!r}")
        if p["cmd_rate_hz"] <= 0 or p["stale_timeout_s"] <= 0 or p["damping_kd"] < 0:
            raise ValueError("cmd_rate_hz and stale_timeout_s must be > 0, damping_kd >= 0")

    def _load_policy(self):
        return load_policy(self.p["policy_path"], runtime=self.p["policy_runtime"])

    def _decimation(self, control_dt: float) -> int:
        n = control_dt * self.p["cmd_rate_hz"]
        if n < 1 or abs(n - round(n)) > 1e-6:
            raise ValueError(f"policy control_dt {control_dt} s is not a whole number of "
                             f"{1 / self.p['cmd_rate_hz']} s command ticks")
        return int(round(n))

    def _make_ros_io(self) -> None:
        state_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST)
        cmd_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        latched = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(LowState, self.p["lowstate_topic"], self._on_lowstate, state_qos)
        self.pub_cmd = self.create_publisher(LowCmd, self.p["lowcmd_topic"], cmd_qos)
        self.pub_js = self.create_publisher(JointState, "/joint_states", 10)
        self.pub_ref_js = self.create_publisher(JointState, "/reference/joint_states", 10)
        self.pub_ref_pose = self.create_publisher(PoseStamped, "/reference/root_pose", 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.pub_transitions = self.create_publisher(String, "~/transitions", latched)
        for event in Event:
            self.create_service(Trigger, f"~/{event.value}", self._service(event))
        self._names = joint_names("29dof")

    # --- ROS callbacks (executor thread): validate, store, queue; never command from here ---
    def _on_lowstate(self, msg: LowState) -> None:
        try:
            state = ll.lowstate_to_state(msg, check_crc=self.p["check_lowstate_crc"])
        except ll.BadMessage as exc:
            self._counts["rejected"] += 1
            self._last_reject = str(exc)
            self.get_logger().warning(f"rejected LowState ({self._counts['rejected']} so far): {exc}",
                                   throttle_duration_sec=1.0)
            return
        event = self.remote.update(state.remote)
        with self._lock:
            self._state, self._state_time = state, time.monotonic()
            self._counts["lowstate"] += 1
            if event is not None:
                self._events.append((event, "remote"))

    def _service(self, event: Event):
        def cb(_req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
            mode = self.sm.mode
            resp.success = self.sm.accepts(event)
            if resp.success:
                with self._lock:
                    self._events.append((event, "service"))
                resp.message = f"{event.value} accepted in {mode.value}"
            else:
                resp.message = f"{event.value} not accepted in {mode.value}"
            return resp

        return cb

    def _on_transition(self, t: Transition) -> None:
        self._run_pending = t.dst == Mode.RUN
        text = f"{t.src.value} -> {t.dst.value}: {t.cause}"
        try:  # reporting must never break the transition itself
            if t.dst == Mode.DAMPING:  # rclpy: one severity per call site, hence two calls
                self.get_logger().warning(text)
            else:
                self.get_logger().info(text)
            self.pub_transitions.publish(String(data=text))
        except Exception as exc:  # noqa: BLE001
            print(f"policy_node: could not report transition {text!r}: {exc}", file=sys.stderr)

    # --- control loop (its own thread) ---
    def run_loop(self, stop: threading.Event) -> None:
        """Tick at cmd_rate_hz until `stop` is set. Deadlines are absolute, so jitter does not accumulate."""
        self._set_rt_priority()
        period = 1.0 / self.p["cmd_rate_hz"]
        next_t = time.monotonic()
        last_start = None
        while not stop.is_set():
            now = time.monotonic()
            if last_start is not None:
                self.stats.period.append(now - last_start)
            last_start = now
            self._safe_tick(now)
            self.stats.compute.append(time.monotonic() - now)
            next_t += period
            delay = next_t - time.monotonic()
            if delay < -period:  # more than a tick late: count it and re-anchor instead of bursting
                self.stats.overruns += 1
                next_t = time.monotonic()
            elif delay > 0:
                time.sleep(delay)

    def _set_rt_priority(self) -> None:
        """SCHED_FIFO for the calling (loop) thread when rt_priority > 0 (needs CAP_SYS_NICE / rtprio limit)."""
        prio = int(self.p["rt_priority"])
        if prio <= 0:
            return
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
            self.get_logger().info(f"control loop runs SCHED_FIFO priority {prio}")
        except (PermissionError, OSError, AttributeError) as exc:
            self.get_logger().warning(f"rt_priority {prio} not applied ({exc}); running with normal scheduling")

    def tick(self, now: float | None = None) -> None:
        """One control tick (what run_loop does every 1/cmd_rate_hz s), for lockstep runners such as
        bcg-sim2sim --fast. `now`: monotonic s (default: now)."""
        self._safe_tick(time.monotonic() if now is None else now)

    @property
    def counts(self) -> dict[str, int]:
        """LowState received / rejected, LowCmd sent (a copy)."""
        with self._lock:
            return dict(self._counts)

    def _safe_tick(self, now: float) -> None:
        try:
            self._tick_once(now)
        except Exception as exc:  # noqa: BLE001 - a bug must still end in damping, never in silence
            try:
                self.get_logger().error(f"control tick failed: {type(exc).__name__}: {exc}",
                                        throttle_duration_sec=1.0)
                self.sm.fault(now, f"internal error: {type(exc).__name__}: {exc}")
            finally:
                if self.sm.mode == Mode.DAMPING:
                    self._publish_cmd("damp")
        self._tick += 1

    def _tick_once(self, now: float) -> None:
        with self._lock:
            state, age = self._state, max(0.0, time.monotonic() - self._state_time)
            events = list(self._events)
            self._events.clear()
        if state is not None:
            self._mode_machine = state.mode_machine
        sm = self.sm
        if sm.mode == Mode.WAIT:
            if state is None or age > self.limits.stale_timeout_s:
                return  # never commanded yet: stay silent until the robot talks
            sm.go(now, Mode.ZERO_TORQUE, "first valid LowState")
        self._check_faults(now, state, age)
        for event, source in events:
            if not sm.handle(now, event, source, state.joint_pos if state is not None else None):
                self.get_logger().info(f"ignored {event.value} from {source} in {sm.mode.value}")
        self._auto_start(now, state)
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
            cause = (check_tilt(projected_gravity(state.base_quat_w), self.limits)
                     or check_joint_limits(state.joint_pos, self.limits))
        if cause:
            sm.fault(now, cause)

    def _auto_start(self, now: float, state: ll.RobotState | None) -> None:
        wait = self.p["zero_torque_auto_start_s"]
        if self.sm.mode == Mode.ZERO_TORQUE and 0 <= wait <= now - self.sm.since:
            self.sm.handle(now, Event.START, f"auto start after {wait} s", state.joint_pos)

    def _run_policy(self, now: float, state: ll.RobotState) -> None:
        sm = self.sm
        if self._run_pending:  # first RUN tick: reference time 0, clip aligned to the robot's heading
            self._run_pending = False
            self.runner.start(state)
            self._run_tick0 = self._tick
        if (self._tick - self._run_tick0) % self.decimation:
            return
        if self.runner.clip_ended and self.p["on_clip_end"] == "stop":
            sm.go(now, Mode.MOVE_TO_DEFAULT, "reference clip ended", state.joint_pos)
            return
        try:
            self._policy_q = self.runner.step(state)
            self.stats.policy.append(self.runner.last_act_s)
        except PolicyFault as exc:
            sm.fault(now, str(exc))

    def _publish_cmd(self, kind: str, q=None, kp=None, kd=None) -> None:
        mm, pr = self._mode_machine, self.p["mode_pr"]
        if kind == "none":
            return
        key = (kind, mm, q.tobytes() if kind == "pd" else None)
        if key == self._cmd_key:  # same targets as last tick (HOLD, between policy steps): reuse msg + CRC
            self.pub_cmd.publish(self._cmd)
            self._counts["lowcmd"] += 1
            return
        self._cmd_key = None
        if kind == "pd":
            try:
                ll.fill_lowcmd(self._cmd, q, kp, kd, mode_machine=mm, mode_pr=pr)
            except ValueError as exc:  # non-finite targets: never sent; damp instead
                self.sm.fault(time.monotonic(), f"invalid targets: {exc}")
                kind = "damp"
        if kind == "zero":
            ll.fill_zero_torque(self._cmd, mode_machine=mm, mode_pr=pr)
        elif kind == "damp":
            ll.fill_damping(self._cmd, self.p["damping_kd"], mode_machine=mm, mode_pr=pr)
        self._cmd_key = (kind, mm, q.tobytes() if kind == "pd" else None)  # kp/kd are fixed per kind
        self.pub_cmd.publish(self._cmd)
        self._counts["lowcmd"] += 1

    # --- monitoring: joint states, reference ghost, diagnostics ---
    def _every(self, rate_hz: float) -> bool:
        n = max(1, int(round(self.p["cmd_rate_hz"] / rate_hz))) if rate_hz > 0 else 0
        return n > 0 and self._tick % n == 0

    def _publish_monitoring(self, now: float, state: ll.RobotState | None) -> None:
        if state is not None and self._every(self.p["state_pub_rate_hz"]):
            stamp = self.get_clock().now().to_msg()
            js = JointState(name=self._names, position=state.joint_pos.tolist(),
                            velocity=state.joint_vel.tolist(), effort=state.joint_tau.tolist())
            js.header.stamp = stamp
            self.pub_js.publish(js)
            if self.sm.mode == Mode.RUN:
                self._publish_reference(stamp)
        if self._every(self.p["diagnostics_rate_hz"]):
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
        with self._lock:
            age = max(0.0, time.monotonic() - self._state_time)
            counts = dict(self._counts)
        st = DiagnosticStatus(name="bcg_policy_node: control", hardware_id="g1")
        mode = self.sm.mode
        st.level = (DiagnosticStatus.ERROR if mode == Mode.DAMPING and self.sm.last_fault
                    else DiagnosticStatus.WARN if mode in (Mode.WAIT, Mode.DAMPING) else DiagnosticStatus.OK)
        st.message = mode.value
        values = {"mode": mode.value, "last_fault": self.sm.last_fault or "-",
                  "last_rejected": self._last_reject or "-",
                  "lowstate_age_ms": f"{1e3 * age:.1f}" if math.isfinite(age) else "inf",
                  **{k: str(v) for k, v in counts.items()},
                  **{k: f"{v:.3f}" for k, v in self.stats.summary().items()}}
        st.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(arr)

    # --- shutdown ---
    def send_shutdown_damping(self) -> None:
        """Deliberate shutdown: if the robot was ever commanded, end with damping commands."""
        if self.sm.mode == Mode.WAIT:
            return
        if self.sm.mode != Mode.DAMPING:
            self.sm.go(time.monotonic(), Mode.DAMPING, "node shutdown")
        period = 1.0 / self.p["cmd_rate_hz"]
        end = time.monotonic() + self.p["shutdown_damping_s"]
        while time.monotonic() < end:
            self._publish_cmd("damp")
            time.sleep(period)


def main(argv: list[str] | None = None) -> int:
    # Our own signal handling: rclpy's would shut the context down before we could send damping.
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        node = PolicyNode()
    except Exception as exc:  # noqa: BLE001 - report a clear startup error; nothing was commanded yet
        print(f"policy_node: cannot start: {exc}", file=sys.stderr)
        rclpy.shutdown()
        return 1
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    stop_spin = threading.Event()

    def spin() -> None:  # spin_once in a loop so that shutdown can stop it before anything is destroyed
        while not stop_spin.is_set():
            executor.spin_once(timeout_sec=0.05)

    spinner = threading.Thread(target=spin, name="ros-executor", daemon=True)
    spinner.start()
    try:
        node.run_loop(stop)
    finally:
        commanded = node.sm.mode != Mode.WAIT
        node.send_shutdown_damping()
        node.get_logger().info("shut down (last commands: damping)" if commanded
                               else "shut down (the robot was never commanded)")
        stop_spin.set()
        spinner.join(2.0)
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
