"""Helpers for tests that run real rclpy processes on loopback.

- `isolated_domain()`: a ROS_DOMAIN_ID of this test session's own, so concurrent test runs on the same
  machine (and the other nodes people run) never see our /lowstate and /lowcmd.
- `NodeProcess`: a node in a subprocess (stdout+stderr to a log file), stopped with SIGINT.
- `RosSide`: an rclpy context + executor thread in the pytest process.
- `FakeRobot`: publishes LowState (CRC set) at a rate, records every LowCmd, follows PD targets
  kinematically if asked, and can corrupt its messages (bad CRC, NaN) or go silent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def isolated_domain() -> int:
    """Pick (once per process) and export a ROS_DOMAIN_ID in 1..100 unlikely to be used by others."""
    if "BCG_TEST_DOMAIN" not in os.environ:
        os.environ["BCG_TEST_DOMAIN"] = str(1 + (os.getpid() * 7919) % 100)
    os.environ["ROS_DOMAIN_ID"] = os.environ["BCG_TEST_DOMAIN"]
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    return int(os.environ["ROS_DOMAIN_ID"])


def wait_for(pred: Callable[[], bool], timeout: float, what: str = "condition", poll: float = 0.01) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class NodeProcess:
    """A python module run as a node in its own process (same env + our ROS_DOMAIN_ID)."""

    def __init__(self, module: str, args: list[str], log_path: Path):
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", module, *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
            cwd=REPO,
        )

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def policy_node_args(policy_path: str | Path, **params) -> list[str]:
    """Arguments for `python -m bcg_policy_node.policy_node` with config/policy_node.yaml and overrides."""
    args = [
        "--ros-args",
        "--params-file",
        str(REPO / "config" / "policy_node.yaml"),
        "-p",
        f"policy_path:={policy_path}",
    ]
    for k, v in params.items():
        v = str(v).lower() if isinstance(v, bool) else v
        args += ["-p", f"{k}:={v}"]
    return args


class RosSide:
    """rclpy in the pytest process: its own context, a node and an executor spinning in a thread."""

    def __init__(self, name: str = "test_side"):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        isolated_domain()
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        """executor.spin, surviving a test's destroy_subscription: destroying an entity while this thread builds
        its wait set raises InvalidHandle here, which ended the thread and with it every later callback (seen
        once in CI under load: test_remote_press_and_ground_truth then never received /sim/ground_truth)."""
        from rclpy._rclpy_pybind11 import InvalidHandle
        from rclpy.executors import ExternalShutdownException, ShutdownException

        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except InvalidHandle:
                continue
            except (ShutdownException, ExternalShutdownException):  # close()
                return

    def call_trigger(self, service: str, timeout: float = 5.0):
        """Call a std_srvs/Trigger service. Clients are created once per service and kept: destroying an
        entity while the executor thread spins waits for that thread (the suspected cause of 400 ms gaps in
        the stand-in robot's LowState stream, which shares this node, seen once in a CI-like run)."""
        from std_srvs.srv import Trigger

        if not hasattr(self, "_clients"):
            self._clients = {}
        cli = self._clients.get(service)
        if cli is None:
            cli = self._clients[service] = self.node.create_client(Trigger, service)
        if not cli.wait_for_service(timeout_sec=timeout):
            raise AssertionError(f"service {service} not available")
        fut = cli.call_async(Trigger.Request())
        wait_for(fut.done, timeout, f"{service} response")
        return fut.result()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.context.try_shutdown()


class FakeRobot:
    """A kinematic stand-in for the G1 on /lowstate and /lowcmd.

    q starts at `q0`; with follow=True the measured q jumps to each commanded target when kp > 0 (an ideal
    position servo), which makes commanded targets directly visible in the state. Every received LowCmd
    is recorded with its CRC validity.
    """

    def __init__(self, ros: RosSide, q0: np.ndarray, rate_hz: float = 200.0, mode_machine: int = 5):
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        from bcg_policy_node import lowlevel as ll
        from bcg_policy_node.crc import lowcmd_crc, lowstate_crc
        from unitree_hg.msg import LowCmd, LowState

        self.ll = ll
        self._lowcmd_crc, self._lowstate_crc = lowcmd_crc, lowstate_crc
        self.ros = ros
        self.q = np.array(q0, dtype=np.float64)
        self.quat = np.array([1.0, 0.0, 0.0, 0.0])
        self.buttons: tuple[str, ...] = ()
        self.mode_machine = mode_machine
        self.follow = True
        self.publishing = True
        self.corrupt: str | None = None  # None | "crc" | "nan"
        self.rate_hz = rate_hz
        self.cmds: list[tuple[float, object, bool]] = []  # (time, MotorCommand or None, crc_ok)
        self.transitions: list[str] = []
        self._lock = threading.Lock()
        self._msg = LowState()
        self._tick = 0
        qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST)
        node = ros.node
        self.pub = node.create_publisher(LowState, "/lowstate", qos)
        node.create_subscription(LowCmd, "/lowcmd", self._on_cmd, 50)
        latched = QoSProfile(
            depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(String, "/policy_node/transitions", self._on_transition, latched)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    # --- recording ---
    def _on_cmd(self, msg) -> None:
        ok = self._lowcmd_crc(msg) == msg.crc
        cmd = self.ll.lowcmd_to_command(msg, check_crc=False)
        with self._lock:
            self.cmds.append((time.monotonic(), cmd, ok))
            if self.follow and np.all(cmd.kp > 0):
                self.q = cmd.q.copy()

    def _on_transition(self, msg) -> None:
        with self._lock:
            self.transitions.append(msg.data)

    def modes(self) -> list[str]:
        """Destination modes in order, e.g. ['ZERO_TORQUE', 'MOVE_TO_DEFAULT', ...]."""
        with self._lock:
            return [t.split(" -> ")[1].split(":")[0] for t in self.transitions]

    def mode(self) -> str:
        m = self.modes()
        return m[-1] if m else "WAIT"

    def cmds_since(self, t0: float) -> list:
        with self._lock:
            return [c for c in self.cmds if c[0] >= t0]

    def last_cmd(self):
        with self._lock:
            return self.cmds[-1] if self.cmds else None

    # --- publishing ---
    def _loop(self) -> None:
        period = 1.0 / self.rate_hz
        next_t = time.monotonic()
        while not self._stop.is_set():
            if self.publishing:
                self._publish()
            next_t += period
            time.sleep(max(0.0, next_t - time.monotonic()))

    def _publish(self) -> None:
        with self._lock:
            q = self.q.copy()
        self._tick += 1
        msg = self.ll.fill_lowstate(
            self._msg,
            q,
            np.zeros(29),
            self.quat,
            np.zeros(3),
            mode_machine=self.mode_machine,
            tick=self._tick * 5,
            wireless_remote=self.ll.encode_remote(self.buttons),
        )
        if self.corrupt == "crc":
            msg.crc ^= 0xFFFF
        elif self.corrupt == "nan":
            msg.motor_state[4].q = float("nan")
            msg.crc = self._lowstate_crc(msg)
        self.pub.publish(msg)

    def hold(self, *buttons: str, min_s: float = 0.1, answers: int = 5) -> None:
        """Hold these buttons on the wireless remote (none: release) for at least min_s and until the node has
        answered `answers` LowStates since, so that it saw them however loaded the machine is."""
        self.buttons = tuple(buttons)
        t0 = time.monotonic()
        time.sleep(min_s)
        wait_for(
            lambda: len(self.cmds_since(t0)) >= answers,
            30,
            f"{answers} LowCmds with {'+'.join(buttons) or 'no button'} on the remote",
        )

    def press(self, *buttons: str) -> None:
        """Hold buttons on the wireless remote, then release them (each seen by the node)."""
        self.hold(*buttons)
        self.hold()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
