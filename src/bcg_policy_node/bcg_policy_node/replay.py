"""bcg-replay: play a deployment bag back on its topics, or re-run the policy on it offline.

    bcg-replay BAG [--rate R] [--topics T ...] [--delay S] [--wait-subscribers N] [--plan]
        publishes every message on its original topic with real rclpy publishers, keeping the recorded
        spacing (divided by --rate), after --delay s (and, with --wait-subscribers N, once N subscribers
        matched on every topic). --plan prints that schedule (offset s, topic, stamp) and publishes nothing.
    bcg-replay BAG --check-policy DIR [--tolerance RAD]
        deploy consistency check: for every RUN segment of the bag (from /policy_node/transitions) the policy
        in DIR is run offline on the recorded /lowstate, with the policy node's own runner (same observation
        builder, reference timing and target clipping), and its joint targets are compared with the
        recorded /lowcmd. Prints max/mean |target difference| [rad] and the largest relative kp/kd
        difference; exit status 1 when the max exceeds --tolerance or the gains are not the artifact's.

    bcg-replay BAG --sensor-noise [--start S] [--end S]
        the noise of the encoders, joint velocities and gyroscope, from the /lowstate of a robot standing still
        (between S and S seconds of the bag): the levels `bcg-eval --noise` takes (bcg_policy_node.sensor_noise).

    bcg-replay BAG --recover
        rebuild a bag whose recorder was killed or whose files were cut: keeps every complete message of
        its MCAP files, rewrites the damaged ones (originals kept in BAG/recover_originals/), writes a new
        metadata.yaml.

A bag whose deploy topics (/lowstate, /lowcmd, ...) hold other message types than bcg's is refused.
Exit status: 0 ok, 1 check beyond tolerance, 2 unreadable/truncated bag, wrong message types or bad
arguments (one-line error).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from bcg_policy_node.bags import (
    BagError,
    BagMessage,
    bag_topics,
    check_topic_types,
    deserialize,
    message_class,
    read_bag,
)

TRANSITIONS_TOPIC = "/policy_node/transitions"


# ---------------------------------------------------------------------------------------------------------
# Playback


def schedule(bag: str | Path, topics: Sequence[str], rate: float):
    """Iterator of (offset [s] after the first message at which to publish, message) for the bag's messages on
    `topics` in recorded order: the recorded spacing divided by `rate`. The plan `play` follows and `--plan`
    prints. A bad rate is refused here, before anything is read or published."""
    if rate <= 0:
        raise ValueError(f"--rate must be > 0, got {rate}")

    def offsets():
        t_bag0 = None
        for msg in read_bag(bag, topics):
            if t_bag0 is None:
                t_bag0 = msg.timestamp_ns
            yield (msg.timestamp_ns - t_bag0) * 1e-9 / rate, msg

    return offsets()


def _chosen_topics(bag: str | Path, topics: Sequence[str] | None) -> dict:
    """{topic: (type, count)} of the topics to replay (all by default); a bad bag or topic is a BagError."""
    available = bag_topics(bag)  # opens the bag first: a bad bag fails before any ROS setup
    check_topic_types(bag, {t: m for t, (m, _) in available.items()})
    chosen = list(available) if not topics else list(topics)
    missing = [t for t in chosen if t not in available]
    if missing:
        raise BagError(f"bag {bag} has no topic(s) {missing}; it has {sorted(available)}")
    return {t: available[t] for t in chosen}


def print_plan(bag: str | Path, rate: float, topics: Sequence[str] | None) -> int:
    """`--plan`: the playback schedule (offset s, topic, recorded stamp ns) without publishing; returns the
    number of messages."""
    n = 0
    for offset, msg in schedule(bag, list(_chosen_topics(bag, topics)), rate):
        print(f"{offset:.6f} {msg.topic} {msg.timestamp_ns}")
        n += 1
    return n


def play(
    bag: str | Path,
    rate: float = 1.0,
    topics: Sequence[str] | None = None,
    delay_s: float = 1.0,
    wait_subscribers: int = 0,
    wait_timeout_s: float = 30.0,
) -> int:
    """Publish the bag's messages with their recorded spacing / rate; returns the number published.

    Playback starts after `delay_s`, and, with wait_subscribers > 0, once every chosen topic has that many
    matched subscribers (DDS discovery takes longer on a loaded machine; a sample published before the match
    is lost). Waiting longer than wait_timeout_s is an error."""
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    chosen = _chosen_topics(bag, topics)
    plan = schedule(bag, list(chosen), rate)  # checks the rate before any ROS setup
    rclpy.init()
    node = rclpy.create_node("bcg_replay")
    try:
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        pubs = {t: node.create_publisher(message_class(chosen[t][0]), t, qos) for t in chosen}
        time.sleep(delay_s)  # let subscribers discover the publishers
        _wait_for_subscribers(pubs, wait_subscribers, wait_timeout_s)
        n, t_wall0 = 0, None
        for offset, msg in plan:
            if t_wall0 is None:
                t_wall0 = time.monotonic()
            wait = t_wall0 + offset - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            pubs[msg.topic].publish(msg.cdr)  # CDR bytes as recorded: no re-serialization
            n += 1
        time.sleep(0.2)  # reliable writers: give the last samples time to go out before destroying them
        return n
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def _wait_for_subscribers(pubs: dict, count: int, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while any(p.get_subscription_count() < count for p in pubs.values()):
        if time.monotonic() > end:
            short = [t for t, p in pubs.items() if p.get_subscription_count() < count]
            raise BagError(f"no {count} subscriber(s) on {short} after {timeout_s} s")
        time.sleep(0.01)


# ---------------------------------------------------------------------------------------------------------
# Offline policy check


@dataclass
class CheckResult:
    steps: int  # policy steps compared
    segments: int  # RUN segments found
    max_diff: float  # [rad] max |offline target - recorded target| over steps and joints
    mean_diff: float  # [rad] mean of the same
    max_gain_diff: float  # max relative |recorded kp, kd - the policy's kp, kd| (0 = the artifact's gains)


def run_segments(messages: list[BagMessage]) -> list[tuple[int, int]]:
    """(start, end) bag timestamps [ns] of the RUN segments, from the policy node's transition messages."""
    segs, start = [], None
    for m in messages:
        if m.topic != TRANSITIONS_TOPIC:
            continue
        text = deserialize(m).data  # "SRC -> DST: cause"
        src, _, rest = text.partition(" -> ")
        dst = rest.split(":", 1)[0].strip()
        if dst == "RUN":
            start = m.timestamp_ns
        elif src.strip() == "RUN" and start is not None:
            segs.append((start, m.timestamp_ns))
            start = None
    if start is not None:
        segs.append((start, messages[-1].timestamp_ns + 1))
    return segs


