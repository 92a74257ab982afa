"""Deployment bags: record real DDS traffic to MCAP, read it back unchanged, replay it with original
timing through `bcg-replay` (a separate process), and fail clearly on truncated or unfinished bags."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import rclpy  # noqa: F401 - a hard dependency: a broken install fails, not skips
from ros_helpers import REPO, RosSide, isolated_domain, wait_for

import unitree_hg.msg  # noqa: F401 - a hard dependency: a broken install fails, not skips
from bcg_policy_node import lowlevel as ll
from bcg_policy_node.bags import BagError, BagRecorder, bag_topics, deserialize, read_bag

N = 60
PERIOD_S = 0.01


def _messages():
    from sensor_msgs.msg import JointState

    states = [
        ll.make_lowstate(
            np.full(29, 0.01 * i), np.sin(np.arange(29) + i), [1, 0, 0, 0], [0.1, 0, 0], mode_machine=5, tick=2 * i
        )
        for i in range(N)
    ]
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
    assert bag_topics(path) == {
        "/lowstate": ("unitree_hg/msg/LowState", N),
        "/lowcmd": ("unitree_hg/msg/LowCmd", N),
        "/joint_states": ("sensor_msgs/msg/JointState", N),
    }
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
        t0 = time.monotonic()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "bcg_policy_node.replay",
                str(path),
                "--topics",
                "/lowstate",
                "--rate",
                "2",
                "--delay",
                "0",
                "--wait-subscribers",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        replay_s = time.monotonic() - t0
        assert r.returncode == 0, r.stderr
        wait_for(lambda: len(got) == N, 5.0, f"all {N} replayed LowStates (got {len(got)}; {r.stdout.strip()})")
    finally:
        ros.close()
    assert [m for _, m in got] == [_roundtrip(m) for m in msgs["/lowstate"]]
    recorded_span = (N - 1) * PERIOD_S  # >= this: the publisher loop slept PERIOD_S per message
    # Paced, not dumped: at rate 2 the replay sleeps through at least half the recorded span, so its process
    # cannot end sooner (a loaded CPU only makes it later; the schedule itself: the next test).
    assert replay_s >= recorded_span / 2, f"replayed in {replay_s:.3f} s at rate 2"


def test_replay_plan_divides_the_recorded_spacing_by_the_rate(recorded_bag):
    """The schedule play() follows, from the real bag: at --rate 2 every offset is half the recorded one."""
    path, msgs, _ = recorded_bag
    plans = {}
    for rate in ("1", "2"):
        r = _run_replay(path, "--topics", "/lowstate", "--rate", rate, "--plan")
        assert r.returncode == 0, r.stderr
        rows = [ln.split() for ln in r.stdout.splitlines()]
        assert len(rows) == N and all(t == "/lowstate" for _, t, _ in rows)
        plans[rate] = [(float(o), int(stamp)) for o, _, stamp in rows]
    stamps = [s for _, s in plans["1"]]
    assert stamps == sorted(stamps) and stamps == [s for _, s in plans["2"]]
    recorded = [(s - stamps[0]) * 1e-9 for s in stamps]
    assert [o for o, _ in plans["1"]] == pytest.approx(recorded, abs=1e-6)
    assert [o for o, _ in plans["2"]] == pytest.approx([x / 2 for x in recorded], abs=1e-6)
    assert recorded[-1] > 0.5 * (N - 1) * PERIOD_S  # the bag's spacing is the publisher's, not zero


def _run_replay(*args):
    return subprocess.run(
        [sys.executable, "-m", "bcg_policy_node.replay", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


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


# ---------------------------------------------------------------------------------------------------------
# Crash safety: split files + metadata as each closes; --recover rebuilds truncated files.

SPLIT_S = 0.3  # small files so that a few seconds of recording span several
KILL_RATE_HZ = 200.0
POLL_S = 0.1  # how often the SIGKILL test reads the bag's closed splits while it publishes


def _ticks(path, topic="/lowstate"):
    return [deserialize(m).tick for m in read_bag(path, [topic])]


def _record_and_kill(pub, bag, kill_after_s, log):
    """Start a real recorder process, publish LowStates (tick = index), and SIGKILL it once it has closed a
    split holding a message published after the kill clock started and kill_after_s have passed.
    Returns the ticks the bag's closed splits held just before the kill, the first tick published after the
    kill clock started and the number of messages sent."""
    from ros_helpers import NodeProcess

    topic = pub.topic_name
    rec = NodeProcess("bcg_policy_node.bags", [str(bag), "--topics", topic, "--split-s", str(SPLIT_S)], log)
    try:
        wait_for(lambda: pub.get_subscription_count() > 0, 30.0, f"recorder subscribed ({rec.output()})")
        i = 0

        def publish_one():
            nonlocal i
            pub.publish(ll.make_lowstate(np.zeros(29), np.zeros(29), [1, 0, 0, 0], [0, 0, 0], tick=i))
            i += 1
            time.sleep(1.0 / KILL_RATE_HZ)

        def publish_for(seconds: float):
            t = time.monotonic()
            while time.monotonic() - t < seconds:
                publish_one()

        def closed_ticks() -> list[int]:  # what the closed splits hold now (metadata.yaml is replaced atomically)
            return _ticks(bag, topic) if (bag / "metadata.yaml").exists() else []

        # The kill clock starts once a closed split holds a message (the reader is matched and receiving: after
        # the previous recorder's SIGKILL, Fast DDS's shared-memory port health check can delay that for
        # seconds on a loaded machine), and the kill waits until a split closed after the clock started holds
        # a message published after it: a recorder starved of CPU is then still killed in the middle of its
        # work. What the bag keeps is judged on content, not on how far a loaded recorder lags the wall clock.
        # The bag is read between bursts of POLL_S, not after every message: splits close every SPLIT_S.
        deadline = time.monotonic() + 60.0
        while not closed_ticks() and time.monotonic() < deadline:
            publish_for(POLL_S)
        assert closed_ticks(), f"recorder wrote nothing in 60 s ({rec.output()})"
        clock_tick = i
        publish_for(kill_after_s)
        while closed_ticks()[-1] < clock_tick and time.monotonic() < deadline:
            publish_for(POLL_S)
        before = closed_ticks()
        assert before[-1] >= clock_tick, f"recorder closed no split in 60 s ({rec.output()})"
        rec.proc.send_signal(signal.SIGKILL)
        rec.proc.wait(10)
    finally:
        rec.stop()
    return before, clock_tick, i


def test_sigkill_at_random_times_loses_at_most_the_last_split(tmp_path):
    """kill -9 of a real recorder process at random moments: the bag reads as is, keeps everything its closed
    splits held before the kill (only the open split is lost) in an unbroken run once the reader had matched,
    and --recover keeps all of it."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from unitree_hg.msg import LowState

    rng = np.random.default_rng(10)
    ros = RosSide("kill_test_publisher")
    # the writer keeps what a stalled reader missed, for as long as _record_and_kill may wait (60 s)
    qos = QoSProfile(depth=int(60 * KILL_RATE_HZ), reliability=ReliabilityPolicy.RELIABLE)
    try:
        for k, kill_after in enumerate(rng.uniform(0.6, 1.8, size=3)):
            # A topic per kill: a SIGKILLed subscriber stays matched until its DDS lease runs out.
            topic = f"/kill{k}/lowstate"
            pub = ros.node.create_publisher(LowState, topic, qos)
            bag = tmp_path / f"killed{k}"
            before, clock_tick, n_sent = _record_and_kill(pub, bag, kill_after, tmp_path / f"rec{k}.log")
            ticks = _ticks(bag, topic)  # no recovery needed: metadata.yaml lists every closed file
            print(f"kill {k} after {kill_after:.2f} s: ticks {ticks[0]}..{ticks[-1]} of {n_sent} sent")
            # Before the clock the reader was still matching (volatile QoS: what went before is not a loss).
            assert ticks[: len(before)] == before, f"kill {k}: the kill lost messages of closed splits"
            after_clock = [t for t in ticks if t >= clock_tick]
            assert after_clock == list(range(clock_tick, ticks[-1] + 1)), f"kill {k}: gaps after tick {clock_tick}"
            r = _run_replay(bag, "--recover")
            assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
            recovered = _ticks(bag, topic)
            assert recovered[: len(ticks)] == ticks, f"kill {k}: recovery lost messages"
            assert recovered[len(ticks) :] == list(range(ticks[-1] + 1, recovered[-1] + 1)), f"kill {k}: recovery gaps"
    finally:
        ros.close()


