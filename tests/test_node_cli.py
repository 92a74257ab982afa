"""The two node entry points on bad input and --help, as a user runs them (real processes, real rclpy):
one line naming the file or key, exit status 2, no traceback; `--help` prints usage and defaults and exits 0
without starting a node."""

from __future__ import annotations

import subprocess
import sys

import pytest
import rclpy  # noqa: F401 - a hard dependency: a broken install fails, not skips
import torch  # noqa: F401 - a hard dependency: a broken install fails, not skips
from ros_helpers import REPO, isolated_domain, policy_node_args

import unitree_hg.msg  # noqa: F401 - a hard dependency: a broken install fails, not skips
from bcg_sim.policy.cli import export_hold

NODES = {"policy": "bcg_policy_node.policy_node", "bridge": "bcg_policy_node.mujoco_bridge"}
BROKEN_YAML = "policy_node:\n  ros__parameters:\n    max_tilt_rad: [0.8\n"


@pytest.fixture(scope="module")
def hold(tmp_path_factory):
    isolated_domain()  # a node that wrongly starts must not talk to anyone else's
    return export_hold(str(tmp_path_factory.mktemp("cli") / "hold"), ("onnx",))


def _run(node: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", NODES[node], *args], capture_output=True, text=True, timeout=60, cwd=REPO
    )


def _one_error_line(r: subprocess.CompletedProcess) -> str:
    """The run failed with exit 2 and said why in exactly one stderr line (node start-up logs aside)."""
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith(("[INFO]", "[WARN]"))]
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.parametrize("node, prog", [("policy", "bcg-policy-node"), ("bridge", "bcg-mujoco-bridge")])
def test_help_prints_usage_and_defaults_without_starting(node, prog):
    r = _run(node, "--help")
    assert r.returncode == 0, r.stderr
    assert prog in r.stdout and "--params-file" in r.stdout
    # Defaults are listed (policy node: the dataclass; bridge: config/mujoco_bridge.yaml)
    assert ("stale_timeout_s = 0.05" if node == "policy" else "lowstate_rate_hz = 500.0") in r.stdout
    assert "[INFO]" not in r.stderr, "no node was started"


@pytest.mark.parametrize("node", ["policy", "bridge"])
def test_params_file_with_yaml_syntax_error(node, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BROKEN_YAML)
    line = _one_error_line(_run(node, "--ros-args", "--params-file", str(bad)))
    assert f"parameter file {bad}: YAML syntax error at line 4" in line


@pytest.mark.parametrize(
    "override, key",
    [
        ("stale_timout_s:=0.1", "unknown key(s) ['stale_timout_s']"),
        ("max_tilt_rad:=-1.0", "max_tilt_rad: must be in (0, pi], got -1.0"),
        ("executor:=threads", "executor: must be events or single_threaded"),
        ("nice:=-30", "nice: must be in -20..19, got -30"),
        ("cpu_affinity:=one", "cpu_affinity: must be a cpu list"),
        ("cmd_rate_hz:=fast", "cmd_rate_hz: expected a number"),
    ],
)
def test_policy_node_rejects_unknown_keys_and_bad_values(hold, override, key):
    line = _one_error_line(_run("policy", *policy_node_args(hold), "-p", override))
    assert line.startswith("bcg-policy-node: cannot start: parameters of node 'policy_node'") and key in line, line


def test_policy_node_refuses_an_unavailable_cpu(hold):
    line = _one_error_line(_run("policy", *policy_node_args(hold), "-p", "cpu_affinity:=4096"))
    assert line.startswith("bcg-policy-node: cannot start: cpu_affinity 4096: CPU(s) [4096] not available"), line


def test_policy_node_pins_every_thread(hold):
    """cpu_affinity pins the executor thread and the DDS threads started before it (read from /proc)."""
    import os
    import signal
    import time

    cpu = max(os.sched_getaffinity(0))
    p = subprocess.Popen(
        [sys.executable, "-m", NODES["policy"], *policy_node_args(hold), "-p", f"cpu_affinity:={cpu}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("threads pinned" in ln for ln in lines):
            ln = p.stdout.readline()
            assert ln, "".join(lines)  # the node exited
            lines.append(ln)
        assert any(f"threads pinned to CPU(s) [{cpu}]" in ln for ln in lines), "".join(lines)
        tasks = os.listdir(f"/proc/{p.pid}/task")
        assert len(tasks) > 1  # rclpy / Fast DDS threads besides the main one
        for tid in tasks:
            status = open(f"/proc/{p.pid}/task/{tid}/status").read()
            allowed = next(ln.split(":")[1].strip() for ln in status.splitlines() if ln.startswith("Cpus_allowed_list"))
            assert allowed == str(cpu), (tid, allowed)
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=30)


@pytest.mark.parametrize(
    "override, key",
    [
        ("variant:=31dof", "variant: must be one of ['23dof', '29dof']"),
        ("ground_truth_bodies:=[pelvis,nose]", "ground_truth_bodies: G1 model has no body named 'nose'"),
    ],
)
def test_bridge_rejects_unknown_variant_and_body(override, key):
    line = _one_error_line(_run("bridge", "--ros-args", "-p", override))
    assert line.startswith("bcg-mujoco-bridge: parameters of node 'mujoco_bridge'") and key in line, line


def test_policy_node_yaml_matches_the_config_dataclass():
    """config/policy_node.yaml sets every parameter, to the dataclass default (one source for --help)."""
    from dataclasses import asdict

    import yaml

    from bcg_policy_node.policy_node import PolicyNodeConfig

    params = yaml.safe_load((REPO / "config" / "policy_node.yaml").read_text())["policy_node"]["ros__parameters"]
    assert params == asdict(PolicyNodeConfig())
