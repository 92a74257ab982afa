"""Deployment bags: record ROS 2 topics to rosbag2 (MCAP) with `rosbags`, and read them back.

`ros2 bag` is not available to pip users, so `BagRecorder` (an rclpy node) writes rosbag2 MCAP itself:
it subscribes to each listed topic in raw (CDR) form once the topic's type is known on the graph and
writes the bytes untouched, stamped with the node's clock (sim time under use_sim_time). The bags open in
`ros2 bag`, Foxglove and rosbags alike; the unitree_hg message definitions are registered with rosbags'
type store so it can (de)serialize them and compute their type hashes.

Crash safety: a bag is a split rosbag2 bag. Every `split_s` (config/bags.yaml) the current file is closed
(MCAP footer written) and moved to `BAG/BAG_<k>.mcap`, and `BAG/metadata.yaml` is rewritten (atomically)
to list every closed file (a thread does the closing, so the recorded nodes never wait for the disk). A
recorder killed with SIGKILL therefore leaves a readable bag that lacks at most its last `split_s` (the
open file's data is still in rosbags' memory); `recover_bag` (`bcg-replay --recover BAG`) rebuilds bags
whose files were cut or are not listed, and sqlite3 bags of a killed `ros2 bag record`
(bcg_policy_node.bag_recovery).

`read_bag` yields (topic, msgtype, timestamp ns, CDR bytes); a truncated or unfinished bag raises
`BagError` with a message saying what is wrong (not a library traceback).

    bcg-record BAG [--topics T ...] [--duration S] [--split-s S]   record until SIGINT/SIGTERM (or S seconds)
"""

from __future__ import annotations

import argparse
import importlib
import os
import queue
import re
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import yaml
from rclpy.node import Node
from rosbags.rosbag2 import Reader, ReaderError, StoragePlugin, Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from bcg_sim.config import checker, load_config

# What a deployment bag holds: robot I/O, joint states for rviz, diagnostics, the policy's reference, its
# mode transitions and (sim only) ground truth. Topics absent from the graph are simply not recorded.
# /policy_node/transitions marks the RUN segments that `bcg-replay --check-policy` re-runs.
DEFAULT_TOPICS: tuple[str, ...] = (
    "/lowstate",
    "/lowcmd",
    "/joint_states",
    "/diagnostics",
    "/reference/joint_states",
    "/reference/root_pose",
    "/policy_node/transitions",
    "/sim/ground_truth",
)
# The one type each deploy topic may carry: a bag with another type there is refused (replay would publish
# it onto the robot's topic, --check-policy would decode garbage).
TOPIC_TYPES: dict[str, str] = {
    "/lowstate": "unitree_hg/msg/LowState",
    "/lowcmd": "unitree_hg/msg/LowCmd",
    "/joint_states": "sensor_msgs/msg/JointState",
    "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    "/reference/joint_states": "sensor_msgs/msg/JointState",
    "/reference/root_pose": "geometry_msgs/msg/PoseStamped",
    "/policy_node/transitions": "std_msgs/msg/String",
    "/sim/ground_truth": "geometry_msgs/msg/PoseStamped",
}

UNITREE_HG_MESSAGES = ("MotorCmd", "MotorState", "IMUState", "LowCmd", "LowState")
METADATA_FILE = "metadata.yaml"
ROSBAG2_VERSION = 9


class BagError(RuntimeError):
    """A bag that cannot be read or written; the message names the bag and the problem."""


@dataclass
class BagConfig:
    """config/bags.yaml."""

    split_s: float = 1.0  # [s wall] file close period = the most a SIGKILL can lose
    queue_depth: int = 2000  # reliable subscription depth per topic (absorbs a stalled recorder)
    discover_period_s: float = 0.1  # [s] graph polling for listed topics

    def __post_init__(self) -> None:
        need = checker()
        need(self.split_s > 0, "split_s", f"must be > 0 s, got {self.split_s}")
        need(self.queue_depth >= 1, "queue_depth", f"must be >= 1, got {self.queue_depth}")
        need(self.discover_period_s > 0, "discover_period_s", f"must be > 0 s, got {self.discover_period_s}")


