"""unitree_hg LowState/LowCmd <-> numpy, both directions, and the wireless-remote bytes.

Used by the policy node (LowState -> `RobotState`, targets -> LowCmd) and by the MuJoCo bridge
(sim state -> LowState, LowCmd -> `MotorCommand` -> PD torque). Every message we publish carries the
CRC the G1 checks (`bcg_policy_node.crc`); every message we read can be checked against its CRC.

Conventions:
- joints: the 29 joints of `bcg_sim.g1.joints.JOINTS_29` fill motor slots 0..28; slots 29..34 are unused
  (sent as mode 0 = disabled, all zero) and ignored on read.
- units: rad, rad/s, rad/s^2, N m; gains N m/rad and N m s/rad.
- IMU (the G1's pelvis IMU): quaternion w x y z of the pelvis in the IMU's world frame (z up, yaw drifts),
  gyroscope rad/s and accelerometer m/s^2 in the pelvis (body) frame.
- mode_pr 0 = PR mode (ankle pitch/roll joints, the joint order of JOINTS_29).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from bcg_policy_node.crc import crc32_mpeg2_words, lowcmd_crc, lowstate_crc
from bcg_sim.g1.joints import JOINTS_29, NUM_MOTOR_SLOTS
from unitree_hg.msg import LowCmd, LowState

NUM_JOINTS = len(JOINTS_29)  # motor slots 0..28 used by the 29-DoF G1
NUM_SLOTS = NUM_MOTOR_SLOTS  # motor slots in a unitree_hg message
MOTOR_MODE_ENABLE = 1  # MotorCmd.mode: 1 = enabled (PD + feed-forward torque), 0 = disabled
MODE_PR = 0  # LowCmd.mode_pr: pitch/roll ankle control (matches JOINTS_29)
REMOTE_SIZE = 40  # bytes of LowState.wireless_remote

# --- wireless remote (Unitree xRockerBtnDataStruct, 40 bytes, little-endian) -------------------------
# bytes 0-1 head, 2-3 button bitfield (uint16, bit i = BUTTONS[i]), then float32 lx, rx, ry, L2, ly
# at bytes 4, 8, 12, 16, 20; bytes 24-39 idle. Sticks are in [-1, 1], L2 analog in [0, 1].
BUTTONS: tuple[str, ...] = (
    "R1",
    "L1",
    "start",
    "select",
    "R2",
    "L2",
    "F1",
    "F3",
    "A",
    "B",
    "X",
    "Y",
    "up",
    "right",
    "down",
    "left",
)
_REMOTE_FMT = "<2BH5f16x"
assert struct.calcsize(_REMOTE_FMT) == REMOTE_SIZE


class BadMessage(ValueError):
    """A LowState/LowCmd that must not be used; the message says why (length, CRC, non-finite value)."""


@dataclass(frozen=True)
class RemoteState:
    """Decoded wireless remote: pressed buttons (names from BUTTONS) and sticks in [-1, 1]."""

    buttons: frozenset[str] = frozenset()
    lx: float = 0.0
    rx: float = 0.0
    ry: float = 0.0
    ly: float = 0.0
    l2: float = 0.0  # analog L2 trigger

    def pressed(self, *names: str) -> bool:
        """True when all `names` are held (a chord)."""
        return all(n in self.buttons for n in names)


def decode_remote(data: Sequence[int] | bytes | np.ndarray) -> RemoteState:
    """40 wireless_remote bytes -> RemoteState. Non-finite stick values read as 0."""
    raw = data if isinstance(data, (bytes, bytearray)) else np.asarray(data, dtype=np.uint8).tobytes()
    if len(raw) != REMOTE_SIZE:
        raise BadMessage(f"wireless_remote has {len(raw)} bytes, expected {REMOTE_SIZE}")
    _h0, _h1, bits, lx, rx, ry, l2, ly = struct.unpack(_REMOTE_FMT, raw)
    pressed = frozenset(name for i, name in enumerate(BUTTONS) if bits >> i & 1)
    f = [v if math.isfinite(v) else 0.0 for v in (lx, rx, ry, ly, l2)]
    return RemoteState(pressed, *f)


def encode_remote(
    buttons: Iterable[str] = (), lx: float = 0.0, rx: float = 0.0, ry: float = 0.0, ly: float = 0.0, l2: float = 0.0
) -> bytes:
    """RemoteState fields -> the 40 wireless_remote bytes (for the sim bridge, a keyboard, tests)."""
    bits = 0
    for name in buttons:
        if name not in BUTTONS:
            raise ValueError(f"unknown remote button {name!r}; known: {BUTTONS}")
        bits |= 1 << BUTTONS.index(name)
    return struct.pack(_REMOTE_FMT, 0, 0, bits, lx, rx, ry, l2, ly)


# --- LowState -> numpy (policy node) ----------------------------------------------------------------
@dataclass
class RobotState:
    """What the robot measures, in numpy (float64). Field names match the observation builder's
    `bcg_sim.policy` robot-state protocol (joint_pos, joint_vel, base_quat_w, base_ang_vel_b)."""

    joint_pos: np.ndarray  # [29] rad
    joint_vel: np.ndarray  # [29] rad/s
    joint_acc: np.ndarray  # [29] rad/s^2 (ddq as reported)
    joint_tau: np.ndarray  # [29] N m, estimated
    base_quat_w: np.ndarray  # [4] w x y z, pelvis orientation in the IMU world frame
    base_ang_vel_b: np.ndarray  # [3] rad/s, pelvis frame (gyroscope)
    base_lin_acc_b: np.ndarray  # [3] m/s^2, pelvis frame (accelerometer, includes gravity)
    base_rpy: np.ndarray  # [3] rad, IMU roll pitch yaw
    mode_machine: int = 0
    mode_pr: int = 0
    tick: int = 0
    remote: RemoteState = field(default_factory=RemoteState)


def _check_len(name: str, seq, n: int) -> None:
    if len(seq) != n:
        raise BadMessage(f"{name} has {len(seq)} entries, expected {n}")


def _finite(name: str, arr: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(arr)):
        bad = np.flatnonzero(~np.isfinite(arr)).tolist()
        raise BadMessage(f"{name} has non-finite values at index {bad}")
    return arr


def lowstate_to_state(msg: LowState, check_crc: bool = True) -> RobotState:
    """Validate a LowState and convert it. Raises BadMessage on wrong array lengths, CRC mismatch,
    non-finite joint/IMU values or a quaternion far from unit norm."""
    imu = msg.imu_state
    _check_len("motor_state", msg.motor_state, NUM_SLOTS)
    _check_len("imu_state.quaternion", imu.quaternion, 4)
    _check_len("imu_state.gyroscope", imu.gyroscope, 3)
    _check_len("imu_state.accelerometer", imu.accelerometer, 3)
    _check_len("imu_state.rpy", imu.rpy, 3)
    _check_len("wireless_remote", msg.wireless_remote, REMOTE_SIZE)
    if check_crc:
        crc = lowstate_crc(msg)
        if crc != msg.crc:
            raise BadMessage(f"LowState crc mismatch: field 0x{msg.crc:08x}, computed 0x{crc:08x}")
    motors = msg.motor_state[:NUM_JOINTS]
    m = np.array([(s.q, s.dq, s.ddq, s.tau_est) for s in motors], dtype=np.float64)  # [29, 4]
    return _robot_state(
        m,
        imu.quaternion,
        imu.gyroscope,
        imu.accelerometer,
        imu.rpy,
        msg.mode_machine,
        msg.mode_pr,
        msg.tick,
        msg.wireless_remote,
    )


def _robot_state(motors, quat, gyro, acc, rpy, mode_machine, mode_pr, tick, remote) -> RobotState:
    """Validated RobotState from motors [29, 4] (q, dq, ddq, tau_est) and the IMU/header fields."""
    m = np.array(motors, dtype=np.float64)
    imu = np.concatenate([np.asarray(v, dtype=np.float64) for v in (quat, gyro, acc, rpy)])  # [13]
    if not (np.isfinite(m[:, [0, 1, 3]]).all() and np.isfinite(imu[:10]).all()):  # rare: say where
        for name, x in (
            ("motor_state[:29].q", m[:, 0]),
            ("motor_state[:29].dq", m[:, 1]),
            ("motor_state[:29].tau_est", m[:, 3]),
            ("imu_state.quaternion", imu[0:4]),
            ("imu_state.gyroscope", imu[4:7]),
            ("imu_state.accelerometer", imu[7:10]),
        ):
            _finite(name, x)
    q = imu[0:4]
    norm = math.sqrt(float(q @ q))
    if abs(norm - 1.0) > 0.1:  # a real IMU quaternion is unit; anything else is corrupt
        raise BadMessage(f"imu_state.quaternion has norm {norm:.3f}, expected 1")
    ddq, rpy = m[:, 2], imu[10:13]
    return RobotState(
        joint_pos=m[:, 0],
        joint_vel=m[:, 1],
        joint_acc=ddq if np.isfinite(ddq).all() else np.nan_to_num(ddq),  # not used for control
        joint_tau=m[:, 3],
        base_quat_w=q / norm,
        base_ang_vel_b=imu[4:7],
        base_lin_acc_b=imu[7:10],
        base_rpy=rpy if np.isfinite(rpy).all() else np.nan_to_num(rpy),
        mode_machine=int(mode_machine),
        mode_pr=int(mode_pr),
        tick=int(tick),
        remote=decode_remote(remote),
    )


# --- serialized LowState (CDR bytes, rclpy raw subscription) -> numpy --------------------------------
# Turning a LowState into a Python message (35 MotorState objects) costs rclpy ~0.3 ms; reading the
# fields straight from the CDR bytes costs ~0.03 ms. CDR layout (little endian, offsets after the 4-byte
# encapsulation header, fixed-size arrays unprefixed, each field aligned to its size within the stream):
# version 0, mode_pr 8, mode_machine 9, tick 12, imu quaternion 16 / gyroscope 32 / accelerometer 44 / rpy 56 /
# temperature 68, motor_state[i] mode at 70 (i = 0) or 68 + 56 i, its 13 words from 72 + 56 i; wireless_remote
# 2028, reserve 2068, crc 2084; 2088 bytes. Unitree's C struct (the CRC input) pads differently: imu to 72
# bytes and every MotorState to 56 from its mode byte, so the CDR is re-packed for the CRC below.
_CDR_HEADER_LE = (0x00, 0x01)  # CDR_LE encapsulation (big-endian payloads are refused)
_CDR_SIZE = 2088
_CDR_MOTOR0, _CDR_MOTOR_STRIDE = 72, 56  # first MotorState q; spacing of MotorStates
_CDR_REMOTE = 2028


def _cdr_to_c_index() -> np.ndarray:
    """For each byte of Unitree's C LowState struct (crc excluded) the CDR payload byte it holds, or
    _CDR_SIZE (a zero byte appended by the reader) for the struct's padding."""
    pad = _CDR_SIZE
    idx = list(range(70)) + [pad, pad]  # header + imu, then the C struct's 2 pad bytes after temperature
    for i in range(NUM_SLOTS):
        mode = 70 if i == 0 else 68 + _CDR_MOTOR_STRIDE * i
        data = _CDR_MOTOR0 + _CDR_MOTOR_STRIDE * i
        idx += [mode, pad, pad, pad] + list(range(data, data + 52))
    idx += list(range(_CDR_REMOTE, _CDR_SIZE - 4))  # wireless_remote, reserve
    assert len(idx) == 2088, len(idx)
    return np.array(idx, dtype=np.intp)


