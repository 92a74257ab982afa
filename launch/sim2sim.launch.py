"""sim2sim: the policy node against the MuJoCo bridge (deploy.launch.py with sim:=true).

    ros2 launch g1_bringup sim2sim.launch.py policy:=/path/to/artifact [rviz:=false] [record:=/tmp/run1]
                                             [domain_id:=7]

Same nodes and parameter files as the robot deployment; only the robot is swapped for the bridge, which
runs in real time. Needs a full ROS 2 install; with pip-only rclpy run `bcg-sim2sim --policy DIR` (one
process, same YAML files; --fast for lockstep as fast as possible).
"""

from __future__ import annotations

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

from launch import LaunchDescription

ARGUMENTS = {
    "policy": ("", "policy artifact folder (policy.yaml + network)"),
    "rviz": ("true", "start rviz2 with config/g1.rviz"),
    "domain_id": ("0", "ROS_DOMAIN_ID; pick a free one to keep the sim off a robot's network"),
    "record": ("", "rosbag2 (MCAP) output folder; empty = no recording"),
}


def generate_launch_description() -> LaunchDescription:
    deploy = os.path.join(get_package_share_directory("g1_bringup"), "launch", "deploy.launch.py")
    forwarded = {name: LaunchConfiguration(name) for name in ARGUMENTS}
    return LaunchDescription(
        [
            *(
                DeclareLaunchArgument(name, default_value=default, description=desc)
                for name, (default, desc) in ARGUMENTS.items()
            ),
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(deploy), launch_arguments={**forwarded, "sim": "true"}.items()
            ),
        ]
    )
