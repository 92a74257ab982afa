"""Built-in G1 clips (run, jump, fight, dance) from keyframes + leg inverse kinematics.

Each generator builds a `_Plan`: pelvis trajectory, footholds with swing paths, and upper-body joint
keyframes, all from config/motions.yaml. The legs are then solved by `ik.solve_legs` so that feet are
exactly where the plan puts them: flat and still on the ground in stance (no sliding, no penetration), and
clear of the ground in swing. During flight the run's pelvis and the jump's whole-body centre of mass follow a
ballistic parabola (gravity g).
Phase durations are rounded to whole frames so that phase boundaries fall on frames.

The clips last 8.5-9 s (a real take) and move enough that a robot holding the first pose scores at least
twice the seed's Table 2 E_track of their kind (`ops.hold_error`; run 834, jump 80, fight 32, dance 41 cm):
run = steady running with flights along a path that curves 60 degrees left and back; jump = three jumps in a
row (forward, quarter turn left, quarter turn right); fight and dance = footwork (steps, turns, weight shifts)
under keyframed arm work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.interpolate import PchipInterpolator

from bcg_sim.config import ConfigError
from bcg_sim.g1 import JOINTS_29
from bcg_sim.motion import _model, ik, kinematics
from bcg_sim.motion.config import GenerationConfig, JumpConfig, KeyframedConfig, PoseKey, RunConfig, SwingConfig
from bcg_sim.motion.motion import Motion
from bcg_sim.quat import from_euler_zyx

# Bump when the generator code changes in a way that changes its output (part of the cache key).
GENERATOR_VERSION = 3  # 3: the jump's centre of mass is ballistic in flight
CLIPS = ("run", "jump", "fight", "dance")
_JOINT_INDEX = {j.name: i for i, j in enumerate(JOINTS_29)}
_FEET = ("left", "right")


@dataclass
class _Plan:
    """Everything but the leg joints, sampled at the clip's frames (T)."""

    times: np.ndarray  # [T] s
    root_pos_w: np.ndarray  # [T, 3] m
    root_quat_w: np.ndarray  # [T, 4] w x y z
    joint_pos: np.ndarray  # [T, 29] upper body set; legs = initial guess
    foot_pos_w: np.ndarray  # [T, 2, 3] sole point under the foot-body origin (z = 0 when on the ground), m
    foot_yaw: np.ndarray  # [T, 2] rad
    foot_pitch: np.ndarray  # [T, 2] rad, positive = toes down (only in swing)
    foot_swing: np.ndarray  # [T, 2] bool, the foot is between two footholds
    # Flights whose whole-body centre of mass must be ballistic: (push start, take-off, touch-down) times in s,
    # on frames. See _ballistic_com.
    flights: tuple[tuple[float, float, float], ...] = ()


@dataclass(frozen=True)
class _Hold:
    """A foot planted at (x, y) with heading yaw from t0 to t1 (s)."""

    t0: float
    t1: float
    x: float
    y: float
    yaw: float


def generate(name: str, cfg: GenerationConfig) -> Motion:
    """The built-in clip `name` (one of CLIPS), completed."""
    builders: dict[str, Callable[[GenerationConfig], _Plan]] = {
        "run": lambda c: _run(c.run, c.fps, c.gravity),
        "jump": lambda c: _jump(c.jump, c.fps, c.gravity),
        "fight": lambda c: _keyframed(c.fight, c.fps),
        "dance": lambda c: _keyframed(c.dance, c.fps),
    }
    if name not in builders:
        raise KeyError(f"unknown built-in clip {name!r}; expected one of {CLIPS}")
    plan = builders[name](cfg)
    qpos = np.concatenate([plan.root_pos_w, plan.root_quat_w, plan.joint_pos], axis=1)
    foot_target = plan.foot_pos_w + np.array([0.0, 0.0, ik.sole_height()])
    foot_quat = from_euler_zyx(np.zeros_like(plan.foot_yaw), plan.foot_pitch, plan.foot_yaw)
    rot_weight = np.where(plan.foot_swing, cfg.ik.swing_rotation_weight, 1.0)
    qpos = ik.solve_legs(qpos, foot_target, foot_quat, rot_weight, cfg.ik)
    for _ in range(_COM_PASSES if plan.flights else 0):
        delta = _ballistic_com(plan, kinematics.com_positions(qpos), cfg.gravity)  # [T, 3]
        qpos[:, :3] += delta
        foot_target += delta[:, None, :] * plan.foot_swing[..., None]  # feet in the air move with the body
        qpos = ik.solve_legs(qpos, foot_target, foot_quat, rot_weight, cfg.ik)
    motion = Motion(
        name=name,
        fps=float(cfg.fps),
        root_pos_w=qpos[:, :3],
        root_quat_w=qpos[:, 3:7],
        joint_pos=qpos[:, 7:],
        source=f"bcg built-in generator v{GENERATOR_VERSION}",
    )
    return kinematics.complete(motion)


