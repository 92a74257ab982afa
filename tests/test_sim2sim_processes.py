"""sim2sim as the launch file runs it: the MuJoCo bridge and the policy node in separate processes, both
in real time, their default parameter files, over DDS on loopback (isolated domain). The policy node
auto-starts into the default pose, the test presses start on the emulated remote (/sim/press) to run the
hold artifact, and the G1 must stay up (ground-truth pelvis height) with no fault."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("unitree_hg.msg")
pytest.importorskip("torch")

from ros_helpers import NodeProcess, RosSide, isolated_domain, policy_node_args, wait_for  # noqa: E402

from bcg_sim.policy.cli import export_hold  # noqa: E402

RUN_S = 3.0


def test_bridge_and_policy_node_processes_keep_the_robot_up(tmp_path):
    from geometry_msgs.msg import PoseStamped
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    isolated_domain()  # before spawning: the processes inherit this session's ROS_DOMAIN_ID
    hold = export_hold(str(tmp_path / "hold"), ("onnx",))
    bridge = NodeProcess("bcg_policy_node.mujoco_bridge", [], tmp_path / "bridge.log")
    policy = NodeProcess("bcg_policy_node.policy_node", policy_node_args(hold, zero_torque_auto_start_s=0.5),
                         tmp_path / "policy.log")
    ros = RosSide("sim2sim_processes")
    z: list[float] = []
    transitions: list[str] = []
    try:
        ros.node.create_subscription(PoseStamped, "/sim/ground_truth", lambda m: z.append(m.pose.position.z), 10)
        latched = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        ros.node.create_subscription(String, "/policy_node/transitions", lambda m: transitions.append(m.data),
                                     latched)
        press = ros.node.create_publisher(String, "/sim/press", 10)
        wait_for(lambda: any("-> HOLD" in t for t in transitions), 40.0,
                 "policy node in HOLD (auto start -> default pose)")
        # A message published before discovery has matched the bridge's subscription is lost.
        wait_for(lambda: press.get_subscription_count() >= 1, 10.0, "the bridge subscribed to /sim/press")
        press.publish(String(data="start"))
        wait_for(lambda: any("-> RUN" in t for t in transitions), 10.0, "RUN after pressing start")
        n0 = len(z)
        time.sleep(RUN_S)
        in_run = z[n0:]
    finally:
        ros.close()
        policy.stop()
        bridge.stop()
    log = policy.output()
    assert not [t for t in transitions if "DAMPING" in t and "node shutdown" not in t], transitions
    assert len(in_run) > RUN_S * 50 * 0.5, f"{len(in_run)} ground-truth messages in {RUN_S} s"
    assert min(in_run) > 0.65, f"pelvis fell to {min(in_run):.3f} m\n{log}"
