"""Baseline for bench/node_latency.py: the least a Python ROS 2 node can do per LowState.

    python bench/relay_node.py [--ros-args ...]

A minimal rclpy node that answers every LowState with a LowCmd straight from its subscription callback:
it copies the LowState's `mode_machine` (the bench's marker) into a prefilled LowCmd (the G1's default
pose, stand gains), sets the CRC with the policy node's own module (`bcg_policy_node.crc.lowcmd_crc`)
and publishes. Same middleware as the policy node (rclpy, the RMW from env.sh, Fast DDS by default),
same message types (unitree_hg LowState/LowCmd), same topics and the same QoS as
`bcg_policy_node.policy_node.PolicyNode._make_ros_io`: /lowstate best effort, keep last 1;
/lowcmd reliable, keep last 1; volatile. Spun by a SingleThreadedExecutor like the policy node's.
No state machine, no safety checks, no LowState CRC check, no policy, no loop thread: what is left is
rclpy + DDS + Python message conversion, the floor under the policy node's state -> LowCmd latency.

SIGINT/SIGTERM end it cleanly (exit status 0).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    from bcg_policy_node import lowlevel as ll
    from bcg_policy_node.crc import lowcmd_crc
    from bcg_sim.g1.joints import JOINTS_29, stand_gains
    from unitree_hg.msg import LowCmd, LowState

    rclpy.init(args=argv)  # rclpy's signal handling: SIGINT/SIGTERM shut the context down, spin returns
    node = rclpy.create_node("latency_relay")
    kp, kd = stand_gains("29dof")
    cmd = ll.make_lowcmd(np.array([j.default for j in JOINTS_29]), np.array(kp), np.array(kd), mode_machine=0)
    # The policy node's QoS (policy_node.py, _make_ros_io).
    state_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST)
    cmd_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
    pub = node.create_publisher(LowCmd, "/lowcmd", cmd_qos)

    def on_lowstate(msg: LowState) -> None:
        cmd.mode_machine = msg.mode_machine
        cmd.crc = lowcmd_crc(cmd)
        pub.publish(cmd)

    node.create_subscription(LowState, "/lowstate", on_lowstate, state_qos)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    node.get_logger().info("relaying /lowstate -> /lowcmd")
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