def _single_file_bag(path, n):
    """A bag written the way rosbags (and old bcg) writes one: one MCAP file, chunks of ~1 MiB."""
    from rclpy.serialization import serialize_message
    from rosbags.rosbag2 import StoragePlugin, Writer

    from bcg_policy_node.bags import typestore

    w = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    w.open()
    conn = w.add_connection("/lowstate", "unitree_hg/msg/LowState", typestore=typestore())
    for i in range(n):
        msg = ll.make_lowstate(np.full(29, 1e-3 * i), np.zeros(29), [1, 0, 0, 0], [0, 0, 0], tick=i)
        w.write(conn, 1_000_000 * i, serialize_message(msg))
    w.close()


def test_recover_rebuilds_what_a_cut_file_still_holds(tmp_path):
    """A bag cut at 90 % (copy interrupted, disk full) is unreadable; --recover keeps every complete chunk."""
    bag = tmp_path / "cut90"
    n = 2200  # > 2 chunks of 1 MiB
    _single_file_bag(bag, n)
    mcap = next(bag.glob("*.mcap"))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: int(0.9 * len(data))])
    with pytest.raises(BagError, match="--recover"):
        list(read_bag(bag))
    r = _run_replay(bag, "--recover")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    ticks = _ticks(bag)
    assert ticks == list(range(len(ticks))) and n // 2 < len(ticks) < n, len(ticks)
    first = next(read_bag(bag, ["/lowstate"]))
    assert first.timestamp_ns == 0
    assert (bag / "recover_originals" / mcap.name).stat().st_size == int(0.9 * len(data))  # original kept
    assert bag_topics(bag) == {"/lowstate": ("unitree_hg/msg/LowState", len(ticks))}


