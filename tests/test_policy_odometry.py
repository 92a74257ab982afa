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
    np.testing.assert_allclose(runner.odometry.position_w[:2], start_xy, atol=1e-9)  # it has not moved yet
    assert PolicyRunner(load_policy(REPO / "policies" / "run")).odometry is None  # trained without it