_CDR_TO_C = _cdr_to_c_index()


def lowstate_cdr_to_state(data: bytes, check_crc: bool = True) -> RobotState:
    """A serialized LowState (rclpy raw subscription: encapsulation header + CDR) -> RobotState, with the
    same checks as lowstate_to_state. Raises BadMessage on a wrong size or encoding, CRC mismatch,
    non-finite joint/IMU values or a non-unit quaternion."""
    if len(data) < 4 + _CDR_SIZE or tuple(data[:2]) != _CDR_HEADER_LE:
        raise BadMessage(
            f"serialized LowState of {len(data)} bytes with encapsulation {bytes(data[:2]).hex()}, "
            f"expected {4 + _CDR_SIZE} bytes of little-endian CDR"
        )
    p = np.frombuffer(data, dtype=np.uint8, count=_CDR_SIZE, offset=4)
    crc_field = int(p[_CDR_SIZE - 4 :].view("<u4")[0])
    if check_crc:
        c = np.append(p, np.uint8(0))[_CDR_TO_C].tobytes()
        crc = crc32_mpeg2_words(c)
        if crc != crc_field:
            raise BadMessage(f"LowState crc mismatch: field 0x{crc_field:08x}, computed 0x{crc:08x}")
    buf = p.data
    motors = np.ndarray((NUM_JOINTS, 4), dtype="<f4", buffer=buf, offset=_CDR_MOTOR0, strides=(_CDR_MOTOR_STRIDE, 4))
    imu = np.ndarray(13, dtype="<f4", buffer=buf, offset=16)
    return _robot_state(
        motors,
        imu[0:4],
        imu[4:7],
        imu[7:10],
        imu[10:13],
        p[9],
        p[8],
        p[12:16].view("<u4")[0],
        p[_CDR_REMOTE : _CDR_REMOTE + REMOTE_SIZE].tobytes(),
    )


