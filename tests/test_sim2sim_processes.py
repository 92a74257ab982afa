"""sim2sim as separate processes: the MuJoCo bridge and the policy node each in their own process, their
default parameter files, over DDS on loopback (isolated domain), driven by simulation time: the bridge
steps in lockstep with the policy node's LowCmds and publishes /clock, the policy node runs on /clock
(use_sim_time). The policy node auto-starts into the default pose, the test presses start on the emulated
remote (/sim/press) once the node reports HOLD, and the G1 must stay up for RUN_S s of sim time (ground-truth
pelvis height, stamped in sim time) with no fault. Assertions are on sim time and message content only, so
the result does not depend on the machine's load (wall-clock limits are hang guards)."""

from __future__ import annotations

import threading

import numpy as np
import rclpy  # noqa: F401 - a hard dependency: a broken install fails, not skips
import torch  # noqa: F401 - a hard dependency: a broken install fails, not skips
from ros_helpers import NodeProcess, RosSide, isolated_domain, policy_node_args, wait_for

import unitree_hg.msg  # noqa: F401 - a hard dependency: a broken install fails, not skips
from bcg_sim.policy.cli import export_hold

RUN_S = 3.0  # sim s in RUN
AUTO_START_S = 0.5
MOVE_S = 2.0  # config/policy_node.yaml move_to_default_s
GROUND_TRUTH_HZ = 50.0  # config/mujoco_bridge.yaml ground_truth_rate_hz
HANG_GUARD_S = 240.0  # wall s; only a hang reaches it


def test_bridge_and_policy_node_processes_keep_the_robot_up_on_sim_time(tmp_path):
    from geometry_msgs.msg import PoseStamped
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    isolated_domain()  # before spawning: the processes inherit this session's ROS_DOMAIN_ID
    hold = export_hold(str(tmp_path / "hold"), ("onnx",))
    bridge = NodeProcess(
        "bcg_policy_node.mujoco_bridge", ["--ros-args", "-p", "realtime:=false"], tmp_path / "bridge.log"
    )
    policy = NodeProcess(
        "bcg_policy_node.policy_node",
        policy_node_args(hold, zero_torque_auto_start_s=AUTO_START_S, use_sim_time=True),
        tmp_path / "policy.log",
    )
    ros = RosSide("sim2sim_processes")
    lock = threading.Lock()
    gt: list[tuple[float, float]] = []  # (sim time s, pelvis z m)
    transitions: list[tuple[int, str]] = []  # (ground-truth samples seen before it, text)

    def on_gt(m):
        with lock:
            gt.append((m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, m.pose.position.z))

    def on_transition(m):
        with lock:
            transitions.append((len(gt), m.data))

    def seen(text: str) -> int | None:
        with lock:
            return next((n for n, t in transitions if text in t), None)

    try:
        ros.node.create_subscription(PoseStamped, "/sim/ground_truth", on_gt, 100)
        latched = QoSProfile(
            depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        ros.node.create_subscription(String, "/policy_node/transitions", on_transition, latched)
        press = ros.node.create_publisher(String, "/sim/press", 10)
        wait_for(
            lambda: seen("-> HOLD") is not None or not policy.alive() or not bridge.alive(),
            HANG_GUARD_S,
            "policy node in HOLD (auto start -> default pose)",
        )
        # A message published before discovery has matched the bridge's subscription is lost.
        wait_for(lambda: press.get_subscription_count() >= 1, 30.0, "the bridge subscribed to /sim/press")
        press.publish(String(data="start"))
        wait_for(lambda: seen("-> RUN") is not None, 60.0, "RUN after pressing start")
        n_run = seen("-> RUN")
        wait_for(
            lambda: len(gt) > n_run and gt[-1][0] - gt[n_run][0] >= RUN_S, HANG_GUARD_S, f"{RUN_S} s of sim time in RUN"
        )
    finally:
        ros.close()
        policy.stop()
        bridge.stop()
    log = policy.output()
    texts = [t for _, t in transitions]
    assert not [t for t in texts if "DAMPING" in t and "node shutdown" not in t], texts
    # The state machine ran on sim time: the move took the configured time of /clock.
    assert f"reached the default pose after {MOVE_S:.2f} s" in next(t for t in texts if "-> HOLD" in t), texts
    with lock:
        t = np.array([s for s, _ in gt])
        z = np.array([h for _, h in gt])
    in_run = (t >= t[n_run]) & (t <= t[n_run] + RUN_S)
    assert np.all(np.diff(t) > 0), "ground truth stamped on monotonic sim time"
    # Ground truth comes every 1/50 s of sim time; none is lost on loopback with a depth-100 queue.
    assert abs(in_run.sum() - RUN_S * GROUND_TRUTH_HZ) <= 2, f"{in_run.sum()} ground-truth samples in {RUN_S} sim s"
    assert z[in_run].min() > 0.65, f"pelvis fell to {z[in_run].min():.3f} m\n{log}"