def check_policy(bag: str | Path, policy_dir: str | Path, runtime: str = "auto") -> CheckResult:
    """Re-run the policy on the recorded /lowstate of each RUN segment; compare with the recorded /lowcmd.

    The node runs the policy on the first RUN tick and every `decimation` ticks after it, each time on the
    latest LowState it has, and sends the new targets in that tick's LowCmd. Offline: policy step k uses the
    last LowState recorded before RUN-segment LowCmd number k * decimation and is compared with it.
    """
    from bcg_policy_node import lowlevel as ll
    from bcg_policy_node.policy_runner import PolicyRunner
    from bcg_sim.policy import load_policy

    check_topic_types(bag, {t: m for t, (m, _) in bag_topics(bag).items()})
    messages = list(read_bag(bag, None))
    topics = {m.topic for m in messages}
    for needed in ("/lowstate", "/lowcmd", TRANSITIONS_TOPIC):
        if needed not in topics:
            raise BagError(
                f"bag {bag} has no {needed} messages; --check-policy needs /lowstate, /lowcmd and {TRANSITIONS_TOPIC}"
            )
    segments = run_segments(messages)
    if not segments:
        raise BagError(f"bag {bag} has no RUN segment (the policy never ran while recording)")
    policy = load_policy(policy_dir, runtime=runtime)
    cmd_per_step = round(policy.contract.control_dt * 500.0)  # LowCmd ticks per policy step at 500 Hz
    diffs: list[np.ndarray] = []
    gain_diff = 0.0
    kp, kd = np.asarray(policy.contract.kp), np.asarray(policy.contract.kd)
    for start, end in segments:
        runner = PolicyRunner(policy)
        state = None
        pairs: list[tuple[object, object]] = []  # (state before cmd, cmd) in the segment
        for m in messages:
            if m.topic == "/lowstate":
                state = m
            elif m.topic == "/lowcmd" and start <= m.timestamp_ns < end and state is not None:
                pairs.append((state, m))
        for k, (s_msg, c_msg) in enumerate(pairs[::cmd_per_step]):
            robot_state = ll.lowstate_to_state(deserialize(s_msg))
            if k == 0:
                runner.start(robot_state)
            q_offline = runner.step(robot_state)
            recorded = ll.lowcmd_to_command(deserialize(c_msg))
            diffs.append(np.abs(q_offline - recorded.q))
            gain_diff = max(
                gain_diff,
                float(np.max(np.abs(recorded.kp - kp) / np.maximum(kp, 1e-9))),
                float(np.max(np.abs(recorded.kd - kd) / np.maximum(kd, 1e-9))),
            )
    if not diffs:
        raise BagError(f"bag {bag}: RUN segments hold no LowCmd to compare")
    d = np.stack(diffs)  # [steps, 29]
    return CheckResult(
        steps=len(d),
        segments=len(segments),
        max_diff=float(d.max()),
        mean_diff=float(d.mean()),
        max_gain_diff=gain_diff,
    )