def test_recover_without_metadata_and_with_a_cut_split(tmp_path):
    """The split bag of a clean recording, its last file cut and metadata.yaml gone: --recover reads the rest."""
    from bcg_policy_node.bags import BagWriter, typestore

    bag = tmp_path / "split"
    w = BagWriter(bag, split_s=0.0)  # every message closes its file
    w.add_topic("/x", "std_msgs/msg/String")
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    for i in range(5):
        w.write("/x", 10 * i, serialize_message(String(data=f"m{i}")))
    w.close()
    assert [deserialize(m).data for m in read_bag(bag)] == [f"m{i}" for i in range(5)]
    assert len(list(bag.glob("*.mcap"))) == 5
    last = bag / "split_4.mcap"
    last.write_bytes(last.read_bytes()[:40])
    (bag / "metadata.yaml").unlink()
    r = _run_replay(bag)
    assert r.returncode == 2 and "--recover" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = _run_replay(bag, "--recover")
    assert r.returncode == 0, r.stderr
    assert [deserialize(m).data for m in read_bag(bag)] == [f"m{i}" for i in range(4)]
    assert typestore() is not None


def test_wrong_message_type_on_lowstate_is_refused(tmp_path):
    from rclpy.serialization import serialize_message
    from std_msgs.msg import String

    from bcg_policy_node.bags import BagWriter

    bag = tmp_path / "wrong"
    w = BagWriter(bag)
    for topic in ("/lowstate", "/lowcmd", "/policy_node/transitions"):
        w.add_topic(topic, "std_msgs/msg/String")
    for i in range(20):
        for topic in ("/lowstate", "/lowcmd"):
            w.write(topic, i, serialize_message(String(data="x" * i)))
    w.write("/policy_node/transitions", 0, serialize_message(String(data="HOLD -> RUN: start")))
    w.close()
    for args in ((bag, "--delay", "0"), (bag, "--check-policy", tmp_path)):
        r = _run_replay(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "/lowstate holds std_msgs/msg/String" in lines[0], r.stderr
        assert "published" not in r.stdout


def test_recover_a_cut_sqlite_bag_without_metadata(tmp_path):
    """`ros2 bag record` (sqlite3 by default) killed: no metadata.yaml, and here the .db3 cut at 70 %."""
    from rclpy.serialization import serialize_message
    from rosbags.rosbag2 import StoragePlugin, Writer

    from bcg_policy_node.bags import typestore

    bag = tmp_path / "ros2bag"
    n = 2000
    w = Writer(bag, version=9, storage_plugin=StoragePlugin.SQLITE3)
    w.open()
    conn = w.add_connection("/lowstate", "unitree_hg/msg/LowState", typestore=typestore())
    for i in range(n):
        msg = ll.make_lowstate(np.zeros(29), np.zeros(29), [1, 0, 0, 0], [0, 0, 0], tick=i)
        w.write(conn, 1_000_000 * i, serialize_message(msg))
    w.close()
    from bcg_policy_node.bag_recovery import salvage_sqlite

    db = next(bag.glob("*.db3"))
    whole = salvage_sqlite(db)  # the page reader agrees with SQLite's own reading on a complete file
    assert whole.complete and [m[3] for m in whole.messages] == [m.cdr for m in read_bag(bag)]
    (bag / "metadata.yaml").unlink()
    data = db.read_bytes()
    db.write_bytes(data[: int(0.7 * len(data))])
    r = _run_replay(bag, "--recover")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    ticks = _ticks(bag)
    assert ticks == list(range(len(ticks))) and n // 3 < len(ticks) < n, len(ticks)
    assert (bag / "recover_originals" / db.name).is_file()


def _still_robot_bag(path, seconds, q_std, dq_std, gyro_std, seed=0):
    """A /lowstate bag of a robot swaying slowly (0.5 Hz, 0.05 rad) at 500 Hz with white sensor noise of these
    stds, and two glitches (a 10-sample bump on one encoder, a spike on the gyro)."""
    from rclpy.serialization import serialize_message

    from bcg_policy_node.bags import BagWriter

    rng = np.random.default_rng(seed)
    n = int(seconds * 500)
    t = np.arange(n)[:, None] * 0.002
    phase = rng.uniform(0, 2 * np.pi, 29)
    q = 0.05 * np.sin(np.pi * t + phase) + rng.normal(0, q_std, (n, 29))
    dq = 0.05 * np.pi * np.cos(np.pi * t + phase) + rng.normal(0, dq_std, (n, 29))
    gyro = 0.02 * np.sin(np.pi * t + phase[:3]) + rng.normal(0, gyro_std, (n, 3))
    q[500:510, 3] += 0.2
    gyro[700, 1] += 3.0
    w = BagWriter(path)
    w.add_topic("/lowstate", "unitree_hg/msg/LowState")
    for i in range(n):
        msg = ll.make_lowstate(q[i], dq[i], [1, 0, 0, 0], gyro[i], mode_machine=5, tick=i)
        w.write("/lowstate", 2_000_000 * i, serialize_message(msg))
    w.close()


def test_sensor_noise_levels_from_a_still_robots_lowstate(tmp_path, capsys):
    from bcg_policy_node.replay import main as replay_main
    from bcg_policy_node.sensor_noise import estimate

    bag = tmp_path / "still"
    _still_robot_bag(bag, 6.0, q_std=0.003, dq_std=0.08, gyro_std=0.01)
    r = estimate(bag)
    assert r.messages == 3000 and r.seconds == pytest.approx(5.998)
    # the sway and the glitches do not count: each level within 6 % of the std the bag was made with
    assert r.levels() == pytest.approx((0.003, 0.08, 0.01), rel=0.06)
    assert np.all(np.abs(r.joint_pos / 0.003 - 1) < 0.15) and np.all(np.abs(r.gyro / 0.01 - 1) < 0.15)
    assert estimate(bag, start_s=2.0).messages == 2000
    capsys.readouterr()
    assert replay_main([str(bag), "--sensor-noise", "--end", "4"]) == 0
    out = capsys.readouterr().out
    q, dq, g = (float(x) for x in out.split("--noise")[1].split())
    assert (q, dq, g) == pytest.approx((0.003, 0.08, 0.01), rel=0.1)
    assert "2001 /lowstate messages over 4.0 s (500 Hz)" in out

    # too short a span, or an empty one: one line, exit 2
    for args in (("--start", "5.9"), ("--start", "3", "--end", "2")):
        assert replay_main([str(bag), "--sensor-noise", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("bcg-replay: error:"), err