# ----------------------------------------------------------------------------------------------- helpers
_COM_PASSES = 3  # each re-solves the planted legs, which moves the COM; after 3 push and flight agree to < 0.1 m/s


def _ballistic_com(plan: _Plan, com_w: np.ndarray, g: float) -> np.ndarray:
    """[T, 3] pelvis shift that makes the whole-body centre of mass ballistic in each of plan.flights.

    A pelvis flying a parabola is not enough: legs tucking and arms swinging move the centre of mass (COM)
    against the pelvis, and the clip then asks for a flight no robot can do (the COM of the built-in jump
    went 0.8 -> 1.45 -> 0.4 m/s horizontally in the air). In the air the shift is (parabola - COM), the
    parabola being the one through the COM at take-off and at touch-down (so the shift is 0 at both). Over
    the push a cubic ramp from 0 brings the COM's velocity to the parabola's at take-off, so the clip's push
    produces the flight it shows. The landing keeps its kink, an impact (a ramp there too would bend the knees
    faster than their motors turn). com_w: [T, 3] the clip's COM, m.
    """
    times = plan.times
    dt = times[1] - times[0]
    acc = np.array([0.0, 0.0, -g])
    delta = np.zeros((times.size, 3))
    for t_push, t_off, t_on in plan.flights:
        k_off, k_on = (int(round(t / dt)) for t in (t_off, t_on))
        span = t_on - t_off
        v_off = (com_w[k_on] - com_w[k_off]) / span - 0.5 * acc * span  # parabola's velocity at take-off
        air = slice(k_off, k_on + 1)
        tau = (times[air] - t_off)[:, None]
        delta[air] = com_w[k_off] + v_off * tau + 0.5 * acc * tau**2 - com_w[air]
        push = (times >= t_push) & (times <= t_off)
        s = (times[push] - t_push)[:, None] / (t_off - t_push)
        v_push = (com_w[k_off] - com_w[k_off - 1]) / dt  # the COM's velocity at the end of the push
        delta[push] += _hermite(np.zeros(3), np.zeros(3), np.zeros(3), v_off - v_push, t_off - t_push, s)
    return delta


def _frames(duration: float, fps: float) -> int:
    """Whole number of frames (>= 1) closest to a duration."""
    return max(1, int(round(duration * fps)))


def _min_jerk(s: np.ndarray) -> np.ndarray:
    """Smooth 0 -> 1 on s in [0, 1] with zero velocity and acceleration at both ends."""
    s = np.clip(s, 0.0, 1.0)
    return s**3 * (10.0 - 15.0 * s + 6.0 * s**2)


