"""Leg odometry (bcg_sim.policy.odometry): the pelvis position a robot can know from its encoders and IMU, which
policies that observe their offset from the clip (ref_root_offset_xy) get from the node's PolicyRunner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bcg_sim.motion
from bcg_sim.policy import load_policy
from bcg_sim.policy.odometry import LegOdometry

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("clip", ["dance", "fight"])
def test_odometry_follows_a_clip_whose_feet_do_not_slip(clip):
    """Fed a built-in clip's joint angles and pelvis orientation only, the estimate walks the clip's pelvis path
    (over a metre of it, stepping and turning) to within a centimetre: the soles that carry the weight stay put."""
    m = bcg_sim.motion.load(clip, fps=50)
    odo = LegOdometry()
    odo.reset(m.joint_pos[0], m.root_quat_w[0], m.root_pos_w[0, :2])
    est = np.array([odo.update(q, r) for q, r in zip(m.joint_pos[1:], m.root_quat_w[1:])])
    path = np.linalg.norm(np.diff(m.root_pos_w[:, :2], axis=0), axis=1).sum()
    err = np.linalg.norm(est[:, :2] - m.root_pos_w[1:, :2], axis=1)
    assert path > 1.0
    assert err.max() < 0.01, err.max()
    np.testing.assert_allclose(est[:, 2], m.root_pos_w[1:, 2], atol=0.01)  # height above the lowest sole


def test_odometry_in_mujoco_from_measured_joints_only():
    """A trained policy dances in MuJoCo; an estimate from the measured joint angles and IMU orientation follows
    the simulated pelvis along its path (75 cm in 4 s) to within a small share of it."""
    from bcg_train.eval.config import EvalConfig
    from bcg_train.eval.mujoco_eval import MujocoEvaluator, load_eval_model

    policy = load_policy(REPO / "policies" / "dance")
    track = []

    class Recording(MujocoEvaluator):
        def _measure(self, rng):
            s = super()._measure(rng)
            true = self.sim.data.qpos[:3].copy()
            if not track:
                odo.reset(s.joint_pos, s.base_quat_w, true[:2])
                track.append((true, odo.position_w.copy()))
            else:
                track.append((true, odo.update(s.joint_pos, s.base_quat_w)))
            return s

    odo = LegOdometry()
    run = Recording(policy, EvalConfig(), load_eval_model(None), 4.0).run(0)
    assert run.rollout.time[-1] == pytest.approx(4.0)
    true, est = (np.array(x) for x in zip(*track))
    path = np.linalg.norm(np.diff(true[:, :2], axis=0), axis=1).sum()
    err = np.linalg.norm(est[:, :2] - true[:, :2], axis=1)
    travel = np.linalg.norm(true[-1, :2] - true[0, :2])
    assert path > 0.5 and travel > 0.3, (path, travel)
    # its feet slip on MuJoCo's floor, which no leg odometry sees (9-12 cm here): a small share of the path
    assert err.max() < 0.2 * path, (err.max(), path)
    assert np.linalg.norm(est[-1, :2] - est[0, :2]) == pytest.approx(travel, abs=0.2 * path)


@pytest.mark.parametrize("path,feature", [("clip", "ref_root_offset_xy"), ("odometry", "ref_odom_offset_xy")])
def test_a_trained_policy_that_observes_its_offset_gets_the_estimate_from_the_runner(tmp_path, capsys, path, feature):
    """bcg-train with task.observe_root_offset exports a contract with ref_root_offset_xy (ref_odom_offset_xy with
    task.root_offset_path odometry); the node's PolicyRunner then runs leg odometry on the measured state (the
    MuJoCo start here) and builds the observation with it, and a policy without the feature runs no odometry."""
    import yaml

    from bcg_policy_node.policy_runner import PolicyRunner
    from bcg_train.cli import main
    from bcg_train.eval.config import EvalConfig
    from bcg_train.eval.mujoco_eval import MujocoEvaluator, load_eval_model

    preset = tmp_path / "tiny_offset.yaml"
    tiny = yaml.safe_load((REPO / "config" / "train" / "tiny.yaml").read_text())
    tiny["task"]["observe_root_offset"] = True
    tiny["task"]["root_offset_path"] = path
    preset.write_text(yaml.safe_dump(tiny))
    args = ["--preset", preset, "--algo", "shac", "--motion", "dance", "--budget", "2it", "--out", tmp_path / "run"]
    assert main([str(a) for a in args]) == 0, capsys.readouterr().err[-2000:]
    policy = load_policy(tmp_path / "run" / "policy")
    assert [s.name for s in policy.contract.observation.layout][-1] == feature
    ev = MujocoEvaluator(policy, EvalConfig(), load_eval_model(None), 0.1)
    runner = PolicyRunner(policy)
    state = ev._measure(np.random.default_rng(0))
    runner.start(state)
    target = runner.step(state)
    assert target.shape == (29,) and np.isfinite(target).all()
    start_xy = policy.reference.sample(np.array([0.0]))["root_pos_w"][0, :2]
    np.testing.assert_allclose(runner.odometry.position_w[:2], start_xy, atol=1e-9)  # it has not moved yet
    assert PolicyRunner(load_policy(REPO / "policies" / "run")).odometry is None  # trained without it


def _sliding_dance(slide_m: float):
    """The built-in dance at 50 fps with its pelvis carried slide_m forward in x over the clip, joints and
    orientations unchanged: its soles slide, as a retargeted mocap clip's do."""
    m = bcg_sim.motion.load("dance", fps=50)
    ramp = np.linspace(0.0, slide_m, m.num_frames)
    return m.primary().__class__(m.name, m.fps, m.root_pos_w + ramp[:, None] * [1, 0, 0], m.root_quat_w, m.joint_pos)


