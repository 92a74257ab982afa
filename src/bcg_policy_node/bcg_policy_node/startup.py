"""What every bcg ROS entry point (policy node, MuJoCo bridge, bcg-sim2sim) does before `rclpy.init`.

- `check_params_files(argv)`: each `--params-file F` must exist and be valid YAML; rcl's own parse error is
  a multi-line traceback, so the file and line are reported here first (ConfigError, one line).
- `use_robot_dds_profile()`: point Fast DDS at config/fastdds_robot.xml (type propagation off) unless the
  user chose a profile, so the G1's Cyclone DDS 0.10 and unitree_sdk2py can talk to every bcg process.
- `wants_help(argv)`: `-h`/`--help` before `--ros-args`.
"""

from __future__ import annotations

import os
from typing import Sequence

import yaml

from bcg_sim.config import ConfigError, resolve_config_path

DDS_PROFILE = "fastdds_robot.xml"  # in config/
PROFILE_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"


def own_args(argv: Sequence[str]) -> list[str]:
    """The arguments before `--ros-args` (argv[0] excluded when it is the program)."""
    args = list(argv)
    return args[:args.index("--ros-args")] if "--ros-args" in args else args


def wants_help(argv: Sequence[str]) -> bool:
    return any(a in ("-h", "--help") for a in own_args(argv))


def params_files(argv: Sequence[str]) -> list[str]:
    """Files named by `--params-file F` in the ROS arguments."""
    args = list(argv)
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--params-file"]


def check_params_files(argv: Sequence[str]) -> None:
    """Raise ConfigError (file, line, problem) for a missing or syntactically broken parameter file."""
    for path in params_files(argv):
        if not os.path.isfile(path):
            raise ConfigError(f"parameter file {path}: does not exist")
        try:
            with open(path) as f:
                data = yaml.safe_load(f)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise ConfigError(f"parameter file {path}: YAML syntax error{where}: {exc.problem}") from None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigError(f"parameter file {path}: not a YAML file ({type(exc).__name__})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"parameter file {path}: top level must be a mapping of node names")


def robot_dds_profile() -> str:
    """Path of config/fastdds_robot.xml."""
    return str(resolve_config_path(DDS_PROFILE))


def use_robot_dds_profile() -> str | None:
    """Set FASTDDS_DEFAULT_PROFILES_FILE to the robot profile unless already set (or another RMW is used).
    Returns the profile in effect (None for a non-Fast-DDS RMW)."""
    rmw = os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    if not rmw.startswith("rmw_fastrtps"):
        return None
    if not os.environ.get(PROFILE_ENV):
        os.environ[PROFILE_ENV] = robot_dds_profile()
    return os.environ[PROFILE_ENV]


def yaml_section(path, node: str) -> dict:
    """`node: ros__parameters:` of a ROS 2 parameter file (for --help)."""
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    return dict((data.get(node) or {}).get("ros__parameters") or {})
