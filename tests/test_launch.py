"""Launch files and DDS profile, validated without `launch` (not installable from pip).

The launch files are compiled and walked as ASTs: every Node(...) names an executable that exists (a
console script of setup.py, or an external package listed as exec_depend), every config file they open
exists, every LaunchConfiguration is a declared argument, the include passes only declared arguments.
The Fast DDS profile is parsed, and the interface-restricted variant the deploy launch writes is loaded by
a real Fast DDS participant that must exchange messages with this process over loopback.
They still need a full ROS 2 install (launch, launch_ros, robot_state_publisher, rviz2) to run.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest
import yaml
from ros_helpers import REPO  # noqa: E402

LAUNCH = REPO / "launch"
CONFIG = REPO / "config"
NS = "{http://www.eprosima.com}"
REQUIRED_DEPLOY_ARGS = {"policy", "sim", "rviz", "domain_id", "network_interface"}


def _tree(name: str) -> ast.Module:
    path = LAUNCH / name
    return ast.parse(path.read_text(), filename=str(path))


def _calls(tree: ast.AST, func: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == func)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == func)
        )
    ]


def _kw(call: ast.Call, name: str):
    for k in call.keywords:
        if k.arg == name:
            return ast.literal_eval(k.value)
    return None


def _declared(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "ARGUMENTS" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("launch file has no ARGUMENTS dict")


def _console_scripts() -> dict[str, set[str]]:
    """package -> console-script names, read from each src/*/setup.py."""
    out: dict[str, set[str]] = {}
    for setup in (REPO / "src").glob("*/setup.py"):
        scripts: set[str] = set()
        for call in _calls(ast.parse(setup.read_text()), "setup"):
            eps = _kw(call, "entry_points") or {}
            scripts |= {s.split("=")[0].strip() for s in eps.get("console_scripts", [])}
        out[setup.parent.name] = scripts
    return out


def _check_parameter_overrides(node: ast.Call) -> None:
    """Keys of dict literals in a bcg node's `parameters=[...]` must be parameters of its YAML file."""
    name = _kw(node, "name")
    yaml_path = CONFIG / f"{name}.yaml"
    params = [k.value for k in node.keywords if k.arg == "parameters"]
    if not params or not yaml_path.is_file():
        return
    known = set(yaml.safe_load(yaml_path.read_text())[name]["ros__parameters"])
    for item in params[0].elts:
        if isinstance(item, ast.Dict):
            keys = {ast.literal_eval(k) for k in item.keys}
            assert keys <= known, f"{name}: unknown parameter(s) {keys - known} (config/{name}.yaml)"


def _exec_depends() -> set[str]:
    root = ET.parse(REPO / "src" / "g1_bringup" / "package.xml").getroot()
    return {e.text for e in root.findall("exec_depend")}


@pytest.mark.parametrize("name", ["deploy.launch.py", "sim2sim.launch.py"])
def test_launch_file_compiles_and_references_exist(name):
    path = LAUNCH / name
    compile(path.read_text(), str(path), "exec")
    tree = _tree(name)
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    declared = _declared(tree)
    # Literal names must be declared; a computed one (sim2sim: `for name in ARGUMENTS`) is by construction.
    used = {c.args[0].value for c in _calls(tree, "LaunchConfiguration") if isinstance(c.args[0], ast.Constant)}
    assert used <= declared, f"undeclared launch arguments {used - declared}"
    scripts, external = _console_scripts(), _exec_depends()
    for node in _calls(tree, "Node"):
        pkg, exe = _kw(node, "package"), _kw(node, "executable")
        if pkg in scripts:
            assert exe in scripts[pkg], f"{pkg} has no executable {exe!r}; it has {sorted(scripts[pkg])}"
        else:
            assert pkg in external, f"{pkg} is neither a bcg package nor an exec_depend of g1_bringup"
        _check_parameter_overrides(node)
    for call in _calls(tree, "config_file"):
        f = ast.literal_eval(call.args[0])
        assert (CONFIG / f).is_file(), f"{name} opens config/{f}, which does not exist"


def test_deploy_arguments_and_sim2sim_include():
    assert REQUIRED_DEPLOY_ARGS <= _declared(_tree("deploy.launch.py"))
    sim = _tree("sim2sim.launch.py")
    includes = [n.value for n in ast.walk(sim) if isinstance(n, ast.Constant) and str(n.value).endswith(".launch.py")]
    assert includes == ["deploy.launch.py"] and (LAUNCH / includes[0]).is_file()
    forwarded = _declared(sim) | {"sim"}
    assert forwarded <= _declared(_tree("deploy.launch.py"))


def test_parameter_files_are_ros2_param_files_for_the_launched_nodes():
    for f, node in (("mujoco_bridge.yaml", "mujoco_bridge"), ("policy_node.yaml", "policy_node")):
        data = yaml.safe_load((CONFIG / f).read_text())
        assert list(data) == [node] and "ros__parameters" in data[node], f
    rviz = yaml.safe_load((CONFIG / "g1.rviz").read_text())
    classes = {d["Class"] for d in rviz["Visualization Manager"]["Displays"]}
    assert {"rviz_default_plugins/RobotModel", "rviz_default_plugins/TF"} <= classes
    # The ghost display's TF prefix is the one the deploy launch gives the reference state publisher.
    prefixes = {
        d.get("TF Prefix")
        for d in rviz["Visualization Manager"]["Displays"]
        if d["Class"] == "rviz_default_plugins/RobotModel"
    }
    ghost_prefix = next(
        ast.literal_eval(n.value)
        for n in _tree("deploy.launch.py").body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "REFERENCE_TF_PREFIX"
    )
    assert prefixes == {"", ghost_prefix}


