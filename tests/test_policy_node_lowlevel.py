"""lowlevel: LowState/LowCmd <-> numpy in both directions, CRC on every built message, rejection of bad
messages, and the wireless-remote layout."""

from types import SimpleNamespace

import numpy as np
import pytest

from bcg_policy_node import lowlevel as ll
from bcg_policy_node.crc import lowcmd_crc, lowstate_crc
from unitree_hg.msg import LowCmd

RNG = np.random.default_rng(0)


def _state_msg(**kw):
    q, dq = RNG.normal(size=29), RNG.normal(size=29)
    quat = np.array([0.9, 0.1, -0.2, 0.3])
    quat /= np.linalg.norm(quat)
    msg = ll.make_lowstate(
        q,
        dq,
        quat,
        [0.1, 0.2, 0.3],
        [0.0, 0.5, 9.8],
        tau_est=np.arange(29.0),
        mode_machine=5,
        tick=1234,
        wireless_remote=ll.encode_remote(["start"], ly=0.5),
        **kw,
    )
    return msg, q, dq, quat


def test_lowstate_round_trip_and_crc():
    msg, q, dq, quat = _state_msg()
    assert msg.crc == lowstate_crc(msg)
    s = ll.lowstate_to_state(msg)
    np.testing.assert_allclose(s.joint_pos, q, atol=1e-6)
    np.testing.assert_allclose(s.joint_vel, dq, atol=1e-6)
    np.testing.assert_allclose(s.base_quat_w, quat, atol=1e-6)
    np.testing.assert_allclose(s.base_ang_vel_b, [0.1, 0.2, 0.3], atol=1e-6)
    np.testing.assert_allclose(s.joint_tau, np.arange(29.0))
    assert (s.mode_machine, s.tick) == (5, 1234)
    assert s.remote.buttons == {"start"} and s.remote.ly == pytest.approx(0.5)


def test_lowstate_rejects_bad_crc_nan_and_lengths():
    msg, *_ = _state_msg()
    msg.crc ^= 1
    with pytest.raises(ll.BadMessage, match="crc"):
        ll.lowstate_to_state(msg)
    msg.motor_state[3].q = float("nan")
    msg.crc = lowstate_crc(msg)
    with pytest.raises(ll.BadMessage, match="non-finite"):
        ll.lowstate_to_state(msg)
    # rclpy refuses wrong fixed-array lengths at publish time; the check still guards other sources
    short = SimpleNamespace(motor_state=[None] * 34, imu_state=msg.imu_state, wireless_remote=msg.wireless_remote)
    with pytest.raises(ll.BadMessage, match="motor_state has 34"):
        ll.lowstate_to_state(short)


def test_lowcmd_round_trip_crc_and_pd():
    q, kp, kd = RNG.normal(size=29), np.full(29, 40.0), np.full(29, 2.0)
    msg = ll.make_lowcmd(q, kp, kd, tau=0.5, mode_machine=7)
    assert msg.crc == lowcmd_crc(msg) and msg.mode_machine == 7
    assert all(m.mode == 0 and m.kp == 0 for m in msg.motor_cmd[29:])
    c = ll.lowcmd_to_command(msg)
    np.testing.assert_allclose(c.q, q, atol=1e-6)
    tau = ll.pd_torque(c, np.zeros(29), np.ones(29), effort_limit=np.full(29, 5.0))
    np.testing.assert_allclose(tau, np.clip(0.5 + 40 * c.q - 2.0, -5, 5), atol=1e-4)
    msg.motor_cmd[0].kp = 1.0
    with pytest.raises(ll.BadMessage, match="crc"):
        ll.lowcmd_to_command(msg)


def test_damping_and_refusal_of_nan_targets():
    msg = ll.fill_damping(LowCmd(), 8.0, mode_machine=3)
    c = ll.lowcmd_to_command(msg)
    assert np.all(c.kp == 0) and np.all(c.kd == 8.0) and np.all(c.mode == 1)
    with pytest.raises(ValueError, match="non-finite"):
        ll.make_lowcmd(np.full(29, np.nan), 1.0, 1.0, mode_machine=0)


def test_remote_layout_matches_unitree():
    raw = ll.encode_remote(["R1", "L2", "B", "left"], lx=-1.0, rx=0.25, ry=0.5, ly=1.0, l2=0.75)
    assert len(raw) == 40
    bits = int.from_bytes(raw[2:4], "little")
    assert bits == (1 << 0) | (1 << 5) | (1 << 9) | (1 << 15)
    assert np.frombuffer(raw[4:24], "<f4").tolist() == [-1.0, 0.25, 0.5, 0.75, 1.0]  # lx rx ry L2 ly
    r = ll.decode_remote(raw)
    assert r.pressed("L2", "B") and not r.pressed("A")
    assert (r.lx, r.rx, r.ry, r.ly, r.l2) == (-1.0, 0.25, 0.5, 1.0, 0.75)


def test_lowstate_from_cdr_bytes_equals_the_message_path():
    """The policy node reads LowState from its serialized CDR bytes (raw subscription): same RobotState as
    rclpy's message path, same CRC verdict and the same rejections."""
    from rclpy.serialization import deserialize_message, serialize_message

    from unitree_hg.msg import LowState

    rng = np.random.default_rng(3)
    for _ in range(5):
        msg = ll.make_lowstate(
            rng.normal(0, 1, 29),
            rng.normal(0, 1, 29),
            [0.9, 0.1, -0.3, 0.2],
            rng.normal(0, 1, 3),
            rng.normal(0, 9, 3),
            tau_est=rng.normal(0, 5, 29),
            ddq=rng.normal(0, 9, 29),
            mode_machine=int(rng.integers(0, 256)),
            tick=int(rng.integers(0, 2**32)),
            wireless_remote=ll.encode_remote(["L1", "A"], lx=0.3),
        )
        for m in msg.motor_state:  # fields the CRC covers but the state does not use
            m.temperature, m.vol, m.sensor, m.motorstate = [int(rng.integers(-99, 99))] * 2, 24.5, [7, 8], 3
        msg.version, msg.reserve = [1, 2], [5, 6, 7, 8]
        msg.crc = lowstate_crc(msg)
        data = serialize_message(msg)
        a, b = ll.lowstate_to_state(deserialize_message(data, LowState)), ll.lowstate_cdr_to_state(data)
        for k in a.__dataclass_fields__:
            x, y = getattr(a, k), getattr(b, k)
            assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, k
    for mutate, word in (
        (lambda d: d.__setitem__(200, d[200] ^ 1), "crc mismatch"),
        (lambda d: d.__setitem__(1, 0), "little-endian"),
        (lambda d: d.__delitem__(slice(-8, None)), "expected 2092 bytes"),
    ):
        bad = bytearray(data)
        mutate(bad)
        with pytest.raises(ll.BadMessage, match=word):
            ll.lowstate_cdr_to_state(bytes(bad))
    msg.motor_state[4].q = float("nan")
    msg.crc = lowstate_crc(msg)
    with pytest.raises(ll.BadMessage, match=r"motor_state\[:29\].q has non-finite values at index \[4\]"):
        ll.lowstate_cdr_to_state(serialize_message(msg))
