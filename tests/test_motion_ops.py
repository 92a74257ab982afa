"""Resampling (slerp), time windows, velocities, ground alignment and the 29 <-> 23 DoF mapping."""

from __future__ import annotations

import numpy as np
import pytest

from bcg_sim import quat
from bcg_sim.motion import (
    Motion,
    align_ground,
    clip,
    complete,
    from_23dof,
    ground_offset,
    hold_error,
    kinematics,
    resample,
    to_23dof,
    window,
)


@pytest.fixture(scope="module")
def twisting() -> Motion:
    """2 s at 30 fps: pelvis spinning about z at 1 rad/s and rolling, moving at 0.5 m/s, joints waving."""
    fps, n = 30.0, 61
    t = np.arange(n) / fps
    root_quat = quat.from_euler_zyx(0.2 * np.sin(2 * t), 0.1 * np.cos(t), 1.0 * t)
    pos = np.stack([0.5 * t, 0.1 * np.sin(t), 0.75 + 0.02 * np.sin(3 * t)], 1)
    joints = 0.2 * np.sin(t[:, None] + np.arange(29)[None, :])
    return complete(Motion("twist", fps, pos, root_quat, joints))


def test_resample_up_and_back_matches(twisting: Motion) -> None:
    back = resample(resample(twisting, 120.0), 30.0)
    assert back.num_frames == twisting.num_frames
    np.testing.assert_allclose(back.root_pos_w, twisting.root_pos_w, atol=1e-12)
    np.testing.assert_allclose(back.root_quat_w, twisting.root_quat_w, atol=1e-12)
    np.testing.assert_allclose(back.joint_pos, twisting.joint_pos, atol=1e-12)


