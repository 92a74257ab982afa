"""Rebuild a bag after a crash: `bcg-replay --recover BAG` -> `recover_bag`.

A recorder killed with SIGKILL leaves closed files that metadata.yaml lists, maybe a closed file that it
does not list yet (killed between the rename and the metadata write), and the unfinished file in its
`.BAG_<k>.part/` folder; a copied or cut bag may hold truncated MCAP files. `recover_bag` reads every MCAP
file of the folder record by record (the MCAP data section: schema, channel, chunk, message records) up
to the first incomplete record, keeps every complete message, rewrites each file that was damaged as a
complete MCAP file, moves the originals into `BAG/recover_originals/` and writes metadata.yaml anew.
"""

from __future__ import annotations

import os
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

from rosbags.rosbag2 import StoragePlugin, Writer

from bcg_policy_node.bags import (
    FILE_INDEX,
    ROSBAG2_VERSION,
    BagError,
    FileInfo,
    file_name,
    typestore,
    write_metadata,
)

MCAP_MAGIC = b"\x89MCAP0\r\n"
OP_SCHEMA, OP_CHANNEL, OP_MESSAGE, OP_CHUNK, OP_DATA_END = 0x03, 0x04, 0x05, 0x06, 0x0F
ORIGINALS_DIR = "recover_originals"  # the files recover_bag replaced, kept as they were


@dataclass
class Salvage:
    """What one MCAP file still holds."""

    path: Path
    messages: list[tuple[str, str, int, bytes]] = field(default_factory=list)  # (topic, msgtype, ts ns, CDR)
    complete: bool = False  # the data section ended properly (DataEnd record reached)
    bytes_lost: int = 0  # bytes after the last complete record

    def topics(self) -> dict[str, str]:
        return {t: m for t, m, _, _ in self.messages}


class _Records:
    """Parses MCAP records from a buffer; stops (returns None) at the first incomplete one."""

    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data, self.pos = memoryview(data), pos

    def next(self) -> tuple[int, memoryview] | None:
        if self.pos + 9 > len(self.data):
            return None
        op = self.data[self.pos]
        (size,) = struct.unpack_from("<Q", self.data, self.pos + 1)
        end = self.pos + 9 + size
        if end > len(self.data):
            return None
        body = self.data[self.pos + 9:end]
        self.pos = end
        return op, body