def _feet_track(
    holds: list[_Hold], times: np.ndarray, swing: SwingConfig, lift: Callable[[np.ndarray], np.ndarray] | None = None
) -> tuple[np.ndarray, ...]:
    """One foot's sole point [T, 3], yaw [T], pitch [T] and swing flag [T] from its footholds (sorted, non-overlapping).

    Before the first / after the last foothold the foot stays there. Between two footholds it swings:
    height apex * sin(pi s) (+ lift(t), e.g. the pelvis rise during a jump), foot pitch * sin(2 pi s) (toes down
    after lift-off so the leg can reach behind, toes up before touch-down so it can reach ahead; pitch < apex /
    (2 x toe length) keeps the sole above the ground), horizontal min-jerk on s in [hold, 1 - hold].
    """
    pos = np.zeros((times.size, 3))
    yaw = np.zeros(times.size)
    pitch = np.zeros(times.size)
    in_swing = np.zeros(times.size, dtype=bool)
    first = holds[0]
    pos[:, 0], pos[:, 1], yaw[:] = first.x, first.y, first.yaw
    for a, b in zip(holds[:-1], holds[1:]):
        s = (times - a.t1) / (b.t0 - a.t1)
        swinging = (s > 0) & (s < 1)
        after = times >= b.t0
        h = _min_jerk((s - swing.hold) / (1.0 - 2.0 * swing.hold))
        for k, (va, vb) in enumerate(((a.x, b.x), (a.y, b.y))):
            pos[swinging, k] = va + (vb - va) * h[swinging]
            pos[after, k] = vb
        yaw[swinging] = a.yaw + (b.yaw - a.yaw) * h[swinging]
        yaw[after] = b.yaw
        bump = np.sin(np.pi * s[swinging])
        pos[swinging, 2] = swing.apex * bump + (lift(times[swinging]) if lift is not None else 0.0)
        pitch[swinging] = swing.pitch * np.sin(2.0 * np.pi * s[swinging])
        in_swing |= swinging
    return pos, yaw, pitch, in_swing


def _upper_body(
    poses: dict[str, dict[str, float]],
    keys: list[PoseKey],
    times: np.ndarray,
    key_time: Callable[[float], float] = float,
) -> np.ndarray:
    """[T, 29] joints: G1 default pose, with the keyframed joints interpolated by PCHIP (C1, and no overshoot
    beyond the keyframe values, so keyframes within the joint limits give a clip within them)."""
    out = np.tile(_model.default_joint_pos(), (times.size, 1))
    if not keys:
        return out
    names = sorted({n for k in keys for n in _pose(poses, k.pose)})
    tk = np.array([key_time(k.t) for k in keys])
    for n in names:
        default = out[0, _JOINT_INDEX[n]]
        values = np.array([_pose(poses, k.pose).get(n, default) for k in keys])
        out[:, _JOINT_INDEX[n]] = _interp(tk, values, times)
    return out


def _pose(poses: dict[str, dict[str, float]], name: str) -> dict[str, float]:
    if name not in poses:
        raise ConfigError(f"motions.yaml: pose {name!r} is not defined; known: {sorted(poses)}")
    unknown = set(poses[name]) - set(_JOINT_INDEX)
    if unknown:
        raise ConfigError(f"motions.yaml: pose {name!r} names unknown joints {sorted(unknown)}")
    return poses[name]


def _interp(tk: np.ndarray, values: np.ndarray, times: np.ndarray) -> np.ndarray:
    """PCHIP through (tk, values) along axis 0, held constant outside [tk[0], tk[-1]]."""
    if tk.size == 1:
        return np.broadcast_to(values[0], (times.size,) + values.shape[1:]).copy()
    return PchipInterpolator(tk, values, axis=0)(np.clip(times, tk[0], tk[-1]))