# --- numpy targets -> LowCmd (policy node) ----------------------------------------------------------
def _vec(name: str, x, default: float = 0.0) -> np.ndarray:
    """[29] float64 from an array, a scalar or None (-> default)."""
    a = (
        np.full(NUM_JOINTS, default, dtype=np.float64)
        if x is None
        else np.broadcast_to(np.asarray(x, dtype=np.float64), (NUM_JOINTS,))
    )
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has non-finite values; refusing to command the robot with them")
    return a


def fill_lowcmd(msg: LowCmd, q, kp, kd, dq=None, tau=None, *, mode_machine: int, mode_pr: int = MODE_PR) -> LowCmd:
    """Write joint targets into `msg` (in place) and set its CRC.

    q [29] rad, kp [29] N m/rad, kd [29] N m s/rad, dq [29] rad/s (default 0), tau [29] N m feed-forward
    (default 0); scalars broadcast. The motor applies tau + kp (q - q_meas) + kd (dq - dq_meas).
    mode_machine must be the value the robot reports in LowState. Slots 29..34 are zeroed (disabled).
    Raises ValueError on non-finite input (never sends NaN to a motor).
    """
    q, kp, kd = _vec("q", q), _vec("kp", kp), _vec("kd", kd)
    dq, tau = _vec("dq", dq), _vec("tau", tau)
    if np.any(kp < 0) or np.any(kd < 0):
        raise ValueError("kp and kd must be >= 0")
    msg.mode_pr = int(mode_pr)
    msg.mode_machine = int(mode_machine)
    for i, m in enumerate(msg.motor_cmd):
        if i < NUM_JOINTS:
            m.mode, m.q, m.dq, m.tau = MOTOR_MODE_ENABLE, float(q[i]), float(dq[i]), float(tau[i])
            m.kp, m.kd = float(kp[i]), float(kd[i])
        else:
            m.mode, m.q, m.dq, m.tau, m.kp, m.kd = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    msg.crc = lowcmd_crc(msg)
    return msg