def _string(buf: memoryview, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", buf, pos)
    return bytes(buf[pos + 4:pos + 4 + n]).decode(), pos + 4 + n


def _chunk_records(body: memoryview) -> bytes:
    """The decompressed records of a Chunk record body."""
    _, _, size, crc = struct.unpack_from("<QQQI", body, 0)
    compression, pos = _string(body, 28)
    (n,) = struct.unpack_from("<Q", body, pos)
    payload = bytes(body[pos + 8:pos + 8 + n])
    if len(payload) != n:
        raise ValueError("chunk shorter than its length field")
    if not compression:
        return payload
    from rosbags.rosbag2.storage_mcap import decompress  # zstd/lz4 as rosbags reads them

    return decompress(payload, compression, size, crc)


def salvage_mcap(path: Path) -> Salvage:
    """Every complete message of an MCAP file, in file order, even when its end is missing."""
    out = Salvage(path)
    data = path.read_bytes()
    if not data.startswith(MCAP_MAGIC):
        out.bytes_lost = len(data)
        return out
    schemas: dict[int, str] = {}
    channels: dict[int, tuple[str, str]] = {}  # id -> (topic, msgtype)

    def take(op: int, body: memoryview) -> None:
        if op == OP_SCHEMA:
            (sid,) = struct.unpack_from("<H", body, 0)
            schemas[sid] = _string(body, 2)[0]
        elif op == OP_CHANNEL:
            cid, sid = struct.unpack_from("<HH", body, 0)
            channels[cid] = (_string(body, 4)[0], schemas.get(sid, ""))
        elif op == OP_MESSAGE:
            cid, _, log_time = struct.unpack_from("<HIQ", body, 0)
            if cid in channels:
                out.messages.append((*channels[cid], log_time, bytes(body[22:])))

    records = _Records(data, len(MCAP_MAGIC))
    while (rec := records.next()) is not None:
        op, body = rec
        if op == OP_DATA_END:
            out.complete = True
            break
        if op == OP_CHUNK:
            try:
                inner = _Records(_chunk_records(body))
            except Exception:  # noqa: BLE001 - a damaged chunk: keep what came before it
                break
            while (sub := inner.next()) is not None:
                take(*sub)
        else:
            take(op, body)
    out.bytes_lost = 0 if out.complete else len(data) - records.pos
    return out


def _index(path: Path) -> tuple[int, int]:
    """Sort key: file index from `<bag>_<k>[.part][.mcap]`, then closed before unfinished."""
    m = FILE_INDEX.search(path.parent.name if path.parent.name.endswith(".part") else path.name)
    return (int(m.group(1)) if m else 0, 1 if path.parent.name.endswith(".part") else 0)


def mcap_files(folder: Path) -> list[Path]:
    """The bag's MCAP files (closed and unfinished), in recording order (recover_originals/ is not looked at)."""
    files = list(folder.glob("*.mcap")) + list(folder.glob(".*.part/*.mcap"))
    return sorted(files, key=lambda p: (_index(p), p.name))


def _rewrite(sal: Salvage, target: Path) -> None:
    """Write the salvaged messages as a complete MCAP file at `target` (via a rosbags Writer)."""
    tmp = target.parent / f".{target.stem}.recover"
    if tmp.exists():
        shutil.rmtree(tmp)
    writer = Writer(tmp, version=ROSBAG2_VERSION, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    conns = {t: writer.add_connection(t, m, typestore=typestore()) for t, m in sal.topics().items()}
    for topic, _, ts, cdr in sal.messages:
        writer.write(conns[topic], ts, cdr)
    writer.close()
    os.replace(tmp / f"{tmp.name}.mcap", target)
    shutil.rmtree(tmp)


@dataclass
class RecoverReport:
    files: int  # files in the rebuilt bag
    repaired: int  # files that were damaged, unfinished or unlisted and were rewritten
    messages: dict[str, int]  # topic -> messages in the rebuilt bag
    bytes_lost: int  # bytes of incomplete records dropped


def recover_bag(path: str | os.PathLike) -> RecoverReport:
    """Rebuild `path` (a bag folder, or one .mcap file) from what its MCAP files still hold."""
    folder = Path(path)
    if folder.is_file() and folder.suffix == ".mcap":
        folder = folder.parent
    if not folder.is_dir():
        raise BagError(f"bag {folder} does not exist (or is not a folder)")
    sources = mcap_files(folder)
    if not sources:
        raise BagError(f"bag {folder} holds no .mcap file to recover (sqlite3 bags are not supported)")
    originals = folder / ORIGINALS_DIR
    files: list[FileInfo] = []
    topics: dict[str, str] = {}
    repaired = lost = 0
    for src in sources:
        sal = salvage_mcap(src)
        lost += sal.bytes_lost
        unknown = [m for m in set(sal.topics().values()) if not _known(m)]
        if unknown:
            raise BagError(f"{src}: message type(s) {sorted(unknown)} unknown to bcg's type store; cannot rewrite")
        if not sal.messages:
            _move_aside(src, originals)
            repaired += 1
            continue
        name = file_name(folder, len(files))
        intact = sal.complete and src.parent == folder and src.name == name
        if not intact:
            _move_aside(src, originals)
            _rewrite(sal, folder / name)
            repaired += 1
        topics.update(sal.topics())
        files.append(_file_info(name, sal))
    for part in folder.glob(".*.part"):
        shutil.rmtree(part)  # their files were moved aside above
    write_metadata(folder, files, topics)
    counts: dict[str, int] = {}
    for f in files:
        for t, (_, n) in f.topics.items():
            counts[t] = counts.get(t, 0) + n
    return RecoverReport(len(files), repaired, counts, lost)


def _known(msgtype: str) -> bool:
    try:
        typestore().hash_rihs01(msgtype)
        return True
    except Exception:  # noqa: BLE001 - rosbags raises its own lookup errors
        return False


def _file_info(name: str, sal: Salvage) -> FileInfo:
    topics: dict[str, tuple[str, int]] = {}
    for t, m, _, _ in sal.messages:
        topics[t] = (m, topics.get(t, (m, 0))[1] + 1)
    stamps = [ts for _, _, ts, _ in sal.messages]
    return FileInfo(name, topics, min(stamps), max(stamps))


def _move_aside(src: Path, originals: Path) -> None:
    """Keep the original (never delete recorded data): BAG/recover_originals/<name>[.k]."""
    originals.mkdir(exist_ok=True)
    target = originals / src.name
    k = 1
    while target.exists():
        target, k = originals / f"{src.name}.{k}", k + 1
    shutil.move(str(src), target)