def test_resample_to_odd_rate_keeps_unit_quaternions_and_duration(twisting: Motion) -> None:
    m = resample(twisting, 47.0)
    assert m.fps == 47.0 and m.duration == pytest.approx(2.0, abs=1 / 47)
    np.testing.assert_allclose(np.linalg.norm(m.root_quat_w, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(m.body_quat_w, axis=2), 1.0, atol=1e-9)


def test_slerp_halfway_between_two_yaws() -> None:
    a = quat.from_euler_zyx(np.array(0.0), np.array(0.0), np.array(0.0))
    b = quat.from_euler_zyx(np.array(0.0), np.array(0.0), np.array(np.pi / 2))
    mid = quat.slerp(a, b, np.array(0.5))
    np.testing.assert_allclose(mid, [np.cos(np.pi / 8), 0, 0, np.sin(np.pi / 8)], atol=1e-12)


def test_velocities_follow_the_frame_rate(twisting: Motion) -> None:
    inner = slice(2, -2)
    t = twisting.times
    np.testing.assert_allclose(twisting.root_lin_vel_w[inner, 0], 0.5, atol=1e-9)
    # world angular velocity of Rz(t) Ry(.) Rx(.) has z component close to 1 rad/s; the x/y part is what the
    # roll/pitch terms add: check against a fine finite difference of the same rotation instead
    fine = 1e-5
    q0 = quat.from_euler_zyx(0.2 * np.sin(2 * (t - fine)), 0.1 * np.cos(t - fine), t - fine)
    q1 = quat.from_euler_zyx(0.2 * np.sin(2 * (t + fine)), 0.1 * np.cos(t + fine), t + fine)
    exact = quat.log(quat.multiply(q1, quat.conjugate(q0))) / (2 * fine)
    np.testing.assert_allclose(twisting.root_ang_vel_w[inner], exact[inner], atol=5e-3)
    assert twisting.joint_vel.shape == (61, 29) and twisting.body_ang_vel_w.shape == (61, 30, 3)


def test_clip_window(twisting: Motion) -> None:
    w = clip(twisting, 0.5, 1.0)
    assert w.num_frames == 16 and w.duration == pytest.approx(0.5)
    np.testing.assert_array_equal(w.root_pos_w, twisting.root_pos_w[15:31])
    with pytest.raises(ValueError):
        clip(twisting, 5.0, 6.0)


def test_window_cuts_frames_and_keeps_world_positions_and_velocities(twisting: Motion) -> None:
    w = window(twisting, 0.5, 1.0)
    assert w.num_frames == 16 and w.duration == pytest.approx(0.5) and w.completed
    np.testing.assert_array_equal(w.qpos(), twisting.qpos()[15:31])  # not re-based
    # velocities are the clip's own there (central differences), not one-sided ones at the cut
    np.testing.assert_array_equal(w.root_lin_vel_w, twisting.root_lin_vel_w[15:31])
    np.testing.assert_array_equal(w.body_pos_w, twisting.body_pos_w[15:31])
    np.testing.assert_array_equal(w.foot_contact, twisting.foot_contact[15:31])
    assert window(twisting) is twisting and window(twisting, 1.5).num_frames == 16
    assert "[0.5-1 s]" in w.source


@pytest.mark.parametrize(
    "start, end, words",
    [
        (-0.1, None, "start must be >= 0"),
        (1.0, 1.0, "after start"),
        (1.0, 0.5, "after start"),
        (0.0, 2.5, "outside the clip"),
        (3.0, None, "outside the clip"),
        (1.0, 1.01, "needs two"),
    ],
)
def test_bad_windows_are_one_line_errors(twisting: Motion, start, end, words) -> None:
    with pytest.raises(ValueError, match=words) as info:
        window(twisting, start, end)
    assert "\n" not in str(info.value)
    if words == "outside the clip":
        assert "2.000 s" in str(info.value)  # names the clip's duration


def test_hold_error_is_the_mean_body_distance_from_the_first_frame(twisting: Motion) -> None:
    still = complete(
        Motion(
            "still",
            30.0,
            np.tile(twisting.root_pos_w[:1], (31, 1)),
            np.tile(twisting.root_quat_w[:1], (31, 1)),
            np.tile(twisting.joint_pos[:1], (31, 1)),
        )
    )
    assert hold_error(still) == 0.0
    shifted = still.primary()
    shifted.root_pos_w = shifted.root_pos_w + np.array([0.3, 0.4, 0.0]) * (np.arange(31) >= 1)[:, None]
    assert hold_error(shifted) == pytest.approx(0.5 * 30 / 31)  # every body 0.5 m away in 30 of 31 frames


def test_ground_alignment_puts_the_contact_soles_at_zero() -> None:
    from bcg_sim.motion import load

    run = load("run")
    lifted = run.primary()
    lifted.root_pos_w = lifted.root_pos_w + [0.0, 0.0, 0.123]
    lifted = complete(lifted)
    assert ground_offset(lifted) == pytest.approx(0.123, abs=1e-9)
    aligned = align_ground(lifted)
    np.testing.assert_allclose(aligned.root_pos_w, run.root_pos_w, atol=1e-9)
    assert kinematics.foot_heights(aligned)[aligned.foot_contact].min() == pytest.approx(0.0, abs=1e-9)


def test_29_23_dof_mapping() -> None:
    q29 = np.arange(29, dtype=float)[None].repeat(3, 0)
    q23 = to_23dof(q29)
    dropped = sorted(set(range(29)) - set(q23[0].astype(int)))
    assert q23.shape == (3, 23) and dropped == [13, 14, 20, 21, 27, 28]
    back = from_23dof(q23)
    np.testing.assert_array_equal(back[:, dropped], 0.0)
    np.testing.assert_array_equal(to_23dof(back), q23)


def test_ground_alignment_is_robust_to_noise_in_a_long_clip() -> None:
    """A long clip with smooth vertical noise (a few frames dip ~3 sigma low): align_ground must not lift it
    by the deepest dip (as a minimum-over-contacts rule would) and must keep its stance frames in contact."""
    from bcg_sim.motion import load

    dance = load("dance")  # dances in place, 85 % of the frames in contact
    reps = 8
    long = dance.primary()
    long.root_pos_w = np.tile(dance.root_pos_w, (reps, 1))
    long.root_quat_w = np.tile(dance.root_quat_w, (reps, 1))
    long.joint_pos = np.tile(dance.joint_pos, (reps, 1))
    clean = complete(long)
    rng = np.random.default_rng(3)
    window = int(0.5 * clean.fps)  # smooth noise: slow enough to keep stance feet below the contact speed
    noise = np.convolve(rng.normal(size=clean.num_frames + window), np.ones(window) / window, "valid")
    noise = 0.008 * (noise - noise.mean()) / noise.std()
    noisy = clean.primary()
    noisy.root_pos_w = noisy.root_pos_w + np.outer(noise[: clean.num_frames], [0.0, 0.0, 1.0])
    noisy = complete(noisy)
    soles = kinematics.foot_heights(noisy)[noisy.foot_contact]
    assert soles.min() < -0.015  # the clip does dip: a minimum-over-contacts rule would lift it by > 15 mm
    aligned = align_ground(noisy)
    lift = float(aligned.root_pos_w[0, 2] - noisy.root_pos_w[0, 2])
    assert abs(lift) < 0.003, f"lifted by {lift * 1e3:.1f} mm"
    assert aligned.foot_contact.mean() > 0.9 * clean.foot_contact.mean(), (
        aligned.foot_contact.mean(),
        clean.foot_contact.mean(),
    )