def make_lowcmd(q, kp, kd, dq=None, tau=None, *, mode_machine: int, mode_pr: int = MODE_PR) -> LowCmd:
    """A new LowCmd with these targets and a correct CRC (see fill_lowcmd)."""
    return fill_lowcmd(LowCmd(), q, kp, kd, dq, tau, mode_machine=mode_machine, mode_pr=mode_pr)


def fill_damping(msg: LowCmd, kd, *, mode_machine: int, mode_pr: int = MODE_PR) -> LowCmd:
    """Damping command: kp 0, kd `kd` (scalar or [29]), zero targets/torque -> tau = -kd dq."""
    return fill_lowcmd(msg, 0.0, 0.0, kd, 0.0, 0.0, mode_machine=mode_machine, mode_pr=mode_pr)


def fill_zero_torque(msg: LowCmd, *, mode_machine: int, mode_pr: int = MODE_PR) -> LowCmd:
    """Zero torque: motors enabled with kp = kd = tau = 0 (the robot is limp, still listening)."""
    return fill_lowcmd(msg, 0.0, 0.0, 0.0, 0.0, 0.0, mode_machine=mode_machine, mode_pr=mode_pr)


# --- LowCmd -> numpy (MuJoCo bridge) ----------------------------------------------------------------
@dataclass
class MotorCommand:
    """A LowCmd in numpy, slots 0..28 (float64; mode uint8)."""

    q: np.ndarray  # [29] rad
    dq: np.ndarray  # [29] rad/s
    tau: np.ndarray  # [29] N m feed-forward
    kp: np.ndarray  # [29] N m/rad
    kd: np.ndarray  # [29] N m s/rad
    mode: np.ndarray  # [29] uint8, 0 = disabled (no torque)
    mode_machine: int = 0
    mode_pr: int = 0