def load_bag_config() -> BagConfig:
    return load_config(BagConfig, "bags")


def check_topic_types(path: str | os.PathLike, topics: dict[str, str]) -> None:
    """Raise BagError when a deploy topic of the bag (topic -> msgtype) holds another type than TOPIC_TYPES."""
    for topic, msgtype in topics.items():
        want = TOPIC_TYPES.get(topic)
        if want is not None and msgtype != want:
            raise BagError(
                f"bag {path}: topic {topic} holds {msgtype}, expected {want}; not a bcg deployment "
                "bag (or recorded from another robot's software)"
            )


# ---------------------------------------------------------------------------------------------------------
# Type store


def unitree_hg_msg_dir() -> Path:
    """Folder of the installed unitree_hg .msg files (share/unitree_hg/msg)."""
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        return Path(get_package_share_directory("unitree_hg")) / "msg"
    except PackageNotFoundError as exc:
        raise BagError("unitree_hg is not installed (source env.sh / install/setup.bash)") from exc


_TYPESTORE: Typestore | None = None


def typestore() -> Typestore:
    """rosbags type store of ROS 2 Kilted plus unitree_hg (cached)."""
    global _TYPESTORE
    if _TYPESTORE is None:
        store = get_typestore(Stores.ROS2_KILTED)
        folder = unitree_hg_msg_dir()
        types = {}
        for name in UNITREE_HG_MESSAGES:
            path = folder / f"{name}.msg"
            if not path.is_file():
                raise BagError(f"unitree_hg message definition {path} is missing")
            types.update(get_types_from_msg(path.read_text(), f"unitree_hg/msg/{name}"))
        store.register(types)
        _TYPESTORE = store
    return _TYPESTORE


def message_class(msgtype: str) -> type:
    """rclpy message class of 'pkg/msg/Name'."""
    try:
        pkg, kind, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{pkg}.{kind}"), name)
    except (ValueError, ImportError, AttributeError) as exc:
        raise BagError(f"no Python message class for type {msgtype!r} (is its package installed?)") from exc


# ---------------------------------------------------------------------------------------------------------
# Writing


@dataclass
class FileInfo:
    """What metadata.yaml says about one closed bag file."""

    name: str  # file name inside the bag folder
    topics: dict[str, tuple[str, int]]  # topic -> (msgtype, messages in this file)
    start_ns: int  # first message timestamp
    end_ns: int  # last message timestamp

    @property
    def count(self) -> int:
        return sum(n for _, n in self.topics.values())


def write_metadata(folder: Path, files: Sequence[FileInfo], topics: dict[str, str]) -> None:
    """Write folder/metadata.yaml (rosbag2 version 9, MCAP) listing `files`, atomically (tmp + rename).

    topics: every recorded topic -> msgtype (also those with no message yet)."""
    counts = {t: 0 for t in topics}
    for f in files:
        for t, (_, n) in f.topics.items():
            counts[t] = counts.get(t, 0) + n
    start = min((f.start_ns for f in files), default=0)
    end = max((f.end_ns for f in files), default=0)
    info = {
        "version": ROSBAG2_VERSION,
        "storage_identifier": "mcap",
        "relative_file_paths": [f.name for f in files],
        "duration": {"nanoseconds": max(0, end - start)},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": sum(counts.values()),
        "topics_with_message_count": [
            {
                "topic_metadata": {
                    "name": t,
                    "type": m,
                    "serialization_format": "cdr",
                    "offered_qos_profiles": [],
                    "type_description_hash": _definition(m)[1],
                },
                "message_count": counts[t],
            }
            for t, m in topics.items()
        ],
        "compression_format": "",
        "compression_mode": "",
        "files": [
            {
                "path": f.name,
                "starting_time": {"nanoseconds_since_epoch": f.start_ns},
                "duration": {"nanoseconds": max(0, f.end_ns - f.start_ns)},
                "message_count": f.count,
            }
            for f in files
        ],
        "custom_data": None,
        "ros_distro": "rosbags",
    }
    tmp = folder / (METADATA_FILE + ".tmp")
    tmp.write_text(yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False))
    os.replace(tmp, folder / METADATA_FILE)


