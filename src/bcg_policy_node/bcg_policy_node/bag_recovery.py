"""Rebuild a bag after a crash: `bcg-replay --recover BAG` -> `recover_bag`.

(The unfinished file of a SIGKILLed bcg recorder holds next to nothing: rosbags keeps a file's data in
memory until it closes, which is why files close every split_s. What recovery rescues are cut or
unlisted files, and sqlite3 bags of `ros2 bag record` killed without writing metadata.yaml.)

A bcg recorder killed with SIGKILL leaves closed files that metadata.yaml lists, maybe a closed file that it
does not list yet (killed between the rename and the metadata write), and the unfinished file in its
`.BAG_<k>.part/` folder; a copied or cut bag may hold truncated MCAP files. `recover_bag` reads every MCAP
file of the folder record by record (the MCAP data section: schema, channel, chunk, message records) up
to the first incomplete record, keeps every complete message, rewrites each file that was damaged as a
complete MCAP file, moves the originals into `BAG/recover_originals/` and writes metadata.yaml anew.
sqlite3 files (.db3) are read page by page the same way and rewritten as MCAP.
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
        body = self.data[self.pos + 9 : end]
        self.pos = end
        return op, body


def _string(buf: memoryview, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", buf, pos)
    return bytes(buf[pos + 4 : pos + 4 + n]).decode(), pos + 4 + n


def _chunk_records(body: memoryview) -> bytes:
    """The decompressed records of a Chunk record body."""
    _, _, size, crc = struct.unpack_from("<QQQI", body, 0)
    compression, pos = _string(body, 28)
    (n,) = struct.unpack_from("<Q", body, pos)
    payload = bytes(body[pos + 8 : pos + 8 + n])
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


def salvage_sqlite(path: Path) -> Salvage:
    """Every message a rosbag2 sqlite3 file (`ros2 bag record`'s default) still holds, in recording order.

    A cut file is "malformed" to SQLite as soon as a b-tree page it needs is missing (here: at the first
    query), so the file is read page by page instead: every table leaf page still present is decoded, and
    its rows are sorted into the rosbag2 tables by their shape (topics: id, name, type, 3 texts; messages:
    id, topic id, timestamp, data). A complete file gives the same rows as SQL would."""
    out = Salvage(path)
    data = path.read_bytes()
    if not data.startswith(SQLITE_MAGIC) or len(data) < 100:
        out.bytes_lost = len(data)
        return out
    page_size = struct.unpack_from(">H", data, 16)[0]
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - data[20]
    topics: dict[int, tuple[str, str]] = {}
    rows: dict[int, tuple[int, int, bytes]] = {}  # message id -> (topic id, timestamp, data)
    n_pages = len(data) // page_size
    for page in range(n_pages):
        for rowid, values in _leaf_rows(data, page, page_size, usable):
            if len(values) == 6 and all(isinstance(v, str) for v in values[1:]):
                topics[rowid] = (values[1], values[2])
            elif (
                len(values) == 4
                and isinstance(values[1], int)
                and isinstance(values[2], int)
                and isinstance(values[3], bytes)
            ):
                rows[rowid] = (values[1], values[2], values[3])
    for rowid in sorted(rows):
        topic_id, ts, cdr = rows[rowid]
        if topic_id in topics:
            out.messages.append((*topics[topic_id], ts, cdr))
    out.complete = n_pages * page_size == len(data) and bool(rows) and len(rows) == max(rows)
    out.bytes_lost = len(data) - n_pages * page_size
    return out


SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_LEAF_TABLE = 0x0D


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """SQLite varint (big-endian, 7 bits per byte, the 9th byte whole) at pos -> (value, next pos)."""
    value = 0
    for i in range(8):
        byte = buf[pos + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, pos + i + 1
    return (value << 8) | buf[pos + 8], pos + 9


def _leaf_rows(data: bytes, page: int, page_size: int, usable: int):
    """(rowid, values) of every cell of a table leaf page whose payload is complete in the file."""
    base = page * page_size
    head = base + (100 if page == 0 else 0)  # page 1 starts with the file header
    if data[head] != SQLITE_LEAF_TABLE:
        return
    cells = struct.unpack_from(">H", data, head + 3)[0]
    for k in range(cells):
        try:
            pos = base + struct.unpack_from(">H", data, head + 8 + 2 * k)[0]
            size, pos = _varint(data, pos)
            rowid, pos = _varint(data, pos)
            payload = _payload(data, pos, size, page_size, usable)
            if payload is not None:
                yield rowid, _record(payload)
        except (IndexError, struct.error, ValueError, UnicodeDecodeError):
            continue  # a cell that is cut or not what it seems: skip it


def _payload(data: bytes, pos: int, size: int, page_size: int, usable: int) -> bytes | None:
    """The payload of a cell, following its overflow pages; None when one of them is missing."""
    if size <= usable - 35:
        return data[pos : pos + size]
    m = (usable - 12) * 32 // 255 - 23
    local = m + (size - m) % (usable - 4)
    local = local if local <= usable - 35 else m
    parts = [data[pos : pos + local]]
    (nxt,) = struct.unpack_from(">I", data, pos + local)
    remaining = size - local
    while remaining > 0:
        start = (nxt - 1) * page_size
        if nxt == 0 or start + page_size > len(data):
            return None
        (nxt,) = struct.unpack_from(">I", data, start)
        take = min(remaining, usable - 4)
        parts.append(data[start + 4 : start + 4 + take])
        remaining -= take
    return b"".join(parts)


_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def _record(payload: bytes) -> list:
    """Column values of an SQLite record (NULL, int, float, text, blob)."""
    header_size, pos = _varint(payload, 0)
    types = []
    while pos < header_size:
        t, pos = _varint(payload, pos)
        types.append(t)
    values, body = [], header_size
    for t in types:
        if t in (0, 8, 9):
            values.append(None if t == 0 else t - 8)
        elif t in _INT_SIZES:
            n = _INT_SIZES[t]
            values.append(int.from_bytes(payload[body : body + n], "big", signed=True))
            body += n
        elif t == 7:
            values.append(struct.unpack_from(">d", payload, body)[0])
            body += 8
        elif t >= 12:
            n = (t - 12) // 2 if t % 2 == 0 else (t - 13) // 2
            raw = payload[body : body + n]
            if len(raw) != n:
                raise ValueError("record shorter than its header says")
            values.append(raw if t % 2 == 0 else raw.decode())
            body += n
        else:
            raise ValueError(f"serial type {t}")
    return values


def _index(path: Path) -> tuple[int, int]:
    """Sort key: file index from `<bag>_<k>[.part][.mcap]`, then closed before unfinished."""
    m = FILE_INDEX.search(path.parent.name if path.parent.name.endswith(".part") else path.stem)
    return (int(m.group(1)) if m else 0, 1 if path.parent.name.endswith(".part") else 0)


def bag_files(folder: Path) -> list[Path]:
    """The bag's MCAP files (closed and unfinished) and sqlite3 files, in recording order
    (recover_originals/ is not looked at)."""
    files = list(folder.glob("*.mcap")) + list(folder.glob(".*.part/*.mcap")) + list(folder.glob("*.db3"))
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
    """Rebuild `path` (a bag folder, or one .mcap/.db3 file in it) from what its files still hold, as MCAP."""
    folder = Path(path)
    if folder.is_file() and folder.suffix in (".mcap", ".db3"):
        folder = folder.parent
    if not folder.is_dir():
        raise BagError(f"bag {folder} does not exist (or is not a folder)")
    sources = bag_files(folder)
    if not sources:
        raise BagError(f"bag {folder} holds no .mcap or .db3 file to recover")
    originals = folder / ORIGINALS_DIR
    files: list[FileInfo] = []
    topics: dict[str, str] = {}
    repaired = lost = 0
    for src in sources:
        sal = salvage_sqlite(src) if src.suffix == ".db3" else salvage_mcap(src)
        lost += sal.bytes_lost
        unknown = [m for m in set(sal.topics().values()) if not _known(m)]
        if unknown:
            raise BagError(f"{src}: message type(s) {sorted(unknown)} unknown to bcg's type store; cannot rewrite")
        if not sal.messages:
            _move_aside(src, originals)
            repaired += 1
            continue
        name = file_name(folder, len(files))
        intact = sal.complete and src.parent == folder and src.name == name  # MCAP only: .db3 never matches
        if src.suffix == ".db3":
            for suffix in ("-wal", "-shm"):  # they belong to the original, which is moved aside
                extra = Path(f"{src}{suffix}")
                if extra.is_file():
                    _move_aside(extra, originals)
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
