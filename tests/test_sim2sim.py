"""sim2sim end to end: `bcg-sim2sim` (MuJoCo bridge + policy node + bag recorder, one process, real DDS)
runs the bring-up hold artifact through the remote-start sequence, the G1 stays up (ground-truth pelvis height),
and `bcg-replay --check-policy` re-runs the policy on the recorded bag: same artifact -> OK, another
policy -> non-zero exit."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import rclpy  # noqa: F401 - a hard dependency: a broken install fails, not skips
import torch
from ros_helpers import REPO, isolated_domain, wait_for

import unitree_hg.msg  # noqa: F401 - a hard dependency: a broken install fails, not skips
from bcg_policy_node.bags import bag_topics, deserialize, read_bag
from bcg_sim.policy import default_contract, export_policy
from bcg_sim.policy.cli import export_hold

SIM_S = 5.0


class ConstantAction(torch.nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs[:, :1] * 0.0 + 0.2 * torch.ones(1, 29, dtype=obs.dtype)


def _export_constant(out):
    """Same contract as the hold artifact (stand gains), another network: a different policy."""
    c = default_contract(reference_name="stand", gains="stand")
    return export_policy(ConstantAction(), c, out, ("onnx",))


def _sim2sim(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bcg_policy_node.sim2sim", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    isolated_domain()
    d = tmp_path_factory.mktemp("sim2sim")
    hold = export_hold(str(d / "hold"), ("onnx",))  # what `bcg-policy export-hold` writes
    bag = d / "bag"
    r = _sim2sim(
        "--policy", str(hold), "--duration", str(SIM_S), "--fast", "--start", "--record", str(bag), timeout=600
    )  # a hang guard: slow under load
    return r, d, hold, bag


def test_policy_runs_and_robot_stays_up(run):
    r, _, _, bag = run
    assert r.returncode == 0, r.stdout + r.stderr
    topics = bag_topics(bag)
    assert topics["/lowstate"][1] == round(SIM_S * 500)  # lockstep: one LowState per 2 ms of sim time
    assert abs(topics["/lowcmd"][1] - topics["/lowstate"][1]) <= 1  # and one LowCmd answering each
    transitions = [deserialize(m).data for m in read_bag(bag, ["/policy_node/transitions"])]
    assert [t.split(" -> ")[1].split(":")[0] for t in transitions] == ["ZERO_TORQUE", "MOVE_TO_DEFAULT", "HOLD", "RUN"]
    # The state machine runs on /clock: the move takes config/policy_node.yaml's 2.0 s of sim time whatever
    # the machine's load (on the wall clock it took 0.24 s of sim time on a loaded machine).
    assert "reached the default pose after 2.00 s" in transitions[2], transitions
    stamps = np.array([m.timestamp_ns for m in read_bag(bag, ["/lowstate"])]) * 1e-9
    assert 0 <= stamps[0] < 0.1 and abs(stamps[-1] - SIM_S) < 0.1  # --fast: recorded on sim time (/clock)
    z = np.array([deserialize(m).pose.position.z for m in read_bag(bag, ["/sim/ground_truth"])])
    assert len(z) >= SIM_S * 50 * 0.95
    assert z.min() > 0.65, f"pelvis fell to {z.min():.3f} m"
    assert "pelvis height 0.7" in r.stdout


def _check_policy(bag, policy) -> subprocess.CompletedProcess:
    """`bcg-replay BAG --check-policy POLICY`: re-runs the bag's RUN segments through the policy folder."""
    return subprocess.run(
        [sys.executable, "-m", "bcg_policy_node.replay", str(bag), "--check-policy", str(policy)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_check_policy_on_recorded_bag(run):
    _, d, hold, bag = run
    ok = _check_policy(bag, hold)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK" in ok.stdout and "max 0.000e+00 rad" in ok.stdout
    bad = _check_policy(bag, _export_constant(d / "const"))
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout, bad.stdout + bad.stderr


def test_start_that_never_reaches_run_exits_non_zero(run):
    _, _, hold, _ = run
    r = _sim2sim("--policy", str(hold), "--duration", "1.0", "--start")  # the move alone takes 2 s
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--start given but the policy never ran (RUN not reached in 1.00 s of sim time" in r.stderr


def test_sigterm_ends_without_traceback_and_keeps_the_summary(run, tmp_path):
    _, _, hold, _ = run
    log = tmp_path / "sim2sim.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-u",
                "-m",
                "bcg_policy_node.sim2sim",
                "--policy",
                str(hold),
                "--duration",
                "60",
                "--start",
            ],
            stdout=f,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        try:
            wait_for(lambda: "-> MOVE_TO_DEFAULT" in log.read_text(), 60, "the run to start")
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(30)
        finally:
            proc.kill()
    out = log.read_text()
    assert rc == 130, out
    assert "Traceback" not in out and "interrupted (SIGTERM)" in out, out
    assert "MOVE_TO_DEFAULT -> DAMPING: node shutdown" in out or "RUN -> DAMPING: node shutdown" in out, out
    assert "s sim in" in out.splitlines()[-1], out  # the summary line is the last line


@pytest.mark.parametrize("broken", ["params_yaml", "truncated_onnx"])
def test_bad_input_is_one_line_exit_2(run, tmp_path, broken):
    _, _, hold, _ = run
    args = ["--policy", str(hold), "--duration", "0.1"]
    if broken == "params_yaml":
        bad = tmp_path / "bad.yaml"
        bad.write_text("policy_node:\n  ros__parameters:\n    max_tilt_rad: [0.8\n")
        args += ["--ros-args", "--params-file", str(bad)]
        want = f"parameter file {bad}: YAML syntax error at line 4"
    else:
        art = tmp_path / "art"
        shutil.copytree(hold, art)
        onnx = next(art.glob("*.onnx"))
        onnx.write_bytes(onnx.read_bytes()[:200])
        args[1] = str(art)
        want = "cannot start:"
    r = _sim2sim(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith("[INFO]")]  # node start-up logs
    assert len(lines) == 1 and want in lines[0] and "Traceback" not in r.stderr, r.stderr
