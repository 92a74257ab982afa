"""The pelvis position from a pose source that does not rest on the soles, carried between its updates by leg odometry.

Leg odometry (bcg_sim.policy.odometry) assumes the supporting sole stands still. On a clip whose retargeted soles
skate (LAFAN1's fight1: leg odometry over the clip's own frames ends 1.8 m off its pelvis) a robot that copies the
clip slides its soles too, and the offset the policy observes is then wrong by as much as it slides. Every G1
carries a lidar (Livox MID-360); a lidar-inertial odometry on it (e.g. FAST-LIO, `nav_msgs/Odometry`) gives the
pelvis pose in a map frame at ~10 Hz, some 50 ms late, centimetres off, independent of the soles.

`PoseFusion` combines the two the usual way: the estimate is leg odometry now plus the pose source's correction
at the time its last pose was measured,

    estimate(t) = odo(t) + [pose(t_k) mapped into odometry's frame - odo(t_k)],

so a late, slow pose fixes what the soles' sliding added up, and leg odometry fills the steps between poses
(its drift over one pose period, not over the clip). The pose source's frame (map) and odometry's (the IMU's
world, placed at the clip's start) differ by a yaw and a shift: both are fixed at the first pose, which is
taken to agree with odometry at its own time.

`SimulatedPoseSource` is that pose source in simulation (bcg-eval, training's evaluation): the true pelvis
position and heading every `period_s`, `latency_s` old, with Gaussian noise of `noise_m` per axis and a drift that
walks `drift` m per sqrt(m) of path per axis (a lidar odometry drifts with the distance it covers).
Both work on one robot (no leading dims) or a batch of worlds ([N, ...]), numpy.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from bcg_sim.policy.odometry import LegOdometry
from bcg_sim.quat import yaw as yaw_of


def _rot2(yaw: np.ndarray) -> np.ndarray:
    """[..., 2, 2] rotation by yaw [...] rad about the vertical."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


class PoseFusion:
    """Pelvis position estimate [..., 3] m in odometry's frame: `LegOdometry` corrected by a pose source.

    Per control step: `correct(xy, yaw, age_s)` when a pose arrived (any number of steps apart), then
    `update(joint_pos, base_quat_w)`. `age_s`: how long before this step's measurement the pose was taken."""

    def __init__(self, control_dt: float, history_s: float = 1.0):
        self.odometry = LegOdometry()
        self.dt = float(control_dt)
        self._history: deque = deque(maxlen=max(2, int(round(history_s / self.dt)) + 1))  # (odo xy, IMU yaw)
        self._pending: tuple[np.ndarray, np.ndarray, int] | None = None
        self._map: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (R [...,2,2], pose p0, odo o0)
        self._offset = None  # [..., 2] m, added to odometry
        self.pose_age_s = np.inf  # [s] age of the newest pose used, at the last update (inf: none yet)
        self.position_w = np.zeros(3)

    def reset(self, joint_pos: np.ndarray, base_quat_w: np.ndarray, root_xy_w: np.ndarray | None = None) -> None:
        """Start at horizontal position root_xy_w [..., 2] m in odometry's frame (LegOdometry.reset); the pose
        source's frame is tied to it at the first pose after this."""
        self.odometry.reset(joint_pos, base_quat_w, root_xy_w)
        self._history.clear()
        self._history.append((self.odometry.position_w[..., :2].copy(), yaw_of(np.asarray(base_quat_w, float))))
        self._pending, self._map = None, None
        self._offset = np.zeros_like(self.odometry.position_w[..., :2])
        self.pose_age_s = np.inf
        self.position_w = self.odometry.position_w.copy()

    def correct(self, xy: np.ndarray, yaw: np.ndarray, age_s: float) -> None:
        """A pose measured age_s >= 0 before the coming update: position xy [..., 2] m and heading yaw [...] rad
        in the pose source's own frame."""
        if age_s < 0 or not np.isfinite(age_s):
            raise ValueError(f"pose age must be a finite number >= 0 s, got {age_s}")
        self._pending = (np.asarray(xy, float), np.asarray(yaw, float), int(round(age_s / self.dt)))

    def update(self, joint_pos: np.ndarray, base_quat_w: np.ndarray) -> np.ndarray:
        """Advance by one measurement; returns the estimate [..., 3] m (z: leg odometry's height)."""
        odo = self.odometry.update(joint_pos, base_quat_w)
        self._history.append((odo[..., :2].copy(), yaw_of(np.asarray(base_quat_w, float))))
        self.pose_age_s += self.dt
        if self._pending is not None:
            xy, yaw, age = self._pending
            self._pending = None
            o_k, psi_k = self._history[max(0, len(self._history) - 1 - age)]  # odometry when the pose was taken
            if self._map is None:  # the first pose: its frame's yaw and origin against odometry's
                self._map = (_rot2(psi_k - yaw), xy, o_k)
            rot, p0, o0 = self._map
            mapped = o0 + np.einsum("...ij,...j->...i", rot, xy - p0)
            self._offset = mapped - o_k
            self.pose_age_s = age * self.dt
        self.position_w = odo.copy()
        self.position_w[..., :2] += self._offset
        return self.position_w.copy()


class SimulatedPoseSource:
    """A lidar-inertial odometry in simulation: `step(xy, yaw)` with the true pelvis position [..., 2] m and
    heading [...] rad once per control step; returns (xy, yaw, age_s) when a pose is due (every period_s, the
    truth latency_s old plus its drift then plus noise_m Gaussian noise per axis), else None."""

    def __init__(
        self,
        control_dt: float,
        period_s: float,
        latency_s: float,
        noise_m: float,
        rng: np.random.Generator,
        drift: float = 0.0,
    ):
        if period_s <= 0 or min(latency_s, noise_m, drift) < 0:
            raise ValueError(
                f"pose source: period_s > 0, latency_s, noise_m, drift >= 0; got {period_s}, {latency_s}, "
                f"{noise_m}, {drift}"
            )
        self.period = max(1, int(round(period_s / control_dt)))
        self.latency = int(round(latency_s / control_dt))
        self.dt, self.noise, self.drift, self.rng = control_dt, noise_m, drift, rng
        self._truth: deque = deque(maxlen=self.latency + 1)  # (true xy + the drift then, yaw) per step
        self._k = 0
        self._walk: np.ndarray | None = None  # [..., 2] m, the drift so far
        self._last: np.ndarray | None = None  # [..., 2] m, the last true position

    def step(self, xy: np.ndarray, yaw: np.ndarray):
        xy = np.array(xy, float)
        if self._walk is None:
            self._walk, self._last = np.zeros_like(xy), xy
        path = np.linalg.norm(xy - self._last, axis=-1, keepdims=True)  # [..., 1] m walked this step
        self._walk = self._walk + self.rng.normal(0.0, 1.0, xy.shape) * self.drift * np.sqrt(path)
        self._last = xy
        self._truth.append((xy + self._walk, np.array(yaw, float)))
        due = self._k % self.period == 0 and len(self._truth) == self._truth.maxlen
        self._k += 1
        if not due:
            return None
        xy_then, yaw_then = self._truth[0]
        return xy_then + self.rng.normal(0.0, self.noise, xy_then.shape), yaw_then, self.latency * self.dt
