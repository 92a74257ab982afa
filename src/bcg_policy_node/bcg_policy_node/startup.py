"""What every bcg ROS entry point (policy node, MuJoCo bridge, bcg-sim2sim) does before `rclpy.init`.

- `check_params_files(argv)`: each `--params-file F` must exist and be valid YAML; rcl's own parse error is
  a multi-line traceback, so the file and line are reported here first (ConfigError, one line).
- `use_robot_dds_profile()`: point Fast DDS at config/fastdds_robot.xml (type propagation off) unless the
  user chose a profile, so the G1's Cyclone DDS 0.10 and unitree_sdk2py can talk to every bcg process.
- `wants_help(argv)`: `-h`/`--help` before `--ros-args`; `help_text(...)` what it prints.
- `config_from_node(node, Config)`: a node's ROS parameters read into its typed config dataclass.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any, Sequence, TypeVar

import yaml

from bcg_sim.config import ConfigError, from_dict, resolve_config_path

T = TypeVar("T")
# Parameters every rclpy node declares itself; not part of a bcg config.
ROS_BUILTIN_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})
DDS_PROFILE = "fastdds_robot.xml"  # in config/
PROFILE_ENV = "FASTDDS_DEFAULT_PROFILES_FILE"


def own_args(argv: Sequence[str]) -> list[str]:
    """The arguments before `--ros-args` (argv[0] excluded when it is the program)."""
    args = list(argv)
    return args[: args.index("--ros-args")] if "--ros-args" in args else args


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


def config_from_node(node: Any, config_type: type[T], hint: str = "") -> T:
    """`config_type` from the node's parameters (declared from its overrides): unknown keys, wrong types and
    out-of-range values are ConfigErrors naming the node; `hint` is added when a required key is missing."""
    params = {
        name: p.value for name, p in node.get_parameters_by_prefix("").items() if name not in ROS_BUILTIN_PARAMETERS
    }
    where = f"parameters of node {node.get_name()!r}"
    try:
        return from_dict(config_type, params, where=where)
    except TypeError as exc:  # the dataclass constructor: required fields missing
        raise ConfigError(f"{where}: {exc}{f' ({hint})' if hint else ''}") from exc


def help_text(
    usage: str, doc: str, config_type: type | None = None, params_file: str | None = None, node: str | None = None
) -> str:
    """--help: the usage line, the module docstring, then the parameters with their defaults -- the config
    dataclass' own (`config_type`) or, for a config whose keys are all required, the values in config/`params_file`
    under `node`."""
    if config_type is not None:
        values = asdict(config_type())
        where = "Parameters and their defaults (set them in a --params-file or with -p name:=value):"
    else:
        try:
            path = resolve_config_path(params_file)
            values = yaml_section(path, node)
            where = f"Parameters (every key required) and their values in {path}:"
        except ConfigError as exc:
            values, where = {}, f"Parameters: {exc}"
    defaults = "\n".join(f"  {k} = {v!r}" for k, v in values.items())
    return f"{usage}{doc}\n{where}\n{defaults}\n"
