"""State machine, safety checks and remote mapping of the policy node, without ROS processes."""

import math

import numpy as np
import pytest

import unitree_hg.msg  # noqa: F401 - a hard dependency: a broken install fails, not skips
from bcg_policy_node import lowlevel as ll
from bcg_policy_node.remote import RemoteMapper
from bcg_policy_node.safety import (
    SafetyLimits,
    check_finite,
    check_joint_limits,
    check_stale,
    check_tilt,
    tilt_angle,
)
from bcg_policy_node.state_machine import CommandKind, Event, Mode, StateMachine

DEFAULT = np.linspace(-0.3, 0.3, 29)
STAND_KP, STAND_KD = np.full(29, 300.0), np.full(29, 5.0)


def _sm(log):
    return StateMachine(
        DEFAULT, np.full(29, 40.0), np.full(29, 2.0), STAND_KP, STAND_KD, move_duration_s=2.0, on_transition=log.append
    )


def test_sequence_and_latched_damping():
    log = []
    sm = _sm(log)
    assert sm.targets(0.0).kind == CommandKind.NONE  # WAIT sends nothing
    sm.go(0.0, Mode.ZERO_TORQUE, "first valid LowState")
    assert sm.targets(0.1).kind == CommandKind.ZERO
    assert not sm.handle(0.1, Event.STOP, "test", DEFAULT)  # not in ZERO_TORQUE
    q0 = DEFAULT + 0.5
    assert sm.handle(1.0, Event.START, "test", q0)
    t = sm.targets(1.0)
    np.testing.assert_allclose(t.q, q0)  # the move starts at the measured pose
    np.testing.assert_allclose(t.kp, STAND_KP)  # bring-up gains until the policy runs
    np.testing.assert_allclose(sm.targets(2.0).q, q0 - 0.25)  # halfway (smoothstep(0.5) = 0.5)
    assert sm.targets(3.0).kind == CommandKind.PD and sm.mode == Mode.HOLD
    np.testing.assert_allclose(sm.targets(3.1).q, DEFAULT)
    assert sm.handle(3.2, Event.START, "test", DEFAULT) and sm.mode == Mode.RUN
    run = sm.targets(3.3, policy_q=DEFAULT + 0.1)
    np.testing.assert_allclose(run.q, DEFAULT + 0.1)
    np.testing.assert_allclose(run.kp, 40.0)  # the policy's own gains in RUN
    sm.fault(3.4, "torso tilt")
    assert sm.mode == Mode.DAMPING and sm.targets(3.5).kind == CommandKind.DAMP and sm.last_fault == "torso tilt"
    assert not sm.handle(3.6, Event.START, "test", DEFAULT)  # latched
    assert sm.handle(3.7, Event.RESET, "test", DEFAULT) and sm.mode == Mode.ZERO_TORQUE
    assert [t.dst for t in log] == [
        Mode.ZERO_TORQUE,
        Mode.MOVE_TO_DEFAULT,
        Mode.HOLD,
        Mode.RUN,
        Mode.DAMPING,
        Mode.ZERO_TORQUE,
    ]
    assert all(t.cause for t in log)


def test_fault_in_wait_does_nothing():
    sm = _sm([])
    sm.fault(0.0, "stale")
    assert sm.mode == Mode.WAIT


def test_safety_checks():
    lim = SafetyLimits.from_params(0.05, 0.8, 0.1)
    assert check_stale(0.01, lim) is None and "stale" in check_stale(0.2, lim)
    assert tilt_angle(np.array([0, 0, -1.0])) == 0.0
    g = np.array([math.sin(1.0), 0, -math.cos(1.0)])
    assert check_tilt(np.array([0, 0, -1.0]), lim) is None and "57 deg" in check_tilt(g, lim)
    q = (lim.lower + lim.upper) / 2
    assert check_joint_limits(q, lim) is None
    q[3] = lim.upper[3] + 0.2
    assert "left_knee" in check_joint_limits(q, lim)
    x = np.zeros(5)
    x[3] = np.inf
    assert "in b" in check_finite("observation", x, {"a": slice(0, 2), "b": slice(2, 5)})


def test_remote_mapping_chords_and_edges():
    m = RemoteMapper({Event.START: ["start"], Event.STOP: ["X"], Event.DAMP: ["select", "L2+B"], Event.RESET: ["L1+Y"]})
    r = lambda *b: ll.RemoteState(frozenset(b))  # noqa: E731
    assert m.update(r("start")) == Event.START
    assert m.update(r("start")) is None  # held, not a new press
    assert m.update(r()) is None
    assert m.update(r("L2")) is None
    assert m.update(r("L2", "B")) == Event.DAMP
    assert m.update(r()) is None
    assert m.update(r("L1", "Y")) == Event.RESET
    assert m.update(r("select", "start")) == Event.DAMP  # damp wins over start
    with pytest.raises(ValueError, match="unknown button"):
        RemoteMapper({Event.START: ["Start"]})