def _profile_function():
    """fastdds_profile_for_interface from deploy.launch.py, compiled alone (its module imports `launch`)."""
    tree = _tree("deploy.launch.py")
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "fastdds_profile_for_interface")
    ns: dict = {"ET": ET}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "deploy.launch.py", "exec"), ns)
    return ns["fastdds_profile_for_interface"]


def _type_propagation(root: ET.Element) -> str:
    for prop in root.iter(f"{NS}property"):
        if prop.findtext(f"{NS}name") == "fastdds.type_propagation":
            return prop.findtext(f"{NS}value")
    raise AssertionError("no fastdds.type_propagation property")


def test_fastdds_profile_disables_type_propagation():
    text = (CONFIG / "fastdds_robot.xml").read_text()
    root = ET.fromstring(text)
    participant = root.find(f"{NS}profiles/{NS}participant")
    assert participant.get("is_default_profile") == "true"
    assert _type_propagation(root) == "disabled"
    restricted = ET.fromstring(_profile_function()(text, "eth7"))
    assert _type_propagation(restricted) == "disabled"
    assert [e.text for e in restricted.iter(f"{NS}interface")] == ["eth7"]
    assert restricted.findtext(f"{NS}profiles/{NS}participant/{NS}rtps/{NS}useBuiltinTransports") == "false"
    assert _profile_function()(text, "") == text


PUBLISHER = textwrap.dedent("""
    import time, rclpy
    from std_msgs.msg import String
    rclpy.init()
    n = rclpy.create_node("profiled_pub")
    p = n.create_publisher(String, "/profile_check", 10)
    end = time.monotonic() + 15
    while time.monotonic() < end:
        p.publish(String(data="hello"))
        time.sleep(0.05)
""")


@pytest.mark.parametrize("variant", ["as_shipped", "restricted_to_lo"])
def test_profile_loads_in_fastdds_and_talks_over_loopback(tmp_path, variant):
    from ros_helpers import RosSide, wait_for
    from std_msgs.msg import String

    profile = tmp_path / "fastdds.xml"
    text = (CONFIG / "fastdds_robot.xml").read_text()
    profile.write_text(text if variant == "as_shipped" else _profile_function()(text, "lo"))
    ros = RosSide("profile_check")  # sets this session's ROS_DOMAIN_ID (inherited by the publisher)
    env = dict(os.environ, FASTDDS_DEFAULT_PROFILES_FILE=str(profile), RMW_IMPLEMENTATION="rmw_fastrtps_cpp")
    proc = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    got: list = []
    ros.node.create_subscription(String, "/profile_check", got.append, 10)
    try:
        wait_for(lambda: len(got) >= 3 or proc.poll() is not None, 15.0, "messages from the profiled participant")
    finally:
        proc.kill()
        out = proc.communicate()[0]
        ros.close()
    assert "XMLPARSER" not in out and "Error" not in out, out
    assert len(got) >= 3, out


def _dds_env_function():
    """deploy.launch.py's _robot_dds_env compiled alone, with launch's actions replaced by (name, value) pairs."""
    tree = _tree("deploy.launch.py")
    fns = [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name in ("_robot_dds_env", "fastdds_profile_for_interface")
    ]
    ns: dict = {
        "ET": ET,
        "os": os,
        "tempfile": __import__("tempfile"),
        "SetEnvironmentVariable": lambda name, value: (name, value),
        "LaunchConfiguration": lambda name: name,
        "config_file": lambda name: str(CONFIG / name),
    }
    exec(compile(ast.Module(body=fns, type_ignores=[]), "deploy.launch.py", "exec"), ns)
    return ns["_robot_dds_env"]


class _Context:
    def __init__(self, **values):
        self.values = values

    def perform_substitution(self, name):
        return self.values[name]


@pytest.mark.parametrize("sim, interface", [("true", ""), ("false", ""), ("false", "lo")])
def test_both_launch_modes_load_the_robot_profile(sim, interface):
    env = dict(_dds_env_function()(_Context(sim=sim, network_interface=interface)))
    assert env["RMW_IMPLEMENTATION"] == "rmw_fastrtps_cpp"
    profile = env["FASTDDS_DEFAULT_PROFILES_FILE"]
    assert _type_propagation(ET.parse(profile).getroot()) == "disabled"
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == ("LOCALHOST" if sim == "true" else "SUBNET")
    if interface:
        assert [e.text for e in ET.parse(profile).getroot().iter(f"{NS}interface")] == [interface]
        os.unlink(profile)
    else:
        assert profile == str(CONFIG / "fastdds_robot.xml")


def test_env_sh_and_the_nodes_default_to_the_robot_profile():
    out = subprocess.run(
        ["bash", "-c", "unset FASTDDS_DEFAULT_PROFILES_FILE; . ./env.sh && echo $FASTDDS_DEFAULT_PROFILES_FILE"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.stdout.strip() == str(CONFIG / "fastdds_robot.xml"), out.stderr
    # What bcg-policy-node, bcg-mujoco-bridge and bcg-sim2sim call before rclpy.init (a fresh process, so the
    # environment of this one is untouched): unset -> the robot profile; a user's choice is kept.
    code = "from bcg_policy_node.startup import use_robot_dds_profile as u; print(u())"
    env = {k: v for k, v in os.environ.items() if k != "FASTDDS_DEFAULT_PROFILES_FILE"}
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO)
    assert got.stdout.strip() == str(CONFIG / "fastdds_robot.xml"), got.stderr
    got = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(env, FASTDDS_DEFAULT_PROFILES_FILE="/x.xml"),
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert got.stdout.strip() == "/x.xml", got.stderr