# ---------------------------------------------------------------------------------------------------------
# CLI


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bcg-replay", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("bag", help="rosbag2 folder (MCAP), e.g. from bcg-sim2sim --record")
    ap.add_argument("--rate", type=float, default=1.0, help="playback speed factor (default 1)")
    ap.add_argument("--topics", nargs="+", default=None, help="only these topics (default: all)")
    ap.add_argument("--delay", type=float, default=1.0, help="s to wait for subscribers before playing (default 1)")
    ap.add_argument(
        "--wait-subscribers", type=int, default=0, metavar="N", help="also wait for N subscribers per topic (<=30 s)"
    )
    ap.add_argument(
        "--plan",
        action="store_true",
        help="print the playback schedule (offset s, topic, recorded stamp ns) instead of publishing",
    )
    ap.add_argument(
        "--check-policy",
        metavar="DIR",
        default=None,
        help="re-run this policy offline on the recorded /lowstate and compare with /lowcmd",
    )
    ap.add_argument(
        "--tolerance",
        type=float,
        default=1e-3,
        help="--check-policy: max allowed |target difference| [rad] (default 1e-3)",
    )
    ap.add_argument(
        "--runtime",
        default="auto",
        choices=["auto", "onnx", "torchscript"],
        help="--check-policy: network runtime (default auto: ONNX when present)",
    )
    ap.add_argument(
        "--recover", action="store_true", help="rebuild the bag from what its (killed, truncated) MCAP files still hold"
    )
    ap.add_argument(
        "--sensor-noise",
        action="store_true",
        help="estimate encoder, joint-velocity and gyro noise from a still robot's /lowstate (bcg-eval --noise levels)",
    )
    ap.add_argument("--start", type=float, default=0.0, help="--sensor-noise: from S s after the first message")
    ap.add_argument("--end", type=float, default=None, help="--sensor-noise: to S s after the first message")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.recover:
            from bcg_policy_node.bag_recovery import recover_bag

            r = recover_bag(args.bag)
            print(
                f"bcg-replay: recovered {args.bag}: {r.files} file(s), {r.repaired} rewritten, "
                f"{r.bytes_lost} bytes of incomplete records dropped; messages {r.messages}"
            )
            return 0
        if args.sensor_noise:
            from bcg_policy_node import sensor_noise

            print(sensor_noise.report(sensor_noise.estimate(args.bag, args.start, args.end)))
            return 0
        if args.check_policy:
            r = check_policy(args.bag, args.check_policy, args.runtime)
            # Gains are float32 on the wire: a relative 1e-5 is rounding, more is a different artifact.
            ok = r.max_diff <= args.tolerance and r.max_gain_diff <= 1e-5
            print(
                f"bcg-replay: {r.steps} policy steps in {r.segments} RUN segment(s): target difference "
                f"max {r.max_diff:.3e} rad, mean {r.mean_diff:.3e} rad (tolerance {args.tolerance:.1e}); "
                f"kp/kd relative difference max {r.max_gain_diff:.1e} -> {'OK' if ok else 'MISMATCH'}"
            )
            return 0 if ok else 1
        if args.plan:
            print_plan(args.bag, args.rate, args.topics)
            return 0
        n = play(args.bag, args.rate, args.topics, args.delay, args.wait_subscribers)
        print(f"bcg-replay: published {n} messages from {args.bag}")
        return 0
    except (BagError, ValueError, OSError) as exc:
        print(f"bcg-replay: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