def part_dir(folder: Path, index: int) -> Path:
    """Where file `index` is written while open (rosbags writes <dir>/<dir>.mcap)."""
    return folder / f".{folder.name}_{index}.part"


def file_name(folder: Path, index: int) -> str:
    return f"{folder.name}_{index}.mcap"


FILE_INDEX = re.compile(r"_(\d+)(\.part)?(\.mcap)?$")


class BagWriter:
    """A split rosbag2 MCAP bag being written: add topics, write CDR bytes, close.

    A file is opened on the first message after the previous one closed; `maybe_split()` (called on every
    write and by the recorder's timer) hands it to a closing thread once it is `split_s` old: that thread
    writes its footer, moves it into the bag folder and rewrites metadata.yaml, so the caller (the executor
    of the nodes being recorded) never waits for the disk."""

    def __init__(self, path: str | os.PathLike, split_s: float | None = None) -> None:
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"bag {self.path} already exists; choose a new folder")
        self.split_s = load_bag_config().split_s if split_s is None else split_s
        self.path.mkdir(parents=True)
        self.topics: dict[str, str] = {}  # topic -> msgtype
        self.counts: dict[str, int] = {}  # messages per topic, all files
        self.files: list[FileInfo] = []  # closed files, in order (appended by the closing thread)
        self._lock = threading.Lock()  # files + metadata.yaml
        self._closing: queue.Queue = queue.Queue()
        self._closer = threading.Thread(target=self._close_loop, name=f"bag-close-{self.path.name}", daemon=True)
        self._closer.start()
        self._errors: list[BaseException] = []
        self._writer: Writer | None = None
        self._index = 0  # of the open (or next) file
        self._conns: dict[str, object] = {}
        self._open = FileInfo("", {}, 0, 0)
        self._opened_at = 0.0
        self._write_metadata()  # a bag from the first moment on

    def _write_metadata(self) -> None:
        with self._lock:
            write_metadata(self.path, self.files, dict(self.topics))

    def add_topic(self, topic: str, msgtype: str) -> None:
        if topic in self.topics:
            return
        _definition(msgtype)  # unknown type: fails here, not at the first message
        self.topics[topic] = msgtype
        self.counts[topic] = 0
        if self._writer is not None:
            self._add_connection(topic)
        self._write_metadata()

    def _add_connection(self, topic: str) -> None:
        msgdef, rihs01 = _definition(self.topics[topic])
        self._conns[topic] = self._writer.add_connection(topic, self.topics[topic], msgdef=msgdef, rihs01=rihs01)
        self._open.topics[topic] = (self.topics[topic], 0)

    def write(self, topic: str, timestamp_ns: int, cdr: bytes) -> None:
        if self._errors:
            raise BagError(f"bag {self.path}: closing a file failed: {self._errors[0]}")
        if self._writer is None:
            self._start_file()
        ts = int(timestamp_ns)
        self._writer.write(self._conns[topic], ts, cdr)
        msgtype, n = self._open.topics[topic]
        self._open.topics[topic] = (msgtype, n + 1)
        self._open.start_ns = min(self._open.start_ns, ts)
        self._open.end_ns = max(self._open.end_ns, ts)
        self.counts[topic] += 1
        self.maybe_split()

    def _start_file(self) -> None:
        self._writer = Writer(
            part_dir(self.path, self._index), version=ROSBAG2_VERSION, storage_plugin=StoragePlugin.MCAP
        )
        self._writer.open()
        self._open = FileInfo(file_name(self.path, self._index), {}, 2**63 - 1, 0)
        self._conns = {}
        for topic in self.topics:
            self._add_connection(topic)
        self._opened_at = time.monotonic()

    def maybe_split(self) -> None:
        if self._writer is not None and time.monotonic() - self._opened_at >= self.split_s:
            self._hand_over()

    def _hand_over(self) -> None:
        self._closing.put((self._writer, self._index, self._open))
        self._writer = None
        self._index += 1

    def _close_loop(self) -> None:
        while (job := self._closing.get()) is not None:
            try:
                self._close_file(*job)
            except BaseException as exc:  # noqa: BLE001 - reported by the next write() / close()
                self._errors.append(exc)

    def _close_file(self, writer: Writer, index: int, info: FileInfo) -> None:
        """Finish a file, move it into the bag folder, then list it in metadata.yaml."""
        part = part_dir(self.path, index)
        writer.close()
        os.replace(part / f"{part.name}.mcap", self.path / info.name)
        shutil.rmtree(part)
        with self._lock:
            self.files.append(info)
            write_metadata(self.path, self.files, dict(self.topics))

    def close(self) -> None:
        """Close the open file and wait for every file to be closed and listed."""
        if self._writer is not None:
            self._hand_over()
        if self._closer.is_alive():
            self._closing.put(None)
            self._closer.join()
        if self._errors:
            raise BagError(f"bag {self.path}: closing a file failed: {self._errors[0]}")


