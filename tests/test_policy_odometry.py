"""Leg odometry (bcg_sim.policy.odometry): the pelvis position a robot can know from its encoders and IMU, which
policies that observe their offset from the clip (ref_root_offset_xy) get from the node's PolicyRunner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bcg_sim.motion
from bcg_sim.policy import load_policy
from bcg_sim.policy.odometry import LegOdometry, clip_error

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


def test_clip_error_is_zero_on_planted_soles_and_the_slide_on_a_clip_that_skates():
    m = bcg_sim.motion.load("dance", fps=50)
    assert clip_error(m.joint_pos, m.root_quat_w, m.root_pos_w).max() < 0.01
    # the same frames dragged sideways at 0.2 m/s, soles and all: the joints say nothing of it
    skate = m.root_pos_w.copy()
    skate[:, 1] += 0.2 * m.times
    err = clip_error(m.joint_pos, m.root_quat_w, skate)
    np.testing.assert_allclose(err, 0.2 * m.times, atol=0.01)


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


def test_a_trained_policy_that_observes_its_offset_gets_the_estimate_from_the_runner(tmp_path, capsys):
    """bcg-train with task.observe_root_offset exports a contract with ref_root_offset_xy; the node's PolicyRunner
    then runs leg odometry on the measured state (the MuJoCo start here) and builds the observation with it,
    and a policy without the feature runs no odometry."""
    import yaml

    from bcg_policy_node.policy_runner import PolicyRunner
    from bcg_train.cli import main
    from bcg_train.eval.config import EvalConfig
    from bcg_train.eval.mujoco_eval import MujocoEvaluator, load_eval_model

    preset = tmp_path / "tiny_offset.yaml"
    tiny = yaml.safe_load((REPO / "config" / "train" / "tiny.yaml").read_text())
    tiny["task"]["observe_root_offset"] = True
    preset.write_text(yaml.safe_dump(tiny))
    args = ["--preset", preset, "--algo", "shac", "--motion", "dance", "--budget", "2it", "--out", tmp_path / "run"]
    assert main([str(a) for a in args]) == 0, capsys.readouterr().err[-2000:]
    policy = load_policy(tmp_path / "run" / "policy")
    assert [s.name for s in policy.contract.observation.layout][-1] == "ref_root_offset_xy"
    ev = MujocoEvaluator(policy, EvalConfig(), load_eval_model(None), 0.1)
    runner = PolicyRunner(policy)
    state = ev._measure(np.random.default_rng(0))
    runner.start(state)
    target = runner.step(state)
    assert target.shape == (29,) and np.isfinite(target).all()
    start_xy = policy.reference.sample(np.array([0.0]))["root_pos_w"][0, :2]
    np.testing.assert_allclose(runner.odometry.position_w[0, :2], start_xy, atol=1e-9)  # it has not moved yet
    assert PolicyRunner(load_policy(REPO / "policies" / "run")).odometry is None  # trained without it


def test_batch_window_is_each_tracks_own_window():
    """N copies of one clip, each aligned to a different heading and start, sampled at once: row i is copy i's
    own window bit for bit (one aligned the identity way too); copies of two different clips are refused."""
    import copy

    from bcg_sim.policy.reference import batch_window
    from bcg_sim.quat import from_yaw

    clip = load_policy(REPO / "policies" / "dance").reference
    tracks = [copy.copy(clip) for _ in range(3)]
    tracks[1].align_yaw(from_yaw(0.7), 1.3)
    tracks[2].align_yaw(from_yaw(-2.1), 0.0)
    t = np.array([0.0, 1.3, clip.duration - 0.05])  # the last one reaches past the clip's end
    win = batch_window(tracks, t, 5, 0.02)
    for i, tr in enumerate(tracks):
        own = tr.window(float(t[i]), 5, 0.02)
        for got, want in zip(win, own):
            np.testing.assert_array_equal(got[i], want)
    other = load_policy(REPO / "policies" / "run").reference
    with pytest.raises(ValueError, match="copies of one clip"):
        batch_window([tracks[0], other], t[:2], 5, 0.02)


def test_batch_runner_is_n_single_runners_and_faults_one_world():
    """BatchPolicyRunner steps three MuJoCo-measured robots (different start noise, clip times and headings) in
    one call, with leg odometry: its targets are, step by step, those of three single PolicyRunners. A world whose
    joint velocities turn NaN faults alone, naming the feature; its time stays, the others go on."""
    import copy

    from bcg_policy_node.policy_runner import BatchPolicyRunner, PolicyFault, PolicyRunner
    from bcg_sim.policy import RobotState
    from bcg_train.eval.config import EvalConfig
    from bcg_train.eval.mujoco_eval import MujocoEvaluator, load_eval_model

    policy = load_policy(REPO / "policies" / "dance")
    assert "ref_root_offset_xy" in policy.contract.slices()  # odometry is part of what is compared
    ev = MujocoEvaluator(policy, EvalConfig(), load_eval_model(None), 0.1)
    rng = np.random.default_rng(3)
    states = [ev._measure(rng) for _ in range(3)]
    t0 = [0.0, 0.8, 2.4]
    singles = [PolicyRunner(policy, copy.copy(policy.reference)) for _ in states]
    batch = BatchPolicyRunner(policy, [copy.copy(policy.reference) for _ in states])
    as_batch = lambda ss: RobotState(*(np.stack([getattr(s, k) for s in ss]) for k in RobotState._fields[:4]))  # noqa: E731
    for r, s, t in zip(singles, states, t0):
        r.start(s, t)
    batch.start(as_batch(states), t0)
    for k in range(4):  # the robots move a little between steps (their joints follow earlier targets)
        want = np.stack([r.step(s) for r, s in zip(singles, states)])
        got, causes = batch.step(as_batch(states))
        assert causes == [None, None, None]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        states = [s._replace(joint_pos=0.9 * s.joint_pos + 0.1 * w) for s, w in zip(states, want)]
    np.testing.assert_allclose(batch.times, [r.t for r in singles])
    bad = states[1]._replace(joint_vel=np.full(29, np.nan))
    with pytest.raises(PolicyFault, match="joint_vel"):
        singles[1].step(bad)
    want = [singles[0].step(states[0]), singles[2].step(states[2])]
    got, causes = batch.step(as_batch([states[0], bad, states[2]]))
    assert causes[0] is None and causes[2] is None and "joint_vel" in causes[1]
    assert np.isnan(got[1]).all()
    np.testing.assert_allclose(got[[0, 2]], want, rtol=0, atol=1e-6)
    np.testing.assert_allclose(batch.times, [r.t for r in singles])  # the faulted world's time stayed


def test_eval_runner_bench_runs_both_sides():
    """bench/eval_runner.py times N single runners against one batch runner and checks they agree; a tiny run
    prints one row per world count, and a bad count is one line and exit 2."""
    import subprocess
    import sys

    script = REPO / "bench" / "eval_runner.py"
    args = [sys.executable, str(script), "--steps", "3", "--rounds", "1", "--worlds", "2"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    row = r.stdout.splitlines()[-1].split()
    assert row[0] == "2" and row[-1].endswith("x") and float(row[1]) > 0 and float(row[2]) > 0, r.stdout
    bad = subprocess.run([*args[:-1], "0"], capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
