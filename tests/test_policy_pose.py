"""A pose source for the observed offset (bcg_sim.policy.pose): leg odometry corrected by late, slow poses of a
sensor that does not rest on the soles (lidar odometry), as the contract's observation.root_source "pose" asks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bcg_sim.motion
from bcg_sim.policy import load_policy
from bcg_sim.policy.odometry import LegOdometry
from bcg_sim.policy.pose import PoseFusion, SimulatedPoseSource
from bcg_sim.quat import yaw

REPO = Path(__file__).resolve().parents[1]


def test_fusion_follows_a_robot_whose_soles_slide_in_the_pose_sources_own_frame():
    """The built-in dance's frames dragged sideways at 0.2 m/s after half a second, soles and all: leg odometry
    alone ends the drag off (metres). Fed poses every 0.1 s, 0.06 s old, in a frame turned by 90 degrees and
    shifted (tied to odometry's at the first pose, while the robot still stands), the fused estimate stays within
    what the soles slide between a pose's measurement and the step (8 steps: 3.2 cm)."""
    m = bcg_sim.motion.load("dance", fps=50)
    true = m.root_pos_w[:, :2].copy()
    true[:, 1] += 0.2 * np.maximum(m.times - 0.5, 0.0)
    c, s = np.cos(np.pi / 2), np.sin(np.pi / 2)
    to_map = np.array([[c, -s], [s, c]])  # the pose source's frame: turned and shifted from the world's
    source = SimulatedPoseSource(0.02, 0.1, 0.06, 0.0, np.random.default_rng(0))
    odo, fused = LegOdometry(), PoseFusion(0.02)
    for est in (odo, fused):
        est.reset(m.joint_pos[0], m.root_quat_w[0], true[0])
    err_odo, err_fused = [], []
    for k in range(1, len(m.times)):
        pose = source.step(true[k] @ to_map.T + [1.0, -2.0], yaw(m.root_quat_w[k]) + np.pi / 2)
        if pose is not None:
            fused.correct(*pose)
        err_odo.append(np.linalg.norm(odo.update(m.joint_pos[k], m.root_quat_w[k])[:2] - true[k]))
        err_fused.append(np.linalg.norm(fused.update(m.joint_pos[k], m.root_quat_w[k])[:2] - true[k]))
    assert m.duration > 5.0 and err_odo[-1] > 1.0, (m.duration, err_odo[-1])
    assert max(err_fused) < 0.2 * 8 * 0.02 + 0.005, max(err_fused)


def test_simulated_source_reports_the_truth_latency_old_every_period():
    src = SimulatedPoseSource(0.02, 0.1, 0.06, 0.0, np.random.default_rng(0))
    out = [src.step(np.array([k * 1.0, 0.0]), np.array(0.0)) for k in range(20)]
    due = [k for k, p in enumerate(out) if p is not None]
    assert due == [5, 10, 15]  # every 5 steps once 3 steps of history exist
    for k in due:
        xy, _, age = out[k]
        assert xy[0] == pytest.approx(k - 3) and age == pytest.approx(0.06)
    # the drift walks with the path: 400 worlds 0.02 m a step for 50 m end 0.05 * sqrt(50) m off per axis (std),
    # 400 standing ones not at all
    walk = SimulatedPoseSource(0.02, 0.02, 0.0, 0.0, np.random.default_rng(1), drift=0.05)
    stand = SimulatedPoseSource(0.02, 0.02, 0.0, 0.0, np.random.default_rng(1), drift=0.05)
    for k in range(2501):
        moved = walk.step(np.full((400, 2), 0.02 * k / np.sqrt(2)), np.zeros(400))
        still = stand.step(np.zeros((400, 2)), np.zeros(400))
    err = moved[0] - 0.02 * 2500 / np.sqrt(2)
    assert err.std() == pytest.approx(0.05 * np.sqrt(50), rel=0.1), err.std()
    assert np.abs(still[0]).max() == 0.0
    with pytest.raises(ValueError, match="period_s"):
        SimulatedPoseSource(0.02, 0.0, 0.06, 0.0, np.random.default_rng(0))


def test_runner_with_a_pose_source_runs_in_mujoco_and_faults_when_it_goes_silent():
    """The committed dance policy observes its offset; with root_source "pose" bcg-eval's MuJoCo loop feeds it the
    simulated pose source and it dances 2 s; the node's runner without poses faults once pose_timeout_s passes."""
    from bcg_policy_node.policy_runner import PolicyFault, PolicyRunner
    from bcg_train.eval.config import EvalConfig
    from bcg_train.eval.mujoco_eval import MujocoEvaluator, load_eval_model

    policy = load_policy(REPO / "policies" / "dance")
    cfg = EvalConfig(root_source="pose").validate()
    run = MujocoEvaluator(policy, cfg, load_eval_model(None), 2.0).run(0)
    assert run.fault == "" and run.rollout.time[-1] == pytest.approx(2.0)
    assert run.rollout.qpos[:, 2].min() > 0.5

    ev = MujocoEvaluator(policy, cfg, load_eval_model(None), 0.1)
    state = ev._measure(np.random.default_rng(0))
    runner = PolicyRunner(policy, pose_timeout_s=0.3, root_source="pose")
    runner.start(state)
    for _ in range(16):  # states measured 0 ... 0.3 s after the start without a pose: still trusted
        runner.step(state)
    with pytest.raises(PolicyFault, match="pose source silent for 0.32 s"):
        runner.step(state)
    runner.start(state)  # with a pose every 5 steps it goes on
    for k in range(40):
        if k % 5 == 0:
            runner.observe_pose(np.zeros(2), 0.0, 0.06)
        runner.step(state)
    with pytest.raises(RuntimeError, match="does not read a pose source"):
        PolicyRunner(policy).observe_pose(np.zeros(2), 0.0, 0.0)


def test_root_source_is_checked_in_the_contract_the_train_config_and_bcg_eval(tmp_path, capsys):
    from bcg_sim.config import ConfigError
    from bcg_sim.policy import PolicyContractError, default_contract
    from bcg_train.config import load_train_config
    from bcg_train.eval.cli import main as eval_main

    c = default_contract(root_source="pose")
    assert c.observation.root_source == "pose"
    c.observation.root_source = "gps"
    with pytest.raises(PolicyContractError, match="root_source must be one of"):
        c.validate()
    assert load_train_config("lafan_fight1").task.root_source == "pose"
    with pytest.raises(ConfigError, match="root_estimate random_walk"):
        load_train_config("lafan_fight1", {"task": {"root_estimate": "odometry"}})
    # an artifact that reads a pose source says so (the committed dance, its contract switched to it)
    import shutil

    import yaml

    from bcg_sim.policy.cli import main as policy_main

    shutil.copytree(REPO / "policies" / "dance", tmp_path / "pose")
    meta = yaml.safe_load((tmp_path / "pose" / "policy.yaml").read_text())
    meta["observation"]["root_source"] = "pose"
    (tmp_path / "pose" / "policy.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    assert load_policy(tmp_path / "pose").contract.observation.root_source == "pose"
    capsys.readouterr()
    assert policy_main(["info", str(tmp_path / "pose")]) == 0
    assert "ref_root_offset_xy (pelvis from a pose source, /odometry)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        eval_main([str(REPO / "policies" / "dance"), "--root-source", "gps", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "invalid choice: 'gps'" in capsys.readouterr().err