def _stack_feet(tracks: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """(left, right) foot tracks -> foot_pos_w [T, 2, 3], foot_yaw, foot_pitch, foot_swing [T, 2]."""
    return tuple(np.stack(parts, axis=1) for parts in zip(*tracks))


class _Track:
    """A 3-D pelvis path built segment by segment: C1 cubic Hermite blends and ballistic flights."""

    def __init__(self, p0: np.ndarray, gravity: float) -> None:
        self.g = gravity
        self.knots: list[tuple[float, np.ndarray, np.ndarray]] = [(0.0, np.asarray(p0, float), np.zeros(3))]
        self.kinds: list[str] = []

    @property
    def end(self) -> tuple[float, np.ndarray, np.ndarray]:
        return self.knots[-1]

    def hermite(self, duration: float, p: np.ndarray, v: np.ndarray | None = None) -> _Track:
        t, _, _ = self.end
        self.knots.append((t + duration, np.asarray(p, float), np.zeros(3) if v is None else np.asarray(v, float)))
        self.kinds.append("hermite")
        return self

    def hold(self, duration: float) -> _Track:
        return self.hermite(duration, self.end[1])

    def ballistic(self, duration: float) -> _Track:
        t, p, v = self.end
        acc = np.array([0.0, 0.0, -self.g])
        self.knots.append((t + duration, p + v * duration + 0.5 * acc * duration**2, v + acc * duration))
        self.kinds.append("ballistic")
        return self

    def sample(self, times: np.ndarray) -> np.ndarray:
        """[T, 3] positions at times (held at the ends)."""
        out = np.tile(self.knots[0][1], (times.size, 1))
        acc = np.array([0.0, 0.0, -self.g])
        for (t0, p0, v0), (t1, p1, v1), kind in zip(self.knots[:-1], self.knots[1:], self.kinds):
            sel = (times >= t0) & (times <= t1)
            tau = (times[sel] - t0)[:, None]
            if kind == "ballistic":
                out[sel] = p0 + v0 * tau + 0.5 * acc * tau**2
            else:
                out[sel] = _hermite(p0, v0, p1, v1, t1 - t0, tau / (t1 - t0))
        out[times > self.end[0]] = self.end[1]
        return out


def _hermite(p0: np.ndarray, v0: np.ndarray, p1: np.ndarray, v1: np.ndarray, T: float, s: np.ndarray) -> np.ndarray:
    """Cubic Hermite between (p0, v0) and (p1, v1) over T seconds at s in [0, 1]."""
    h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
    return h00 * p0 + h10 * T * v0 + h01 * p1 + h11 * T * v1


# ----------------------------------------------------------------------------------------------- run
def _run(c: RunConfig, fps: float, g: float) -> _Plan:
    """Steady running: alternating single-support stances and ballistic flights, along a path that turns.

    Stance: the pelvis dips on a parabola between take-off and touch-down vertical speeds (+-g Tf / 2),
    so z is C1 and periodic. The horizontal speed is constant; its direction (the heading) follows the
    `heading` keys but turns only in stance, with a rate (1 - cos 2 pi s) shaped over each stance (zero at
    touch-down and take-off), so the horizontal velocity is constant in every flight (ballistic). The pelvis
    banks into the turns (atan(v w / g) for the keys' turn rate w). Footholds: under the pelvis at mid-stance,
    half_width to the side and foot_forward ahead in that step's heading, the foot pointing along it.
    """
    times = np.arange(_frames(c.duration, fps) + 1) / fps
    ts, tf = _frames(c.stance_time, fps) / fps, _frames(c.flight_time, fps) / fps
    period = ts + tf  # one step
    vz = 0.5 * g * tf
    phase = np.mod(times, period)
    s = phase / ts
    tau = phase - ts
    z = np.where(
        phase < ts, c.touchdown_height - vz * ts * (s - s**2), c.touchdown_height + vz * tau - 0.5 * g * tau**2
    )
    # heading on a fine grid (substeps per frame) from 2 steps before the clip to 2 after, integrated to a path
    sub = 20
    k_range = range(-2, int(np.ceil(times[-1] / period)) + 2)
    n0 = int(np.ceil(2 * period * fps)) * sub
    fine = (np.arange(-n0, (times.size - 1) * sub + n0 + 1)) / (fps * sub)
    tk = np.array([k.t for k in c.heading]) if c.heading else np.zeros(1)
    yk = np.array([k.yaw for k in c.heading]) if c.heading else np.zeros(1)
    wanted = PchipInterpolator(tk, yk) if tk.size > 1 else None  # the keys' heading, held outside them

    def heading_at(t: np.ndarray) -> np.ndarray:
        return wanted(np.clip(t, tk[0], tk[-1])) if wanted is not None else np.full_like(t, yk[0])

    k_step = np.floor(fine / period)  # the step each fine time belongs to
    ph = np.minimum(fine - k_step * period, ts)  # time into that step's stance (held through its flight)
    steps = np.unique(k_step)
    turn = heading_at((steps + 1) * period) - heading_at(steps * period)  # each step's heading change [rad]
    idx = np.searchsorted(steps, k_step)
    before = np.concatenate([[0.0], np.cumsum(turn)[:-1]])[idx]
    # in stance dpsi/dt = turn / ts * (1 - cos(2 pi ph / ts)), integrated exactly; constant in flight
    psi = before + turn[idx] / ts * (ph - ts / (2.0 * np.pi) * np.sin(2.0 * np.pi * ph / ts))
    psi += yk[0] - psi[n0]  # the heading at t = 0 is the first key's
    vel = c.speed * np.stack([np.cos(psi), np.sin(psi)], axis=1)
    path = np.concatenate([[[0.0, 0.0]], np.cumsum(0.5 * (vel[1:] + vel[:-1]) / (fps * sub), axis=0)])
    path -= path[n0]  # the pelvis starts at the origin
    frame = n0 + sub * np.arange(times.size)
    root = np.concatenate([path[frame], z[:, None]], axis=1)
    tracks = []
    for side, sign in zip((0, 1), (1.0, -1.0)):
        holds = []
        for k in k_range:
            if k % 2 != side:
                continue
            tm = k * period + ts / 2
            h = float(np.interp(tm, fine, psi))
            p = np.array([np.interp(tm, fine, path[:, 0]), np.interp(tm, fine, path[:, 1])])
            p += c.foot_forward * np.array([np.cos(h), np.sin(h)]) + sign * c.half_width * np.array(
                [-np.sin(h), np.cos(h)]
            )
            holds.append(_Hold(k * period, k * period + ts, float(p[0]), float(p[1]), h))
        tracks.append(_feet_track(holds, times, c.swing))
    # Stride phase: +1 at left mid-stance (right leg swinging forward), -1 at right mid-stance.
    stride = np.cos(np.pi * (times - ts / 2) / period)
    arm = np.cos(np.pi * (times - period) / period)  # +1 when the right foot touches down (left arm forward)
    rate = (
        wanted.derivative()(np.clip(times, tk[0], tk[-1])) * ((times >= tk[0]) & (times <= tk[-1]))
        if wanted is not None
        else np.zeros_like(times)
    )  # the keys' turn rate [rad/s]
    bank = -np.arctan(c.speed * rate / g)  # lean into the turn (a left turn rolls the pelvis left: roll < 0)
    quat = from_euler_zyx(
        c.roll_amplitude * stride + bank, np.full_like(times, c.lean), psi[frame] + c.yaw_amplitude * stride
    )
    joints = np.tile(_model.default_joint_pos(), (times.size, 1))
    for name, value in {
        "waist_yaw": -c.waist_yaw_amplitude * stride,
        "left_shoulder_pitch": c.arm_bias - c.arm_swing * arm,
        "right_shoulder_pitch": c.arm_bias + c.arm_swing * arm,
        "left_shoulder_roll": np.full_like(times, c.shoulder_roll),
        "right_shoulder_roll": np.full_like(times, -c.shoulder_roll),
        "left_elbow": c.elbow + c.elbow_swing * arm,
        "right_elbow": c.elbow - c.elbow_swing * arm,
    }.items():
        joints[:, _JOINT_INDEX[name]] = value
    return _Plan(times, root, quat, joints, *_stack_feet(tracks))


# ----------------------------------------------------------------------------------------------- jump
def _jump(c: JumpConfig, fps: float, g: float) -> _Plan:
    """Jumps one after the other: stand, crouch, push off, ballistic flight, land, absorb, stand up -- each
    `c.jumps` entry one such cycle, travelling `distance` along the heading it starts with and turning by `turn`.

    Phases 0..6 of a cycle: stand, crouch, push, flight, landing, recover, end. Upper-body key times in the
    config are `phase + fraction` (e.g. 3.5 = middle of the flight), the same in every cycle. In flight the
    feet rise with the pelvis plus a tuck, and land flat at the new footholds. The heading turns (PCHIP, no
    overshoot) from the start of the push to the end of the landing. The pelvis is planned ballistic in flight;
    `generate` then shifts it so that the whole-body centre of mass is (`_ballistic_com`).
    """
    if not c.jumps:
        raise ConfigError("motions.yaml: jump.jumps needs at least one jump")
    t_flight = _frames(2.0 * np.sqrt(2.0 * c.apex / g), fps) / fps
    vz = 0.5 * g * t_flight
    durations = (
        [_frames(d, fps) / fps for d in (c.stand_time, c.crouch_time, c.push_time)]
        + [t_flight]
        + [_frames(d, fps) / fps for d in (c.landing_time, c.recover_time, c.end_time)]
    )
    cycle = float(np.sum(durations))
    phase_starts = np.concatenate([[0.0], np.cumsum(durations)])  # [8] within one cycle
    times = np.arange(_frames(cycle * len(c.jumps), fps) + 1) / fps
    track = _Track(np.array([0.0, 0.0, c.stand_height]), g)
    centre, heading = np.zeros(2), 0.0
    feet_holds: list[list[_Hold]] = [[], []]
    yaw_t, yaw_v, pitch_t, pitch_v = [], [], [], []
    for k, jump in enumerate(c.jumps):
        t0 = k * cycle
        d = np.array([np.cos(heading), np.sin(heading)])
        vx = jump.distance / t_flight
        to = centre + d * vx * durations[2] / 2  # average speed of a Hermite ramp from rest is half its final
        land = to + d * jump.distance
        end = land + d * vx * durations[4] / 2
        track.hold(durations[0]).hermite(durations[1], [*centre, c.crouch_height])
        track.hermite(durations[2], [*to, c.takeoff_height], [*(d * vx), vz]).ballistic(durations[3])
        track.hermite(durations[4], [*end, c.land_height]).hermite(durations[5], [*end, c.stand_height])
        track.hold(durations[6])
        new_heading = heading + jump.turn
        t_off, t_on = t0 + phase_starts[3], t0 + phase_starts[4]
        for side, sign in enumerate((1.0, -1.0)):
            # the take-off foothold is the previous landing's (same place and heading): it ends at this take-off
            t_planted = feet_holds[side].pop().t0 if feet_holds[side] else -np.inf
            for ctr, hd, ta, tb in ((centre, heading, t_planted, t_off), (end, new_heading, t_on, np.inf)):
                x, y = (
                    ctr
                    + c.foot_forward * np.array([np.cos(hd), np.sin(hd)])
                    + sign * c.half_width * np.array([-np.sin(hd), np.cos(hd)])
                )
                feet_holds[side].append(_Hold(ta, tb, x, y, hd))
        yaw_t += [t0 + phase_starts[2], t0 + phase_starts[5]]
        yaw_v += [heading, new_heading]
        pitch_t += list(t0 + phase_starts[:7])
        pitch_v += [0.0, 0.0, c.lean, c.takeoff_lean, 0.0, c.lean, 0.0]
        centre, heading = end, new_heading
    root = track.sample(times)

    def lift(t: np.ndarray) -> np.ndarray:
        """Feet in flight: the pelvis rise (legs keep their length) plus a tuck tuck * sin^2(pi s), s = 0..1 over
        the flight, which leaves and reaches the ground with no speed of its own (sin(pi s) would jerk the
        feet up at 1.2 m/s the instant they leave, and the pelvis down with them once the COM is ballistic)."""
        s = np.mod(t, cycle) - phase_starts[3]
        return track.sample(t)[:, 2] - c.takeoff_height + c.tuck * np.sin(np.pi * s / t_flight) ** 2

    tracks = [_feet_track(holds, times, SwingConfig(apex=0.0, hold=c.hold, pitch=0.0), lift) for holds in feet_holds]
    yaw = _interp(np.array(yaw_t), np.array(yaw_v), times)
    pitch = _interp(np.array(pitch_t), np.array(pitch_v), times)
    quat = from_euler_zyx(np.zeros_like(times), pitch, yaw)

    def key_time(k: float) -> float:
        i = int(np.clip(np.floor(k), 0, len(durations) - 1))
        return float(phase_starts[i] + (k - i) * durations[i])

    cycle_keys = [(key_time(k.t), k.pose) for k in c.keys]
    keys = [
        PoseKey(n * cycle + t, pose) for n in range(len(c.jumps)) for t, pose in cycle_keys if n == 0 or t > 1e-9
    ]  # a cycle's first key is the previous one's last (same pose)
    joints = _upper_body(c.poses, keys, times)
    flights = tuple(
        tuple(float(k * cycle + phase_starts[i]) for i in (2, 3, 4)) for k in range(len(c.jumps))
    )  # push start, take-off, touch-down
    return _Plan(times, root, quat, joints, *_stack_feet(tracks), flights=flights)


# ----------------------------------------------------------------------------------------------- fight/dance
def _keyframed(c: KeyframedConfig, fps: float) -> _Plan:
    """Footwork: footholds from the steps, the pelvis over the support point of the feet (weight shifts before
    each lift, see KeyframedConfig) plus keyframed offsets, keyframed upper body."""
    times = np.arange(_frames(c.duration, fps) + 1) / fps
    lx, rx, lyaw, ryaw = c.stagger
    holds = {
        "left": [_Hold(-np.inf, np.inf, lx, c.half_width, lyaw)],
        "right": [_Hold(-np.inf, np.inf, rx, -c.half_width, ryaw)],
    }
    steps = sorted(c.steps, key=lambda s: s.t_lift)
    for step in steps:
        if step.foot not in holds:
            raise ConfigError(f"motions.yaml: step foot must be 'left' or 'right', got {step.foot!r}")
        last = holds[step.foot][-1]
        if not last.t0 < step.t_lift < step.t_land:
            raise ConfigError(
                f"motions.yaml: {step.foot} step lifting at {step.t_lift} s: the foot lands at "
                f"{last.t0} s before it, and must land after the lift (t_land {step.t_land})"
            )
        dx, dy, dyaw = step.move
        holds[step.foot][-1] = _Hold(last.t0, step.t_lift, last.x, last.y, last.yaw)
        holds[step.foot].append(_Hold(step.t_land, np.inf, last.x + dx, last.y + dy, last.yaw + dyaw))
    for a, b in zip(steps[:-1], steps[1:]):
        if b.t_lift <= a.t_land:
            raise ConfigError(
                f"motions.yaml: the {b.foot} foot lifts at {b.t_lift} s while the {a.foot} foot is "
                f"in the air (until {a.t_land} s): one foot at a time"
            )
    tracks = [_feet_track(holds[f], times, c.swing) for f in _FEET]
    foot_pos, foot_yaw, foot_pitch, foot_swing = _stack_feet(tracks)
    w = _support_weight(c, steps, times)[:, None]  # [T, 1] share of the left foot
    support = w * foot_pos[:, 0, :2] + (1.0 - w) * foot_pos[:, 1, :2]  # [T, 2]
    heading = w[:, 0] * foot_yaw[:, 0] + (1.0 - w[:, 0]) * foot_yaw[:, 1]
    tk = np.array([k.t for k in c.root])
    offset = _interp(tk, np.array([k.pos for k in c.root], float), times)  # [T, 3] forward, left, z
    rpy = _interp(tk, np.array([k.rpy for k in c.root], float), times)
    cos, sin = np.cos(heading), np.sin(heading)
    root = np.stack(
        [
            support[:, 0] + cos * offset[:, 0] - sin * offset[:, 1],
            support[:, 1] + sin * offset[:, 0] + cos * offset[:, 1],
            offset[:, 2],
        ],
        axis=1,
    )
    quat = from_euler_zyx(rpy[:, 0], rpy[:, 1], heading + rpy[:, 2])
    joints = _upper_body(c.poses, c.keys, times)
    return _Plan(times, root, quat, joints, foot_pos, foot_yaw, foot_pitch, foot_swing)


def _support_weight(c: KeyframedConfig, steps: list, times: np.ndarray) -> np.ndarray:
    """[T] the left foot's share of the support: 0.5, shifted to the planted foot during shift_time before each
    lift and held to the touch-down, then back to 0.5 over settle_time -- unless the next shift starts before
    that, when the weight goes straight from one planted foot to the other (steps in a row)."""
    keys: list[tuple[float, float]] = [(0.0, 0.5)]
    settling = False  # the last key ends a settling back to 0.5
    for step in steps:
        target = 1.0 - c.weight_shift if step.foot == "left" else c.weight_shift
        start = step.t_lift - c.shift_time
        if settling and keys[-1][0] > start - 1e-9:
            keys.pop()
        elif keys[-1][0] < start - 1e-9:
            keys.append((start, keys[-1][1]))
        keys += [(step.t_lift, target), (step.t_land, target), (step.t_land + c.settle_time, 0.5)]
        settling = True
    if keys[-1][0] < times[-1]:
        keys.append((float(times[-1]), keys[-1][1]))
    tk, wk = np.array(keys).T
    if np.any(np.diff(tk) <= 0):
        raise ConfigError("motions.yaml: steps must lift after the clip start and after the last touch-down")
    return _interp(tk, wk, times)
