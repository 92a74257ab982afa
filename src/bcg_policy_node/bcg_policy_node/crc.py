"""CRC of unitree_hg LowCmd/LowState, as the G1 checks it (the robot drops a LowCmd with a wrong crc).

The message is packed as Unitree's C struct (little-endian, natural alignment: LowCmd 1004 bytes,
LowState 2092 bytes; *not* the CDR wire layout), the trailing crc field is dropped, and the rest is read
as uint32 words fed most-significant byte first into CRC-32/MPEG-2 (poly 0x04C11DB7, init 0xFFFFFFFF,
no reflection, no final xor) — equal to unitree_sdk2's crc32_core.
"""

from __future__ import annotations

import struct

_POLY = 0x04C11DB7
_NUM_MOTORS = 35

_MOTOR_CMD = "B3x5fI"  # mode, pad, q dq tau kp kd, reserve -> 28 bytes
_LOWCMD_FMT = "<BB2x" + _MOTOR_CMD * _NUM_MOTORS + "4I" + "I"
_MOTOR_STATE = "B3x4f2hf2II4I"  # mode, pad, q dq ddq tau_est, temperature[2], vol, sensor[2], motorstate, reserve[4]
_IMU = "4f3f3f3fh2x"  # quaternion, gyroscope, accelerometer, rpy, temperature, pad -> 56 bytes
_LOWSTATE_FMT = "<2IBB2xI" + _IMU + _MOTOR_STATE * _NUM_MOTORS + "40B" + "4I" + "I"

LOWCMD_SIZE = struct.calcsize(_LOWCMD_FMT)
LOWSTATE_SIZE = struct.calcsize(_LOWSTATE_FMT)
assert LOWCMD_SIZE == 1004 and LOWSTATE_SIZE == 2092, (LOWCMD_SIZE, LOWSTATE_SIZE)


def _make_table() -> list[int]:
    table = []
    for byte in range(256):
        c = byte << 24
        for _ in range(8):
            c = ((c << 1) ^ _POLY) if c & 0x80000000 else (c << 1)
        table.append(c & 0xFFFFFFFF)
    return table


_TABLE = _make_table()


def crc32_mpeg2_words(data: bytes) -> int:
    """CRC-32/MPEG-2 of `data` read as little-endian uint32 words, each fed MSB first."""
    if len(data) % 4:
        raise ValueError(f"crc input must be whole uint32 words, got {len(data)} bytes")
    crc = 0xFFFFFFFF
    table = _TABLE
    # A little-endian word fed MSB first = its 4 bytes in reverse order.
    for i in range(0, len(data), 4):
        for b in (data[i + 3], data[i + 2], data[i + 1], data[i]):
            crc = ((crc << 8) & 0xFFFFFFFF) ^ table[((crc >> 24) ^ b) & 0xFF]
    return crc


def pack_lowcmd(msg) -> bytes:
    """LowCmd (unitree_hg.msg.LowCmd) as Unitree's C struct, 1004 bytes."""
    vals: list = [msg.mode_pr, msg.mode_machine]
    for m in msg.motor_cmd:
        vals += [m.mode, m.q, m.dq, m.tau, m.kp, m.kd, m.reserve]
    vals += list(msg.reserve) + [msg.crc]
    return struct.pack(_LOWCMD_FMT, *vals)


def pack_lowstate(msg) -> bytes:
    """LowState (unitree_hg.msg.LowState) as Unitree's C struct, 2092 bytes."""
    imu = msg.imu_state
    vals: list = list(msg.version) + [msg.mode_pr, msg.mode_machine, msg.tick]
    vals += list(imu.quaternion) + list(imu.gyroscope) + list(imu.accelerometer) + list(imu.rpy)
    vals += [imu.temperature]
    for m in msg.motor_state:
        vals += [m.mode, m.q, m.dq, m.ddq, m.tau_est, *m.temperature, m.vol, *m.sensor, m.motorstate,
                 *m.reserve]
    vals += list(msg.wireless_remote) + list(msg.reserve) + [msg.crc]
    return struct.pack(_LOWSTATE_FMT, *vals)


def lowcmd_crc(msg) -> int:
    return crc32_mpeg2_words(pack_lowcmd(msg)[:-4])


def lowstate_crc(msg) -> int:
    return crc32_mpeg2_words(pack_lowstate(msg)[:-4])
