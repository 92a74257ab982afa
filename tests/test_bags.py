"""Deployment bags: record real DDS traffic to MCAP, read it back unchanged, replay it with original
timing through `bcg-replay` (a separate process), and fail clearly on truncated or unfinished bags."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("unitree_hg.msg")

from ros_helpers import REPO, RosSide, isolated_domain, wait_for  # noqa: E402

from bcg_policy_node import lowlevel as ll  # noqa: E402
from bcg_policy_node.bags import BagError, BagRecorder, bag_topics, deserialize, read_bag  # noqa: E402

N = 60
PERIOD_S = 0.01


def _messages():
    from sensor_msgs.msg import JointState

    states = [ll.make_lowstate(np.full(29, 0.01 * i), np.sin(np.arange(29) + i), [1, 0, 0, 0], [0.1, 0, 0],
                               mode_machine=5, tick=2 * i) for i in range(N)]
    cmds = [ll.make_lowcmd(np.full(29, -0.01 * i), 40.0, 2.0, mode_machine=5) for i in range(N)]
    js = [JointState(name=["a", "b"], position=[float(i), 2.0 * i]) for i in range(N)]
    return {"/lowstate": states, "/lowcmd": cmds, "/joint_states": js}


def _roundtrip(msg):
    """What a subscriber sees: float64 fields become float32 on the wire."""
    from rclpy.serialization import deserialize_message, serialize_message

    return deserialize_message(serialize_message(msg), type(msg))


@pytest.fixture(scope="module")
def recorded_bag(tmp_path_factory):
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    isolated_domain()
    path = tmp_path_factory.mktemp("bags") / "run"
    ros = RosSide("bag_test")
    msgs = _messages()
    recorder = BagRecorder(path, list(msgs), context=ros.context)
    ros.executor.add_node(recorder)
    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    pubs = {t: ros.node.create_publisher(type(m[0]), t, qos) for t, m in msgs.items()}
    wait_for(lambda: all(p.get_subscription_count() > 0 for p in pubs.values()), 10.0, "recorder subscribed")
    for i in range(N):
        for t, p in pubs.items():
            p.publish(msgs[t][i])
        time.sleep(PERIOD_S)
    wait_for(lambda: all(recorder.bag.counts.get(t, 0) == N for t in msgs), 5.0, "all messages recorded")
    ros.executor.remove_node(recorder)
    counts = recorder.close()
    recorder.destroy_node()
    ros.close()
    return path, msgs, counts


def test_record_and_read_back_equal(recorded_bag):
    path, msgs, counts = recorded_bag
    assert counts == {t: N for t in msgs}
    assert bag_topics(path) == {"/lowstate": ("unitree_hg/msg/LowState", N), "/lowcmd": ("unitree_hg/msg/LowCmd", N),
                                "/joint_states": ("sensor_msgs/msg/JointState", N)}
    for topic, sent in msgs.items():
        got = [deserialize(m) for m in read_bag(path, [topic])]
        assert got == [_roundtrip(m) for m in sent], topic
    stamps = [m.timestamp_ns for m in read_bag(path)]
    assert stamps == sorted(stamps)
    # rosbags' own deserializer agrees (its registered unitree_hg types and CDR decoder).
    from bcg_policy_node.bags import typestore

    first = next(read_bag(path, ["/lowstate"]))
    decoded = typestore().deserialize_cdr(first.cdr, first.msgtype)
    assert decoded.tick == 0 and decoded.mode_machine == 5 and decoded.crc == msgs["/lowstate"][0].crc


def test_replay_publishes_with_original_timing(recorded_bag):
    from unitree_hg.msg import LowState

    path, msgs, _ = recorded_bag
    ros = RosSide("replay_listener")
    got: list = []
    ros.node.create_subscription(LowState, "/lowstate", lambda m: got.append((time.monotonic(), m)), 100)
    try:
        r = subprocess.run([sys.executable, "-m", "bcg_policy_node.replay", str(path), "--topics", "/lowstate",
                            "--rate", "2", "--delay", "0", "--wait-subscribers", "1"],
                           capture_output=True, text=True, timeout=60, cwd=REPO)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: len(got) == N, 5.0, f"all {N} replayed LowStates (got {len(got)}; {r.stdout.strip()})")
    finally:
        ros.close()
    assert [m for _, m in got] == [_roundtrip(m) for m in msgs["/lowstate"]]
    span = got[-1][0] - got[0][0]
    recorded_span = (N - 1) * PERIOD_S  # >= this: the publisher loop slept PERIOD_S per message
    assert recorded_span / 2 * 0.8 < span < recorded_span * 2, f"replayed in {span:.3f} s at rate 2"


def _run_replay(*args):
    return subprocess.run([sys.executable, "-m", "bcg_policy_node.replay", *map(str, args)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def test_truncated_bag_gives_clear_error(recorded_bag, tmp_path):
    path, _, _ = recorded_bag
    cut = tmp_path / "cut"
    shutil.copytree(path, cut)
    mcap = next(cut.glob("*.mcap"))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 2])
    with pytest.raises(BagError, match="truncated or corrupt"):
        list(read_bag(cut))
    r = _run_replay(cut)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "truncated or corrupt" in r.stderr, r.stderr
    (cut / "metadata.yaml").unlink()  # a recorder killed before close() leaves no metadata
    r = _run_replay(cut, "--check-policy", tmp_path)
    assert r.returncode == 2 and "not closed cleanly" in r.stderr and "Traceback" not in r.stderr, r.stderr
