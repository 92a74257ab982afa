"""Deployment bags: record ROS 2 topics to rosbag2 (MCAP) with `rosbags`, and read them back.

`ros2 bag` is not available to pip users, so `BagRecorder` (an rclpy node) writes rosbag2 MCAP itself:
it subscribes to each listed topic in raw (CDR) form once the topic's type is known on the graph and
writes the bytes untouched, stamped with the node's clock (sim time under use_sim_time). The bags open in
`ros2 bag`, Foxglove and rosbags alike; the unitree_hg message definitions are registered with rosbags'
type store so it can (de)serialize them and compute their type hashes.

`read_bag` yields (topic, msgtype, timestamp ns, CDR bytes); a truncated or unfinished bag raises
`BagError` with a message saying what is wrong (not a library traceback).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from rclpy.node import Node
from rosbags.rosbag2 import Reader, ReaderError, StoragePlugin, Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

# What a deployment bag holds: robot I/O, joint states for rviz, diagnostics, the policy's reference, its
# mode transitions and (sim only) ground truth. Topics absent from the graph are simply not recorded.
# /policy_node/transitions marks the RUN segments that `bcg-replay --check-policy` re-runs.
DEFAULT_TOPICS: tuple[str, ...] = ("/lowstate", "/lowcmd", "/joint_states", "/diagnostics",
                                   "/reference/joint_states", "/reference/root_pose", "/policy_node/transitions",
                                   "/sim/ground_truth")

UNITREE_HG_MESSAGES = ("MotorCmd", "MotorState", "IMUState", "LowCmd", "LowState")


class BagError(RuntimeError):
    """A bag that cannot be read or written; the message names the bag and the problem."""


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


class BagWriter:
    """A rosbag2 MCAP bag being written: add topics, write CDR bytes, close (writes metadata.yaml)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"bag {self.path} already exists; choose a new folder")
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections: dict[str, object] = {}
        self.counts: dict[str, int] = {}

    def add_topic(self, topic: str, msgtype: str) -> None:
        if topic in self._connections:
            return
        self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=typestore())
        self.counts[topic] = 0

    def write(self, topic: str, timestamp_ns: int, cdr: bytes) -> None:
        self._writer.write(self._connections[topic], int(timestamp_ns), cdr)
        self.counts[topic] += 1

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class BagRecorder(Node):
    """Records `topics` to a rosbag2 MCAP bag at `path`; a topic is subscribed once the graph knows its type.

    Subscriptions are reliable with depth 100 so that a burst during a slow write is not lost. Call
    `close()` before exiting, or the bag has no footer/metadata and cannot be read.
    """

    def __init__(self, path: str | os.PathLike, topics: Sequence[str] = DEFAULT_TOPICS,
                 name: str = "bag_recorder", **node_kwargs) -> None:
        super().__init__(name, **node_kwargs)
        self.bag = BagWriter(path)
        self.topics = list(topics)
        self._subs: dict[str, object] = {}
        self._poll = self.create_timer(0.1, self._discover)
        self._discover()

    def _discover(self) -> None:
        """Subscribe to every listed topic whose type the graph now knows."""
        graph = dict(self.get_topic_names_and_types())
        for topic in self.topics:
            if topic in self._subs or topic not in graph:
                continue
            msgtype = graph[topic][0]
            self.bag.add_topic(topic, msgtype)
            self._subs[topic] = self.create_subscription(
                message_class(msgtype), topic, lambda raw, t=topic: self._on_message(t, raw), 100, raw=True)
            self.get_logger().info(f"recording {topic} [{msgtype}]")

    def _on_message(self, topic: str, raw: bytes) -> None:
        self.bag.write(topic, self.get_clock().now().nanoseconds, raw)

    def close(self) -> dict[str, int]:
        """Finish the bag (MCAP footer, metadata.yaml); returns messages per topic."""
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
    if path.is_dir() and not (path / "metadata.yaml").is_file():
        raise BagError(f"bag {path} has no metadata.yaml: the recording was not closed cleanly "
                       "(recorder killed?); it cannot be read as is")
    reader = Reader(path)
    try:
        reader.open()
    except (ReaderError, OSError, ValueError, KeyError) as exc:
        raise BagError(f"bag {path} is truncated or corrupt, cannot open it: {exc}") from exc
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
            raise BagError(f"bag {path} has no topic(s) {sorted(missing)}; it has "
                           f"{sorted(c.topic for c in reader.connections)}")
        expected = sum(c.msgcount for c in conns)
        n = 0
        try:
            for conn, ts, data in reader.messages(connections=conns):
                n += 1
                yield BagMessage(conn.topic, conn.msgtype, ts, bytes(data))
        except BagError:
            raise
        except Exception as exc:  # noqa: BLE001 - rosbags/mcap raise many types on damaged files
            raise BagError(f"bag {path} is truncated or corrupt after {n} of {expected} messages: "
                           f"{type(exc).__name__}: {exc}") from exc
        if n != expected:
            raise BagError(f"bag {path} is truncated: read {n} messages, its metadata lists {expected}")
    finally:
        reader.close()


def deserialize(msg: BagMessage):
    """The rclpy message object of a BagMessage."""
    from rclpy.serialization import deserialize_message

    return deserialize_message(msg.cdr, message_class(msg.msgtype))