_DEFINITIONS: dict[str, tuple[str, str]] = {}


def _definition(msgtype: str) -> tuple[str, str]:
    """(message definition, RIHS01 type hash) of msgtype, cached: a new file re-adds every topic."""
    if msgtype not in _DEFINITIONS:
        store = typestore()
        _DEFINITIONS[msgtype] = (store.generate_msgdef(msgtype, ros_version=2)[0], store.hash_rihs01(msgtype))
    return _DEFINITIONS[msgtype]


class BagRecorder(Node):
    """Records `topics` to a split rosbag2 MCAP bag at `path`; a topic is subscribed once the graph knows its
    type. Call `close()` before exiting to keep the last split_s too; a crash loses at most that much."""

    def __init__(
        self,
        path: str | os.PathLike,
        topics: Sequence[str] = DEFAULT_TOPICS,
        name: str = "bag_recorder",
        config: BagConfig | None = None,
        **node_kwargs,
    ) -> None:
        super().__init__(name, **node_kwargs)
        self.cfg = config or load_bag_config()
        self.bag = BagWriter(path, self.cfg.split_s)
        self.topics = list(topics)
        self._subs: dict[str, object] = {}
        self._poll = self.create_timer(self.cfg.discover_period_s, self._on_timer)
        self._discover()

    def _on_timer(self) -> None:
        self._discover()
        self.bag.maybe_split()  # close a file even when its topics have gone quiet

    def _discover(self) -> None:
        """Subscribe to every listed topic whose type the graph now knows."""
        graph = dict(self.get_topic_names_and_types())
        for topic in self.topics:
            if topic in self._subs or topic not in graph:
                continue
            msgtype = graph[topic][0]
            self.bag.add_topic(topic, msgtype)
            self._subs[topic] = self.create_subscription(
                message_class(msgtype),
                topic,
                lambda raw, t=topic: self._on_message(t, raw),
                self.cfg.queue_depth,
                raw=True,
            )
            self.get_logger().info(f"recording {topic} [{msgtype}]")

    def _on_message(self, topic: str, raw: bytes) -> None:
        self.bag.write(topic, self.get_clock().now().nanoseconds, raw)

    def close(self) -> dict[str, int]:
        """Finish the bag (last file, metadata.yaml); returns messages per topic."""
        self.bag.close()
        return dict(self.bag.counts)


# ---------------------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class BagMessage:
    topic: str
    msgtype: str
    timestamp_ns: int  # receive time on the recorder's clock
    cdr: bytes  # serialized message (CDR), as on the wire


def _open_reader(path: Path) -> Reader:
    if not path.exists():
        raise BagError(f"bag {path} does not exist")
    if path.is_dir() and not (path / METADATA_FILE).is_file():
        raise BagError(
            f"bag {path} has no {METADATA_FILE}: the recording was not closed cleanly "
            f"(recorder killed?); rebuild it with `bcg-replay --recover {path}`"
        )
    reader = Reader(path)
    try:
        reader.open()
    except (ReaderError, OSError, ValueError, KeyError) as exc:
        raise BagError(
            f"bag {path} is truncated or corrupt, cannot open it: {exc}; "
            f"`bcg-replay --recover {path}` rebuilds what it still holds"
        ) from exc
    return reader