def test_the_clips_odometry_gap_is_how_far_its_feet_slide():
    """clip_odometry_gap: zero along a clip whose soles stay put, minus the slide on one whose soles slide."""
    from bcg_sim.policy.odometry import clip_odometry_gap

    m = bcg_sim.motion.load("dance", fps=50)
    assert np.abs(clip_odometry_gap(m.root_pos_w, m.root_quat_w, m.joint_pos)).max() < 0.01
    s = _sliding_dance(0.4)
    gap = clip_odometry_gap(s.root_pos_w, s.root_quat_w, s.joint_pos)
    np.testing.assert_allclose(gap[:, 0], -np.linspace(0.0, 0.4, s.num_frames), atol=0.01)
    np.testing.assert_allclose(gap[:, 1], 0.0, atol=0.01)


def test_a_robot_doing_what_a_sliding_clip_does_sees_no_odometry_offset():
    """On a clip whose soles slide 40 cm, a robot moving its joints exactly as the clip (its leg odometry fed the
    clip's joints and orientations) sees ref_root_offset_xy grow to the slide, ref_odom_offset_xy stay at the
    clip's next-frame step; started mid-clip (align_yaw's t0, turned by the robot's heading) likewise."""
    from bcg_sim.policy import ReferenceTrack, RobotState, build_observation, default_contract
    from bcg_sim.policy.observation import STANDARD_LAYOUT
    from bcg_sim.quat import multiply

    s = _sliding_dance(0.4)
    c = default_contract(ref_horizon=1, layout=STANDARD_LAYOUT + ("ref_root_offset_xy", "ref_odom_offset_xy"))
    sl = c.slices()
    for t0, heading in ((0.0, 0.0), (3.0, 1.0)):
        track = ReferenceTrack.from_motion(s)
        f0 = round(t0 * s.fps)
        spin = np.array([np.cos(heading / 2), 0, 0, np.sin(heading / 2)])
        quat = np.array([multiply(spin, q) for q in s.root_quat_w])  # the robot: the clip turned to its heading
        track.align_yaw(quat[f0], t0)
        odo = LegOdometry()
        odo.reset(s.joint_pos[f0], quat[f0], track.sample(np.array([t0]))["root_pos_w"][0, :2])
        root, odom = [], []
        for f in range(f0 + 1, s.num_frames - 1):
            pos = odo.update(s.joint_pos[f], quat[f])
            state = RobotState(s.joint_pos[f], np.zeros(29), quat[f], np.zeros(3), pos)
            win = track.window(f / s.fps, 1, 1 / s.fps, odometry=True)
            obs = build_observation(state, win, np.zeros(29), 0.0, c)
            root.append(np.linalg.norm(obs[sl["ref_root_offset_xy"]]))
            odom.append(np.linalg.norm(obs[sl["ref_odom_offset_xy"]]))
        slide = 0.4 * (s.num_frames - 2 - f0) / (s.num_frames - 1)
        assert root[-1] == pytest.approx(slide, abs=0.03), (t0, root[-1])
        assert max(odom) < 0.03, (t0, max(odom))  # a frame's step of the clip (up to ~2 cm) and LegOdometry's 1 cm
