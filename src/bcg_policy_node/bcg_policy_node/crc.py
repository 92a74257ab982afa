"""CRC of unitree_hg LowCmd/LowState, as the G1 checks it (the robot drops a LowCmd with a wrong crc).

The message is packed as Unitree's C struct (little-endian, natural alignment: LowCmd 1004 bytes,
LowState 2092 bytes; *not* the CDR wire layout), the trailing crc field is dropped, and the rest is read
as uint32 words fed most-significant byte first into CRC-32/MPEG-2 (poly 0x04C11DB7, init 0xFFFFFFFF,
no reflection, no final xor) — equal to unitree_sdk2's crc32_core.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from bcg_sim.g1.joints import NUM_MOTOR_SLOTS

_NUM_MOTORS = NUM_MOTOR_SLOTS

_MOTOR_CMD = "B3x5fI"  # mode, pad, q dq tau kp kd, reserve -> 28 bytes
_LOWCMD_FMT = "<BB2x" + _MOTOR_CMD * _NUM_MOTORS + "4I" + "I"
_MOTOR_STATE = "B3x4f2hf2II4I"  # mode, pad, q dq ddq tau_est, temperature[2], vol, sensor[2], motorstate, reserve[4]
_IMU = "4f3f3f3fh2x"  # quaternion, gyroscope, accelerometer, rpy, temperature, pad -> 56 bytes
_LOWSTATE_FMT = "<2IBB2xI" + _IMU + _MOTOR_STATE * _NUM_MOTORS + "40B" + "4I" + "I"

LOWCMD_SIZE = struct.calcsize(_LOWCMD_FMT)
LOWSTATE_SIZE = struct.calcsize(_LOWSTATE_FMT)
assert LOWCMD_SIZE == 1004 and LOWSTATE_SIZE == 2092, (LOWCMD_SIZE, LOWSTATE_SIZE)


# CRC-32/MPEG-2 is the bit-mirror of zlib's reflected CRC-32 with the same polynomial and init: feeding
# zlib the bit-reversed bytes and bit-reversing its result (undoing zlib's final xor) gives the same value
# in C speed (~4 us for a LowState instead of ~1 ms in a Python loop, which starved the 500 Hz loops).
_BITREV8 = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))


def _bitrev32(x: int) -> int:
    return int(f"{x:032b}"[::-1], 2)


def crc32_mpeg2_words(data: bytes) -> int:
    """CRC-32/MPEG-2 of `data` read as little-endian uint32 words, each fed MSB first."""
    if len(data) % 4:
        raise ValueError(f"crc input must be whole uint32 words, got {len(data)} bytes")
    # A little-endian word fed MSB first = its 4 bytes in reverse order (a big-endian byte stream).
    stream = np.frombuffer(data, "<u4").astype(">u4").tobytes()
    return _bitrev32(zlib.crc32(stream.translate(_BITREV8)) ^ 0xFFFFFFFF)


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
        vals += [m.mode, m.q, m.dq, m.ddq, m.tau_est, *m.temperature, m.vol, *m.sensor, m.motorstate, *m.reserve]
    vals += list(msg.wireless_remote) + list(msg.reserve) + [msg.crc]
    return struct.pack(_LOWSTATE_FMT, *vals)


def lowcmd_crc(msg) -> int:
    return crc32_mpeg2_words(pack_lowcmd(msg)[:-4])


def lowstate_crc(msg) -> int:
    return crc32_mpeg2_words(pack_lowstate(msg)[:-4])
