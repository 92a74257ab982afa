"""Run a bcg policy on the G1 (sim:=false) or on the MuJoCo bridge (sim:=true), with rviz.

    ros2 launch g1_bringup deploy.launch.py policy:=/path/to/artifact                       # the robot
    ros2 launch g1_bringup deploy.launch.py policy:=/path/to/artifact sim:=true rviz:=false # MuJoCo

Arguments: policy (artifact folder), sim (true|false), rviz (true|false), domain_id, network_interface
(robot mode: the NIC wired to the G1, e.g. enp3s0), record (rosbag2 output folder; empty = no recording).
The bridge runs in real time here (the policy node's control loop runs on the wall clock); lockstep
"as fast as possible" sim2sim is `bcg-sim2sim --fast`, which steps both nodes in one process.

Nodes: policy_node (config/policy_node.yaml), mujoco_bridge (sim only; config/mujoco_bridge.yaml),
robot_state_publisher (URDF from bcg_sim.g1.to_urdf()) for the robot and for the reference ghost,
rviz2 (config/g1.rviz), optionally `ros2 bag record`.
Both modes point FASTDDS_DEFAULT_PROFILES_FILE at config/fastdds_robot.xml (type propagation off, which
the robot's Cyclone DDS 0.10 and unitree_sdk2py need); robot mode restricts it to `network_interface`.

This needs a full ROS 2 install (launch, launch_ros, robot_state_publisher, rviz2); with pip-only rclpy use
`bcg-sim2sim` instead (same nodes and parameter files, one process).
"""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction, SetEnvironmentVariable
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchContext, LaunchDescription

REFERENCE_TF_PREFIX = "reference"  # TF prefix of the reference ghost (config/g1.rviz uses the same)

ARGUMENTS = {
    "policy": ("", "policy artifact folder (policy.yaml + network), e.g. from `bcg-policy export-hold -o DIR`"),
    "sim": ("false", "true: the MuJoCo bridge stands in for the robot; false: the real G1"),
    "rviz": ("true", "start rviz2 with config/g1.rviz"),
    "domain_id": ("0", "ROS_DOMAIN_ID (the G1's onboard software uses 0)"),
    "network_interface": ("", "robot mode: network interface wired to the G1 (e.g. enp3s0); empty = all"),
    "record": ("", "rosbag2 (MCAP) output folder for the deploy topics; empty = no recording"),
}


def config_file(name: str) -> str:
    """A file of g1_bringup's config/ (installed share folder)."""
    return os.path.join(get_package_share_directory("g1_bringup"), "config", name)


def fastdds_profile_for_interface(template: str, interface: str) -> str:
    """The robot Fast DDS profile (XML text) with UDPv4 restricted to one network interface.

    Adds a UDPv4 transport whose interfaceWhiteList holds `interface` and makes the default participant use
    only it (no shared memory, no other NIC). An empty interface returns the template unchanged.
    """
    if not interface:
        return template
    ns = "http://www.eprosima.com"
    ET.register_namespace("", ns)
    root = ET.fromstring(template)
    profiles = root.find(f"{{{ns}}}profiles")
    participant = profiles.find(f"{{{ns}}}participant") if profiles is not None else None
    if participant is None:
        raise ValueError("fastdds profile template has no <profiles><participant>")
    descriptors = ET.Element(f"{{{ns}}}transport_descriptors")
    desc = ET.SubElement(descriptors, f"{{{ns}}}transport_descriptor")
    ET.SubElement(desc, f"{{{ns}}}transport_id").text = "bcg_robot_udp"
    ET.SubElement(desc, f"{{{ns}}}type").text = "UDPv4"
    ET.SubElement(ET.SubElement(desc, f"{{{ns}}}interfaceWhiteList"), f"{{{ns}}}interface").text = interface
    profiles.insert(0, descriptors)
    rtps = participant.find(f"{{{ns}}}rtps")
    if rtps is None:
        rtps = ET.SubElement(participant, f"{{{ns}}}rtps")
    builtin = ET.Element(f"{{{ns}}}useBuiltinTransports")
    builtin.text = "false"
    rtps.insert(0, builtin)
    user = ET.Element(f"{{{ns}}}userTransports")
    ET.SubElement(user, f"{{{ns}}}transport_id").text = "bcg_robot_udp"
    rtps.insert(0, user)
    return ET.tostring(root, encoding="unicode")