def bag_topics(path: str | os.PathLike) -> dict[str, tuple[str, int]]:
    """topic -> (msgtype, message count from the metadata)."""
    reader = _open_reader(Path(path))
    try:
        return {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
    finally:
        reader.close()


def read_bag(path: str | os.PathLike, topics: Sequence[str] | None = None) -> Iterator[BagMessage]:
    """Messages of the bag in time order (optionally only `topics`).

    Raises BagError when the bag is missing, unfinished, truncated or corrupt, including part way through.
    """
    path = Path(path)
    reader = _open_reader(path)
    try:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        missing = set(topics or ()) - {c.topic for c in conns}
        if missing:
            raise BagError(
                f"bag {path} has no topic(s) {sorted(missing)}; it has {sorted(c.topic for c in reader.connections)}"
            )
        expected = sum(c.msgcount for c in conns)
        n = 0
        try:
            for conn, ts, data in reader.messages(connections=conns):
                n += 1
                yield BagMessage(conn.topic, conn.msgtype, ts, bytes(data))
        except BagError:
            raise
        except Exception as exc:  # noqa: BLE001 - rosbags/mcap raise many types on damaged files
            raise BagError(
                f"bag {path} is truncated or corrupt after {n} of {expected} messages: "
                f"{type(exc).__name__}: {exc}; `bcg-replay --recover {path}` rebuilds what it "
                "still holds"
            ) from exc
        if n != expected:
            raise BagError(f"bag {path} is truncated: read {n} messages, its metadata lists {expected}")
    finally:
        reader.close()


def deserialize(msg: BagMessage):
    """The rclpy message object of a BagMessage; BagError when its bytes are not a valid message."""
    from rclpy.serialization import deserialize_message

    try:
        return deserialize_message(msg.cdr, message_class(msg.msgtype))
    except BagError:
        raise
    except Exception as exc:  # noqa: BLE001 - rclpy raises several types on malformed CDR
        raise BagError(
            f"a {msg.msgtype} message on {msg.topic} at {msg.timestamp_ns} ns cannot be decoded: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


# ---------------------------------------------------------------------------------------------------------
# bcg-record


def record_main(argv: list[str] | None = None) -> int:
    """bcg-record: record deploy topics until SIGINT/SIGTERM (or --duration); exit 2 on bad arguments."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    ap = argparse.ArgumentParser(
        prog="bcg-record",
        description="Record deploy topics to a split rosbag2 MCAP bag "
        "that survives a crash (a file closed every split_s; bcg-replay --recover).",
    )
    ap.add_argument("bag", help="new bag folder to write")
    ap.add_argument(
        "--topics",
        nargs="+",
        default=list(DEFAULT_TOPICS),
        help=f"topics to record (default: {' '.join(DEFAULT_TOPICS)})",
    )
    ap.add_argument("--duration", type=float, default=None, help="stop after S seconds (default: until a signal)")
    ap.add_argument(
        "--split-s",
        type=float,
        default=None,
        help="close a file this often [s]; the most a crash loses (default: split_s of config/bags.yaml)",
    )
    args = ap.parse_args(argv)
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(True))
    rclpy.init(args=None, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    try:
        cfg = load_bag_config()
        if args.split_s is not None:
            cfg = BagConfig(args.split_s, cfg.queue_depth, cfg.discover_period_s)
        recorder = BagRecorder(args.bag, args.topics, name="bcg_record", config=cfg)
    except (BagError, ValueError, OSError) as exc:
        print(f"bcg-record: error: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = SingleThreadedExecutor()
    executor.add_node(recorder)
    print(f"bcg-record: recording {args.bag} (files closed every {recorder.cfg.split_s} s)", flush=True)
    end = None if args.duration is None else time.monotonic() + args.duration
    try:
        while not stop and (end is None or time.monotonic() < end):
            executor.spin_once(timeout_sec=0.05)
    finally:
        counts = recorder.close()
        executor.shutdown()
        recorder.destroy_node()
        rclpy.try_shutdown()
    print(f"bcg-record: wrote {args.bag}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(record_main())
