"""How noisy a robot's sensors are, from a recording of it standing still: the levels `bcg-eval --noise` takes.

    bcg-replay BAG --sensor-noise [--start S] [--end S]

The G1's encoder, joint-velocity and gyroscope noise are not published (Unitree's MJCF gives the gyro 5e-4
rad/s and nothing else), so robustness is evaluated at a stress level (docs/eval.md). A minute of /lowstate
from the robot standing (damping or the policy node's HOLD, nobody touching it) gives the real ones:

- the noise of a channel x_t sampled at ~500 Hz is taken from its second differences
  d_t = x_{t+1} - 2 x_t + x_{t-1}: a slow motion (sway, a PD settling) adds acceleration * dt^2 to them, tiny at
  2 ms, while white noise of std s gives d a std of sqrt(6) s; the std of d is read robustly, as 1.4826 x its
  median absolute deviation, so a bump or a dropped message does not count;
- per sensor (29 encoders, 29 joint velocities, 3 gyro axes) the median over channels is the level (the one
  std bcg-eval applies to every channel), the largest channel is printed beside it.

What it cannot see: noise that is correlated over samples (a filtered joint velocity) looks smaller than it is,
and an encoder whose steps are coarser than its noise reads as its step size (printed too: the smallest
non-zero change of any encoder).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bcg_policy_node.bags import BagError, read_bag

MIN_MESSAGES = 100  # fewer /lowstate messages than this cannot give a level
MAD_TO_STD = 1.4826  # std of a Gaussian = this x its median absolute deviation
SECOND_DIFF_GAIN = np.sqrt(6.0)  # std of x_{t+1} - 2 x_t + x_{t-1} for white noise of std 1


@dataclass(frozen=True)
class SensorNoise:
    """Noise stds per channel from a still recording, and what they were read from."""

    joint_pos: np.ndarray  # [29] rad
    joint_vel: np.ndarray  # [29] rad/s
    gyro: np.ndarray  # [3] rad/s, pelvis frame
    messages: int
    seconds: float  # recorded time the messages span
    encoder_step: float  # [rad] smallest non-zero change of any encoder (its resolution, or finer)
    joint_vel_rms: float  # [rad/s] RMS of the joint velocities themselves: how still the robot stood

    def levels(self) -> tuple[float, float, float]:
        """(encoders [rad], joint velocities [rad/s], gyro [rad/s]): the median channel of each sensor, the
        three numbers of `bcg-eval --noise`."""
        return float(np.median(self.joint_pos)), float(np.median(self.joint_vel)), float(np.median(self.gyro))


def channel_noise(x: np.ndarray) -> np.ndarray:
    """Noise std of each column of x [T, C] (samples in time order), from the MAD of its second differences."""
    d = x[2:] - 2.0 * x[1:-1] + x[:-2]
    mad = np.median(np.abs(d - np.median(d, axis=0)), axis=0)
    return MAD_TO_STD * mad / SECOND_DIFF_GAIN


def estimate(bag: str | Path, start_s: float = 0.0, end_s: float | None = None) -> SensorNoise:
    """Noise levels from the /lowstate messages of `bag` between start_s and end_s seconds after its first one."""
    from bcg_policy_node import lowlevel as ll

    if end_s is not None and end_s <= start_s:
        raise ValueError(f"--end ({end_s}) must be after --start ({start_s})")
    stamps, q, dq, gyro = [], [], [], []
    t0 = None
    for m in read_bag(bag, ["/lowstate"]):
        t0 = m.timestamp_ns if t0 is None else t0
        t = (m.timestamp_ns - t0) * 1e-9
        if t < start_s or (end_s is not None and t > end_s):
            continue
        s = ll.lowstate_cdr_to_state(m.cdr)
        stamps.append(t)
        q.append(s.joint_pos)
        dq.append(s.joint_vel)
        gyro.append(s.base_ang_vel_b)
    if len(stamps) < MIN_MESSAGES:
        raise BagError(
            f"bag {bag}: {len(stamps)} /lowstate messages in the chosen span, --sensor-noise needs at least "
            f"{MIN_MESSAGES} (a minute of a standing robot at 500 Hz is 30 000)"
        )
    q_a, dq_a = np.asarray(q), np.asarray(dq)
    steps = np.abs(np.diff(q_a, axis=0))
    steps = steps[steps > 0]
    return SensorNoise(
        joint_pos=channel_noise(q_a),
        joint_vel=channel_noise(dq_a),
        gyro=channel_noise(np.asarray(gyro)),
        messages=len(stamps),
        seconds=stamps[-1] - stamps[0],
        encoder_step=float(steps.min()) if steps.size else 0.0,
        joint_vel_rms=float(np.sqrt(np.mean(dq_a**2))),
    )


def report(r: SensorNoise) -> str:
    """The lines `bcg-replay --sensor-noise` prints."""
    q, dq, g = r.levels()
    rate = (r.messages - 1) / r.seconds if r.seconds > 0 else float("nan")
    return "\n".join(
        [
            f"bcg-replay: {r.messages} /lowstate messages over {r.seconds:.1f} s ({rate:.0f} Hz); the joint "
            f"velocities' RMS {r.joint_vel_rms:.3g} rad/s (on a still robot close to their noise below)",
            f"  encoders          {q:.3g} rad    (largest joint {r.joint_pos.max():.3g}; smallest step seen "
            f"{r.encoder_step:.3g} rad)",
            f"  joint velocities  {dq:.3g} rad/s  (largest joint {r.joint_vel.max():.3g})",
            f"  gyro              {g:.3g} rad/s  (largest axis {r.gyro.max():.3g})",
            f"  -> bcg-eval POLICY --noise {q:.3g} {dq:.3g} {g:.3g}",
        ]
    )
