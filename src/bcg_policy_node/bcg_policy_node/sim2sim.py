"""bcg-sim2sim: MuJoCo bridge + policy node (+ bag recorder) in one process, for pip installs without launch.

    bcg-sim2sim --policy DIR [--duration S] [--record BAG] [--start] [--realtime | --fast]
                [--ros-args -p mujoco_bridge:start_pose:=lying ...]

The nodes and parameter files are those of `ros2 launch g1_bringup sim2sim.launch.py`:
config/mujoco_bridge.yaml and config/policy_node.yaml (plus the policy path and mode given here). All
nodes share ONE executor; the topics are the real DDS topics, so other processes (a replay, rviz on a
full ROS install, `bcg-replay --check-policy` on the recorded bag) see the same traffic.

Modes:
- --realtime: the bridge steps on a wall-clock timer and the policy node answers each LowState, on the
  wall clock, exactly as in deployment (one executor thread). Short of CPU the bridge lags and skips ahead,
  and the policy node's 50 ms stale-state check may fault to DAMPING -- as it would on a robot whose state
  stream stalls.
- --fast (default): lockstep, as fast as the CPU allows: bridge tick (one LowState period) -> the policy node
  answers that LowState with one control tick -> its LowCmd reaches the bridge. Sim time (and /clock)
  advances by exactly one LowState period per tick and the policy node runs on /clock (use_sim_time), so
  move-to-default time, stale timeout and policy rate are sim time: results do not depend on machine load.
--start presses the emulated remote's start button when the policy node waits in ZERO_TORQUE (it then
moves to the default pose) and again once it reports HOLD (it then runs the policy); each press is
released before the next. With the second press the bridge adds its seeded start-state spread
(mujoco_bridge start_joint_noise / start_root_vel_noise, seed; 0 by default): the policy's first
observation is of the perturbed state, as in bcg-eval's MuJoCo runs.

Exit status: 0 after --duration s of sim time, 1 if the policy node ended in DAMPING after a fault or
--start was given and the policy never ran (RUN not reached), 2 on bad arguments or configuration
(one line), 130 when interrupted (SIGINT/SIGTERM; the summary line is still printed).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import rclpy
import yaml
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from bcg_policy_node import startup
from bcg_policy_node.bags import DEFAULT_TOPICS, BagError, BagRecorder
from bcg_policy_node.mujoco_bridge import MujocoBridge, ros_args_with_default_params
from bcg_policy_node.policy_node import PolicyNode
from bcg_policy_node.state_machine import Mode
from bcg_sim.config import ConfigError
from bcg_sim.policy import PolicyLoadError

EXIT_INTERRUPTED = 130


class Stop:
    """Set by SIGINT/SIGTERM; every loop checks it between callbacks, so no signal lands inside rclpy."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum, _frame) -> None:
        self.signum = signum

    def __bool__(self) -> bool:
        return self.signum is not None


CONFIG_FILES = ("mujoco_bridge.yaml", "policy_node.yaml")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bcg-sim2sim", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--policy", required=True, help="exported policy folder (policy.yaml + network)")
    ap.add_argument("--duration", type=float, default=10.0, help="sim seconds to run (default 10)")
    ap.add_argument("--record", default=None, help="write a rosbag2 MCAP bag of the deploy topics here")
    ap.add_argument(
        "--start", action="store_true", help="press start on the emulated remote: ZERO_TORQUE -> default pose -> RUN"
    )
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--realtime",
        dest="realtime",
        action="store_true",
        default=False,
        help="deployment timing: wall-clock stepping, policy node on its own 500 Hz thread "
        "(needs about 1.5 free CPU cores)",
    )
    mode.add_argument(
        "--fast",
        dest="realtime",
        action="store_false",
        help="lockstep as fast as possible, sim time on /clock (default)",
    )
    return ap