def _robot_dds_env(context: LaunchContext) -> list:
    """Both modes: Fast DDS with type propagation off (config/fastdds_robot.xml), so the robot's Cyclone DDS
    0.10 and unitree_sdk2py can talk to the nodes (and to the simulator). Robot mode: restricted to the chosen
    interface, discovery on the subnet. Sim mode: discovery stays on this host, so a simulated /lowcmd can
    never reach a robot on the network."""
    profile = config_file("fastdds_robot.xml")
    env = [SetEnvironmentVariable("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")]
    if context.perform_substitution(LaunchConfiguration("sim")).lower() == "true":
        return env + [
            SetEnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE", profile),
            SetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST"),
        ]
    interface = context.perform_substitution(LaunchConfiguration("network_interface"))
    if interface:
        with open(profile) as f:
            text = fastdds_profile_for_interface(f.read(), interface)
        fd, profile = tempfile.mkstemp(prefix=f"bcg_fastdds_{interface}_", suffix=".xml")
        with os.fdopen(fd, "w") as f:
            f.write(text)
    return env + [
        SetEnvironmentVariable("FASTDDS_DEFAULT_PROFILES_FILE", profile),
        # The robot is another host: discovery must leave localhost.
        SetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET"),
    ]


def _robot_description(_context: LaunchContext) -> list:
    """robot_state_publisher for the measured G1 and, under the TF prefix "reference/", for the reference
    pose the policy tracks (/reference/joint_states from the policy node). rviz draws that second model as a
    translucent ghost; a static transform pins its pelvis to the robot's, so the ghost shows the joint
    tracking error (the IMU gives no world position to place either pelvis in a world frame)."""
    from bcg_sim.g1 import to_urdf

    urdf = to_urdf("29dof")
    return [
        Node(
            package="robot_state_publisher",
            executable="robot_state_publisher",
            name="robot_state_publisher",
            output="screen",
            parameters=[{"robot_description": urdf}],
        ),
        Node(
            package="robot_state_publisher",
            executable="robot_state_publisher",
            name="reference_state_publisher",
            output="screen",
            parameters=[{"robot_description": urdf, "frame_prefix": f"{REFERENCE_TF_PREFIX}/"}],
            remappings=[
                ("joint_states", "/reference/joint_states"),
                ("robot_description", "/reference/robot_description"),
            ],
        ),
        Node(
            package="tf2_ros",
            executable="static_transform_publisher",
            name="reference_ghost_anchor",
            output="screen",
            arguments=["--frame-id", "pelvis", "--child-frame-id", f"{REFERENCE_TF_PREFIX}/pelvis"],
        ),
    ]


def _nodes(context: LaunchContext) -> list:
    sim = context.perform_substitution(LaunchConfiguration("sim")).lower() == "true"
    policy = context.perform_substitution(LaunchConfiguration("policy"))
    if not policy:
        raise RuntimeError("deploy.launch.py: policy:=<artifact folder> is required")
    actions = [
        Node(
            package="bcg_policy_node",
            executable="policy_node",
            name="policy_node",
            output="screen",
            parameters=[config_file("policy_node.yaml"), {"policy_path": os.path.abspath(policy)}],
        )
    ]
    if sim:
        # Real time: the policy node's control loop runs on the wall clock, so the bridge must too.
        actions.append(
            Node(
                package="bcg_policy_node",
                executable="mujoco_bridge",
                name="mujoco_bridge",
                output="screen",
                parameters=[config_file("mujoco_bridge.yaml"), {"realtime": True}],
            )
        )
    record = context.perform_substitution(LaunchConfiguration("record"))
    if record:
        # The topics bcg-record and bcg-sim2sim record too; imported only here, as only a recording needs bags.
        from bcg_policy_node.bags import DEFAULT_TOPICS

        actions.append(
            ExecuteProcess(cmd=["ros2", "bag", "record", "-s", "mcap", "-o", record, *DEFAULT_TOPICS], output="screen")
        )
    return actions


def generate_launch_description() -> LaunchDescription:
    args = [
        DeclareLaunchArgument(name, default_value=default, description=desc)
        for name, (default, desc) in ARGUMENTS.items()
    ]
    return LaunchDescription(
        [
            *args,
            SetEnvironmentVariable("ROS_DOMAIN_ID", LaunchConfiguration("domain_id")),
            OpaqueFunction(function=_robot_dds_env),
            OpaqueFunction(function=_nodes),
            OpaqueFunction(function=_robot_description),
            Node(
                package="rviz2",
                executable="rviz2",
                name="rviz2",
                output="screen",
                arguments=["-d", config_file("g1.rviz")],
                condition=IfCondition(LaunchConfiguration("rviz")),
            ),
        ]
    )
