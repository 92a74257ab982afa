"""bcg_policy_node's fallback timer, start-up gc freeze and warning throttle, checked on a real PolicyNode in
a subprocess (its own rclpy context) without spinning it: time is sim time set by hand (use_sim_time with
the ROS time override), so nothing depends on how fast this machine is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import rclpy  # noqa: F401 - a hard dependency: a broken install fails, not skips
from ros_helpers import REPO, isolated_domain

import unitree_hg.msg  # noqa: F401 - a hard dependency: a broken install fails, not skips
from bcg_sim.policy.cli import export_hold

SCRIPT = r"""
import json, sys
import rclpy
from rclpy.serialization import serialize_message
from rclpy.time import Time
import numpy as np
from bcg_policy_node import lowlevel as ll
from bcg_policy_node.policy_node import PolicyNode
from bcg_sim.g1.joints import JOINTS_29

art, config, gc_freeze = sys.argv[1:4]
rclpy.init(args=["x", "--ros-args", "--params-file", config, "-p", f"policy_path:={art}",
                 "-p", "use_sim_time:=true", "-p", f"gc_freeze:={gc_freeze}"])
node = PolicyNode()
clock, period = node.get_clock(), node.period
FALLBACK_TICK_PERIODS = node.cfg.fallback_tick_periods
out = {"period": period, "fallback_periods": FALLBACK_TICK_PERIODS, "timer_period_ns": node.timer.timer_period_ns}


def at(t):  # sim time t [s]
    clock.set_ros_time_override(Time(nanoseconds=round(t * 1e9), clock_type=clock.clock_type))


t0 = 10.0 + 0.25 * period  # off any grid of the timer's own period
at(t0)
node._safe_tick(node.now())  # a tick (what a LowState does): the fallback is due 1.5 periods from here
out["until_next_ns"] = node.timer.time_until_next_call()
at(t0 + 0.9 * FALLBACK_TICK_PERIODS * period)
out["ready_before"] = node.timer.is_ready()
at(t0 + FALLBACK_TICK_PERIODS * period)
out["ready_at"] = node.timer.is_ready()

# Warnings on every LowState (here: mode_machine alternates, a source conflict each message) reach rclpy's
# logger at most once per throttle interval (sim time frozen; the throttle runs on the wall clock).
calls = []


class CountingLogger:
    def __getattr__(self, name):
        return lambda *a, **k: calls.append(name)


node.get_logger = lambda: CountingLogger()
q = np.array([j.default for j in JOINTS_29])
for i in range(50):
    st = ll.make_lowstate(q, np.zeros(29), [1, 0, 0, 0], np.zeros(3), mode_machine=5 + i % 2, tick=i + 1)
    node._on_lowstate(serialize_message(st))
out["conflicts"] = node.source.counts["mode_machine_changes"]
out["warning_calls"] = calls.count("warning")

node.finish_startup()
import gc
out["frozen"] = gc.get_freeze_count()
out["diag_frozen"] = node.gc_monitor.summary()["gc_frozen_objects"]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def hold(tmp_path_factory):
    isolated_domain()
    return export_hold(str(tmp_path_factory.mktemp("timer") / "hold"), ("onnx",))


def _probe(hold, gc_freeze: bool) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(hold), str(REPO / "config" / "policy_node.yaml"), str(gc_freeze).lower()],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def probe(hold):
    return _probe(hold, True)


def test_fallback_timer_is_due_1_5_periods_after_the_last_tick(probe):
    """The fallback timer restarts from every tick: due exactly fallback_tick_periods after it, not before
    (a timer polling at half a period instead was due up to 2 periods after the last tick: an overrun)."""
    want_ns = round(probe["fallback_periods"] * probe["period"] * 1e9)
    assert probe["timer_period_ns"] == want_ns
    assert probe["until_next_ns"] == want_ns, probe
    assert not probe["ready_before"] and probe["ready_at"], probe


def test_per_message_warnings_are_throttled_before_rclpy(probe):
    assert probe["conflicts"] == 49
    assert probe["warning_calls"] == 1, probe  # rclpy's own throttle costs ~0.3-0.9 ms per call, even dropped


def test_startup_heap_frozen_unless_disabled(probe, hold):
    assert probe["frozen"] > 1000 and probe["diag_frozen"] == str(probe["frozen"]), probe
    off = _probe(hold, False)
    assert off["frozen"] == 0 and off["diag_frozen"] == "0", off
