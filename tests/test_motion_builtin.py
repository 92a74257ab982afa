"""Built-in clips (run, jump, fight, dance): physically plausible by construction, deterministic, cached,
as long as a real take and moving enough that holding the first pose is far from tracking them.

Thresholds: stance-foot horizontal speed < 1 cm/s, sole spheres >= -1 mm, joints within the G1 limits,
joint speeds within the motors' velocity limits, during flight the flying point (the jump's whole-body centre of
mass, the run's pelvis) has a height with second difference -g (9.81 m/s^2) to 1e-6 m/s^2 and a constant
horizontal velocity; hold-the-first-pose E_track >= 2 x the seed's
Table 2 bound of the clip's kind.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bcg_sim.g1 import joint_limits
from bcg_sim.motion import Motion, generators, kinematics, library, ops
from bcg_sim.motion.config import motions_config

STANCE_SPEED_MAX = 0.01  # m/s
PENETRATION_MAX = 0.001  # m
BALLISTIC_TOL = 1e-6  # m/s^2
DURATION_S = (8.0, 10.0)  # a real take (the LAFAN1-G1 windows trained on are 10 s)
# The seed's Table 2 E_track of a tracking policy per motion kind [cm]; holding a clip's first pose must score at
# least twice that, so that meeting the bound means tracking, not standing still.
SEED_BOUND_CM = {"run": 34.1, "jump": 18.6, "fight": 13.5, "dance": 18.5}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bcg_cache")


@pytest.fixture(scope="module")
def clips(cache: Path) -> dict[str, Motion]:
    """Each built-in clip generated from scratch in an empty cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("BCG_CACHE_DIR", str(cache))
    out = {}
    try:
        for name in generators.CLIPS:
            out[name] = library.load(name)
    finally:
        mp.undo()
    return out


@pytest.mark.parametrize("name", generators.CLIPS)
def test_clip_shape(clips: dict[str, Motion], name: str) -> None:
    m = clips[name]
    assert m.fps == motions_config().generation.fps and DURATION_S[0] <= m.duration <= DURATION_S[1]
    assert m.completed and m.joint_pos.shape == (m.num_frames, 29)
    assert m.foot_contact.any(), "a clip without ground contact"


@pytest.mark.parametrize("name", generators.CLIPS)
def test_stance_feet_do_not_slide(clips: dict[str, Motion], name: str) -> None:
    m = clips[name]
    feet = kinematics._foot_indices(m)
    horizontal = np.linalg.norm(m.body_lin_vel_w[:, feet, :2], axis=-1)  # [T, 2]
    assert horizontal[m.foot_contact].max() < STANCE_SPEED_MAX


@pytest.mark.parametrize("name", generators.CLIPS)
def test_no_ground_penetration(clips: dict[str, Motion], name: str) -> None:
    assert kinematics.foot_heights(clips[name]).min() >= -PENETRATION_MAX


@pytest.mark.parametrize("name", generators.CLIPS)
def test_joints_within_limits(clips: dict[str, Motion], name: str) -> None:
    lo, hi = joint_limits()
    q = clips[name].joint_pos
    assert (q >= lo - 1e-9).all() and (q <= hi + 1e-9).all()


@pytest.mark.parametrize("name", ["run", "jump"])
def test_flight_is_ballistic(clips: dict[str, Motion], name: str) -> None:
    m = clips[name]
    flight = ~m.foot_contact.any(axis=1)
    inner = flight[:-2] & flight[1:-1] & flight[2:]  # frame t-1, t, t+1 all in flight
    assert inner.sum() >= 3, "no flight phase"
    if name == "jump":  # the jump tucks its legs and swings its arms in the air: its centre of mass flies
        point = kinematics.com_positions(m.qpos())
    else:
        point = m.root_pos_w
    z = point[:, 2]
    acc = (z[2:] - 2 * z[1:-1] + z[:-2]) * m.fps**2
    g = motions_config().generation.gravity
    np.testing.assert_allclose(acc[inner], -g, atol=BALLISTIC_TOL)
    v = np.diff(point[:, :2], axis=0) * m.fps  # horizontal: constant velocity within each flight
    both = flight[:-1] & flight[1:]
    starts = np.flatnonzero(both & ~np.r_[False, both[:-1]])
    assert len(starts) >= (3 if name == "jump" else 10), "fewer flights than the clip has"
    for i in starts:
        n = int(np.argmin(both[i:])) if not both[i:].all() else len(both) - i
        tol = 1e-6 if name == "jump" else 1e-9  # m/s; the COM goes through the leg IK at the take-off frame
        assert np.ptp(v[i : i + n], axis=0).max() < tol, f"flight at {i / m.fps:.2f} s"