def lowcmd_to_command(msg: LowCmd, check_crc: bool = True) -> MotorCommand:
    """Validate a LowCmd like the robot does (length, CRC; plus finiteness) and convert it.
    Raises BadMessage when the robot would drop it (or when it holds NaN/inf)."""
    _check_len("motor_cmd", msg.motor_cmd, NUM_SLOTS)
    if check_crc:
        crc = lowcmd_crc(msg)
        if crc != msg.crc:
            raise BadMessage(f"LowCmd crc mismatch: field 0x{msg.crc:08x}, computed 0x{crc:08x}")
    m = np.array(
        [(c.q, c.dq, c.tau, c.kp, c.kd, c.mode) for c in msg.motor_cmd[:NUM_JOINTS]], dtype=np.float64
    )  # [29, 6]
    _finite("motor_cmd[:29]", m)
    return MotorCommand(
        q=m[:, 0],
        dq=m[:, 1],
        tau=m[:, 2],
        kp=m[:, 3],
        kd=m[:, 4],
        mode=m[:, 5].astype(np.uint8),
        mode_machine=int(msg.mode_machine),
        mode_pr=int(msg.mode_pr),
    )


def pd_torque(cmd: MotorCommand, q: np.ndarray, dq: np.ndarray, effort_limit: np.ndarray | None = None) -> np.ndarray:
    """Joint torque [29] N m the motors produce for `cmd` at measured q, dq [29]:
    tau_ff + kp (q_des - q) + kd (dq_des - dq), zero for disabled motors, clipped to +-effort_limit."""
    tau = cmd.tau + cmd.kp * (cmd.q - q) + cmd.kd * (cmd.dq - dq)
    tau = np.where(cmd.mode != 0, tau, 0.0)
    if effort_limit is not None:
        tau = np.clip(tau, -effort_limit, effort_limit)
    return tau


# --- numpy sim state -> LowState (MuJoCo bridge) ----------------------------------------------------
def _rpy_from_quat(q: np.ndarray) -> np.ndarray:
    """ZYX roll pitch yaw [3] rad of a w x y z quaternion (what the G1 IMU reports in imu_state.rpy)."""
    w, x, y, z = q
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.array([roll, pitch, yaw])


def fill_lowstate(
    msg: LowState,
    q,
    dq,
    base_quat_w,
    base_ang_vel_b,
    base_lin_acc_b=None,
    tau_est=None,
    ddq=None,
    *,
    mode_machine: int = 0,
    mode_pr: int = MODE_PR,
    tick: int = 0,
    wireless_remote: bytes | Sequence[int] | None = None,
) -> LowState:
    """Write a (simulated) robot state into `msg` (in place) and set its CRC.

    q, dq, ddq, tau_est [29] (rad, rad/s, rad/s^2, N m); base_quat_w [4] w x y z; base_ang_vel_b [3]
    rad/s and base_lin_acc_b [3] m/s^2 (specific force, i.e. +9.81 z when standing still) in the pelvis
    frame; tick in ms like the robot's; wireless_remote 40 bytes (default: nothing pressed).
    """
    q, dq = _vec("q", q), _vec("dq", dq)
    ddq, tau_est = _vec("ddq", ddq), _vec("tau_est", tau_est)
    quat = np.asarray(base_quat_w, dtype=np.float64)
    imu = msg.imu_state
    imu.quaternion = quat.astype(np.float32)
    imu.gyroscope = np.asarray(base_ang_vel_b, dtype=np.float32)
    acc = np.array([0.0, 0.0, 9.81]) if base_lin_acc_b is None else base_lin_acc_b
    imu.accelerometer = np.asarray(acc, dtype=np.float32)
    imu.rpy = _rpy_from_quat(quat).astype(np.float32)
    msg.mode_pr, msg.mode_machine, msg.tick = int(mode_pr), int(mode_machine), int(tick) & 0xFFFFFFFF
    for i, s in enumerate(msg.motor_state[:NUM_JOINTS]):
        s.mode, s.q, s.dq, s.ddq, s.tau_est = (
            MOTOR_MODE_ENABLE,
            float(q[i]),
            float(dq[i]),
            float(ddq[i]),
            float(tau_est[i]),
        )
    remote = encode_remote() if wireless_remote is None else bytes(bytearray(wireless_remote))  # any int seq
    if len(remote) != REMOTE_SIZE:
        raise ValueError(f"wireless_remote must be {REMOTE_SIZE} bytes, got {len(remote)}")
    msg.wireless_remote = np.frombuffer(remote, dtype=np.uint8).copy()
    msg.crc = lowstate_crc(msg)
    return msg


def make_lowstate(q, dq, base_quat_w, base_ang_vel_b, base_lin_acc_b=None, tau_est=None, ddq=None, **kw) -> LowState:
    """A new LowState with this state and a correct CRC (see fill_lowstate)."""
    return fill_lowstate(LowState(), q, dq, base_quat_w, base_ang_vel_b, base_lin_acc_b, tau_est, ddq, **kw)