def _overrides_file(policy: str, realtime: bool) -> str:
    """A parameter file (applied after config/*.yaml) with this run's policy path and timing mode."""
    # --fast: message stamps (policy node, recorder) follow the bridge's /clock, like the bridge's own; the
    # policy node's control loop itself is stepped by the runner.
    data = {
        "mujoco_bridge": {"ros__parameters": {"realtime": realtime}},
        "policy_node": {"ros__parameters": {"policy_path": str(Path(policy).resolve()), "use_sim_time": not realtime}},
        "bag_recorder": {"ros__parameters": {"use_sim_time": not realtime}},
    }
    fd, path = tempfile.mkstemp(prefix="bcg_sim2sim_", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(data, f)
    return path


def _ros_args(argv: list[str], overrides: str) -> list[str]:
    """Config files first, then this run's overrides, then the user's --ros-args (last one wins)."""
    args = ros_args_with_default_params(["bcg-sim2sim", "--ros-args"], CONFIG_FILES)
    args += ["--params-file", overrides]
    if "--ros-args" in argv:
        args += argv[argv.index("--ros-args") + 1 :]
    return args


class Starter:
    """--start: press the remote's start button when the policy node is in ZERO_TORQUE and again when it
    reports HOLD (once each), never while an earlier press is still held (it would merge with it). The press
    in HOLD (the one that starts the policy) comes with the bridge's start-state spread (`perturb_start`)."""

    def __init__(self, bridge: MujocoBridge, policy: PolicyNode) -> None:
        self.bridge, self.policy = bridge, policy
        self._pressed: set[Mode] = set()

    def poll(self) -> None:
        mode = self.policy.sm.mode
        if mode in (Mode.ZERO_TORQUE, Mode.HOLD) and mode not in self._pressed and not self.bridge.pressing:
            self._pressed.add(mode)
            self.bridge.press("start")
            if mode == Mode.HOLD:
                self.bridge.perturb_start()
            self.policy.get_logger().info(
                f"bcg-sim2sim: pressed start in {mode.value} at sim time {self.bridge.sim_time:.3f} s"
            )


def _spin_until(executor: SingleThreadedExecutor, pred, timeout: float, stop: Stop) -> bool:
    """Run callbacks until pred() holds (True) or timeout wall seconds pass or a signal came (False)."""
    end = time.monotonic() + timeout
    while not pred():
        if stop or time.monotonic() > end:
            return False
        executor.spin_once(timeout_sec=0.002)
    return True


def run(
    bridge: MujocoBridge,
    policy: PolicyNode,
    executor: SingleThreadedExecutor,
    duration: float,
    starter: Starter | None,
    stop: Stop,
    realtime: bool = False,
) -> None:
    """Run the pair for `duration` s of simulation. Lockstep (default): one bridge tick, the policy node answers
    that LowState with one tick, its LowCmd lands. `realtime`: deployment timing, the bridge's wall-clock timer
    and the policy node's callbacks on one thread."""
    if realtime:
        while bridge.sim_time < duration and not stop:
            executor.spin_once(timeout_sec=0.01)
            if starter:
                starter.poll()
        return
    bridge.timer.cancel()  # the runner steps the bridge itself
    for _ in range(round(duration * bridge.cfg.lowstate_rate_hz)):  # a tick count: no float drift
        if stop:
            return
        n_state = policy.counts["lowstate"] + policy.counts["rejected"]
        n_cmd = bridge.cmd_count + bridge.bad_cmd_count
        sent_before = policy.counts["lowcmd"]
        bridge.tick()
        _spin_until(executor, lambda: policy.counts["lowstate"] + policy.counts["rejected"] > n_state, 0.5, stop)
        if policy.counts["lowcmd"] > sent_before:
            _spin_until(executor, lambda: bridge.cmd_count + bridge.bad_cmd_count > n_cmd, 0.5, stop)
        executor.spin_once(timeout_sec=0.0)  # services, recorder, ground truth
        if starter:
            starter.poll()
    # Let the recorder take the last messages before the run ends.
    end = time.monotonic() + 0.3
    while time.monotonic() < end and not stop:
        executor.spin_once(timeout_sec=0.01)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own = argv[: argv.index("--ros-args")] if "--ros-args" in argv else argv
    args = _parser().parse_args(own)
    if "--ros-args" in argv:
        try:
            startup.check_params_files(argv)
        except ConfigError as exc:
            print(f"bcg-sim2sim: {exc}", file=sys.stderr)
            return 2
    if not Path(args.policy).is_dir():
        print(f"bcg-sim2sim: policy folder {args.policy!r} does not exist", file=sys.stderr)
        return 2
    if args.duration <= 0:
        print("bcg-sim2sim: --duration must be > 0", file=sys.stderr)
        return 2
    overrides = _overrides_file(args.policy, args.realtime)
    try:
        ros_args = _ros_args(argv, overrides)
    except ConfigError as exc:
        print(f"bcg-sim2sim: {exc}", file=sys.stderr)
        return 2
    startup.use_robot_dds_profile()
    # Our own signal handling: after Ctrl-C or SIGTERM the policy node must still send damping (rclpy's
    # handlers would shut the context down first). Both set a flag the run loops check between callbacks.
    rclpy.init(args=ros_args, signal_handler_options=SignalHandlerOptions.NO)
    stop = Stop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    try:
        return _run(args, stop)
    finally:
        rclpy.try_shutdown()
        os.unlink(overrides)


def _run(args: argparse.Namespace, stop: Stop) -> int:
    try:
        bridge = MujocoBridge()
        policy = PolicyNode()
    except Exception as exc:  # noqa: BLE001 - bad configuration or artifact: one line, nothing ran yet
        # ConfigError, PolicyLoadError (bcg_sim.policy) and OSError carry the file in their message; other
        # loader failures (onnxruntime on a truncated network, numpy on a broken .npz) are named by type.
        known = isinstance(exc, (ConfigError, PolicyLoadError, ValueError, OSError))
        print(
            f"bcg-sim2sim: cannot start: {'' if known else type(exc).__name__ + ': '}{_one_line(exc)}", file=sys.stderr
        )
        return 2
    try:
        recorder = BagRecorder(args.record, DEFAULT_TOPICS) if args.record else None
    except BagError as exc:
        print(f"bcg-sim2sim: cannot record: {exc}", file=sys.stderr)
        return 2
    executor = SingleThreadedExecutor()
    for node in (bridge, policy, recorder):
        if node is not None:
            executor.add_node(node)
    starter = Starter(bridge, policy) if args.start else None
    mode = "real time" if args.realtime else "fast (lockstep)"
    bridge.get_logger().info(f"bcg-sim2sim: {args.duration} s of sim time, {mode}")
    t0 = time.monotonic()
    try:
        run(bridge, policy, executor, args.duration, starter, stop, realtime=args.realtime)
        if stop:
            bridge.get_logger().info(f"bcg-sim2sim: interrupted ({signal.Signals(stop.signum).name})")
    finally:
        end_mode, end_fault = policy.sm.mode, policy.sm.last_fault  # before the shutdown damping
        entered = set(policy.modes_entered)
        policy.send_shutdown_damping()
        executor.shutdown(timeout_sec=1.0)  # no callback may run (e.g. write to the bag) after this
        if recorder is not None:
            counts = recorder.close()
            print(f"bcg-sim2sim: recorded {args.record}: {counts}")
    wall = time.monotonic() - t0
    pos, _ = bridge.sim.pelvis_pose()
    print(
        f"bcg-sim2sim: {bridge.sim_time:.2f} s sim in {wall:.2f} s wall; policy node mode "
        f"{end_mode.value}{f' ({end_fault})' if end_fault else ''}; pelvis height {pos[2]:.3f} m; "
        f"LowCmd accepted {bridge.cmd_count}, dropped {bridge.bad_cmd_count}"
    )
    for node in (bridge, policy, recorder):
        if node is not None:
            node.destroy_node()
    if stop:
        return EXIT_INTERRUPTED
    if end_mode == Mode.DAMPING and end_fault:
        return 1
    if args.start and Mode.RUN not in entered:
        print(
            f"bcg-sim2sim: --start given but the policy never ran (RUN not reached in {bridge.sim_time:.2f} s "
            f"of sim time; modes entered: {sorted(m.value for m in entered)})",
            file=sys.stderr,
        )
        return 1
    return 0


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":
    sys.exit(main())