@pytest.mark.parametrize("name", generators.CLIPS)
def test_joint_speeds_within_the_motor_limits(clips: dict[str, Motion], name: str) -> None:
    from bcg_sim.g1.joints import JOINTS_29, MOTORS

    limit = np.array([MOTORS[j.motor].velocity_limit for j in JOINTS_29])
    assert (np.abs(clips[name].joint_vel) <= limit).all()
    assert library.speed_warning(clips[name]) is None


@pytest.mark.parametrize("name", generators.CLIPS)
def test_holding_the_first_pose_is_far_from_the_clip(clips: dict[str, Motion], name: str) -> None:
    """hold-the-first-pose E_track >= 2 x the seed's bound: a policy meeting the bound must track the clip."""
    hold_cm = 100.0 * ops.hold_error(clips[name])
    assert hold_cm >= 2.0 * SEED_BOUND_CM[name], f"{name}: holding the first pose scores {hold_cm:.1f} cm"


@pytest.mark.parametrize("name", ["fight", "dance"])
def test_footwork_clips_step_turn_and_shift_weight(clips: dict[str, Motion], name: str) -> None:
    """fight and dance travel, turn and step (not only arm work): >= 8 steps, the pelvis >= 0.3 m from its start
    at some time, its heading turned >= 1.5 rad at some time, and single support >= 15 % of the clip."""
    m = clips[name]
    c = m.foot_contact
    lifts = int(np.sum(c[:-1] & ~c[1:]))
    assert lifts >= 8
    assert np.linalg.norm(m.root_pos_w[:, :2] - m.root_pos_w[0, :2], axis=1).max() >= 0.3
    w, x, y, z = m.root_quat_w.T
    yaw = np.unwrap(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))  # pelvis heading
    assert np.abs(yaw - yaw[0]).max() >= 1.5
    assert (c.sum(axis=1) == 1).mean() >= 0.15


def test_run_moves_at_its_speed_and_turns(clips: dict[str, Motion]) -> None:
    """Constant horizontal speed (central differences cut the curves' chords: 1e-3), a path that turns by the
    heading keys (60 degrees left and back) and ends on its first heading, feet on the ground 20-50 % of frames."""
    m = clips["run"]
    speed = np.linalg.norm(m.root_lin_vel_w[:, :2], axis=1)
    np.testing.assert_allclose(speed, motions_config().generation.run.speed, rtol=1e-3)
    v = m.root_lin_vel_w[:, :2]
    course = np.unwrap(np.arctan2(v[:, 1], v[:, 0]))
    assert course.max() == pytest.approx(1.05, abs=0.05) and abs(course[-1]) < 0.02 and abs(course[0]) < 0.02
    assert 0.2 < m.foot_contact.mean() < 0.5


def test_generation_is_deterministic_and_cached(
    clips: dict[str, Motion], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    again = generators.generate("dance", motions_config().generation)
    np.testing.assert_array_equal(again.joint_pos, clips["dance"].joint_pos)
    monkeypatch.setenv("BCG_CACHE_DIR", str(cache))
    files = sorted(p.name for p in (cache / "motions").glob("*.npz"))
    assert [f.split("-")[0] for f in files] == sorted(generators.CLIPS)
    assert library.cache_path("dance").name in files
    cached = library.load("dance")
    assert "motions/dance-" in cached.source  # read from the cache, not regenerated
    np.testing.assert_allclose(cached.joint_pos, clips["dance"].joint_pos, atol=0)
