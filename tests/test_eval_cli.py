"""bcg-eval end to end on exported artifacts (MuJoCo + bcg_sim), a forced fall, and bad inputs (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from bcg_sim.policy import default_contract, export_policy
from bcg_sim.policy.cli import export_hold, hold_module
from bcg_train.eval.cli import main


@pytest.fixture(scope="module")
def hold(tmp_path_factory) -> Path:
    return Path(export_hold(str(tmp_path_factory.mktemp("eval") / "hold"), ("onnx",)))


def _one_error_line(capsys, code: int, *needles: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("bcg-eval: ") and "Traceback" not in err[0], err
    for n in needles:
        assert n in err[0], err[0]
    return err[0]


def test_hold_policy_end_to_end(hold, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(hold), "--runs", "2", "--seconds", "0.6", "--out", str(out), "--kappa", "100"]) == 0
    r = json.loads((out / "eval.json").read_text())
    a = r["aggregate"]
    assert a["runs"] == 2 and a["falls"] == 0 and a["survival_s_mean"] == pytest.approx(0.6)
    assert 0 < a["e_track_cm_mean"] < 10 and a["e_track_cm_std"] > 0  # seeds vary the start
    assert r["contacts"]["ok"] and r["contacts"]["max_contacts"] >= 8  # both soles' 4 spheres down
    d = r["delta_d"]
    assert d["kappa"] == 100 and d["window_s"] == pytest.approx(0.6)
    assert d["train_pen_mm"] > 0 and d["mujoco_pen_mm"] > 0
    assert d["delta_d_mm"] == pytest.approx(d["train_pen_mm"] - d["mujoco_pen_mm"])
    assert d["train_falls"] == 0 and d["train_survival_s_mean"] == pytest.approx(0.6)  # upright in bcg_sim too
    assert d["bcg"] is False and 0 < d["train_e_track_cm"] < 10
    for f in ("eval.md", "strip.png", "e_track.png", "joint_err.png", "root_height.png", "penetration.png", "slip.png"):
        assert (out / f).stat().st_size > 0, f
    assert "| 0/2 | 0/2 |" in (out / "eval.md").read_text()  # falls in MuJoCo, falls in bcg_sim


def test_a_fall_in_the_training_simulator_only_is_told_apart(hold, tmp_path, capsys):
    """bcg-eval rolls the same starts out in bcg_sim for the whole evaluation: on a floor of 1 N/m per sphere
    there the held pose sinks below the fall height, while MuJoCo's floor carries it (0 falls)."""
    out = tmp_path / "out"
    assert (
        main([str(hold), "--runs", "2", "--seconds", "1.5", "--out", str(out), "--kappa", "0.001", "--no-render"]) == 0
    )
    r = json.loads((out / "eval.json").read_text())
    d = r["delta_d"]
    assert r["aggregate"]["falls"] == 0 and d["train_falls"] == 2
    assert d["train_seconds"] == pytest.approx(1.5) and d["train_survival_s_mean"] < 1.5
    assert all(p["train_fell"] and p["train_survival_s"] < 1.5 for p in d["per_run"])
    assert "| 0/2 | 2/2 |" in (out / "eval.md").read_text()


def test_zero_gain_policy_falls(tmp_path, capsys):
    c = default_contract(reference_name="stand", gains="stand")
    c.kp, c.kd = [0.0] * 29, [0.0] * 29  # motors limp: the robot drops
    pol = export_policy(hold_module(c.n_obs), c, tmp_path / "limp", ("onnx",))
    out = tmp_path / "out"
    assert main([str(pol), "--runs", "1", "--seconds", "3", "--out", str(out), "--no-render", "--no-delta-d"]) == 0
    run = json.loads((out / "eval.json").read_text())["runs"][0]
    assert run["fell"] and run["survival_s"] < 3.0


def test_missing_metadata(tmp_path, capsys):
    (tmp_path / "p").mkdir()
    _one_error_line(capsys, main([str(tmp_path / "p"), "--out", str(tmp_path / "o")]), "policy.yaml")


def test_policy_joint_order_differs(hold, tmp_path, capsys):
    bad = tmp_path / "swapped"
    bad.mkdir()
    for f in hold.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    meta = yaml.safe_load((bad / "policy.yaml").read_text())
    meta["joint_names"][0], meta["joint_names"][1] = meta["joint_names"][1], meta["joint_names"][0]
    (bad / "policy.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    _one_error_line(capsys, main([str(bad), "--out", str(tmp_path / "o")]), "joint order", "index 0")


def test_mjcf_without_g1_joints(hold, tmp_path, capsys):
    xml = tmp_path / "box.xml"
    xml.write_text("<mujoco><worldbody><body><freejoint/><geom size='0.1'/></body></worldbody></mujoco>")
    _one_error_line(
        capsys, main([str(hold), "--mjcf", str(xml), "--out", str(tmp_path / "o")]), "box.xml", "missing joint"
    )


def test_bad_option_values(hold, tmp_path, capsys):
    _one_error_line(capsys, main([str(hold), "--runs", "0", "--out", str(tmp_path / "o")]), "runs")
    _one_error_line(capsys, main([str(tmp_path / "nope"), "--out", str(tmp_path / "o")]), "does not exist")
    _one_error_line(capsys, main([str(hold), "--bcg", "--no-delta-d", "--out", str(tmp_path / "o")]), "--bcg")


def test_menagerie_mjcf_runs(hold, tmp_path, menagerie_g1_xml, capsys):
    """Any G1 MJCF: the Menagerie G1 (position servos turned into torque motors, floor added) stands too."""
    out = tmp_path / "m"
    assert (
        main(
            [
                str(hold),
                "--mjcf",
                str(menagerie_g1_xml),
                "--runs",
                "1",
                "--seconds",
                "0.6",
                "--out",
                str(out),
                "--no-render",
                "--no-delta-d",
            ]
        )
        == 0
    )
    r = json.loads((out / "eval.json").read_text())
    assert r["aggregate"]["falls"] == 0 and r["contacts"]["ok"]
    assert np.isfinite(r["aggregate"]["e_track_cm_mean"])


class _Constant(torch.nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs[:, :1] * 0.0 + 0.5 * torch.ones(1, 29, dtype=obs.dtype)


class _Feedback(torch.nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return -0.5 * obs[:, :29]  # joint_pos_rel: the action depends on the (noisy) encoders


def test_action_latency_and_seeded_noise(tmp_path):
    """Latency L: the motors keep the start pose until L, then follow; noise: same seed same run, others differ."""
    import dataclasses

    from bcg_sim.policy import load_policy
    from bcg_train.eval.config import load_eval_config
    from bcg_train.eval.mujoco_eval import MujocoEvaluator, load_eval_model

    c = default_contract(reference_name="stand", gains="stand")
    pol = load_policy(export_policy(_Constant(), c, tmp_path / "const", ("onnx",)))
    base = dataclasses.replace(load_eval_config(), init_joint_noise=0.0, init_root_vel_noise=0.0)
    model = load_eval_model(None)

    def joints(cfg, seed=0):
        r = MujocoEvaluator(pol, cfg, model, 0.2).run(seed).rollout
        return r.time, r.qpos[:, 7:]

    t, q0 = joints(base)
    _, q_late = joints(dataclasses.replace(base, action_latency_s=0.1))
    before, after = (t > 0.02) & (t < 0.1 - 1e-9), t > 0.16
    moved = np.abs(q0 - q0[0]).max(axis=1)
    moved_late = np.abs(q_late - q_late[0]).max(axis=1)
    assert moved[before].min() > 0.02  # no latency: the joints head for the new targets at once
    assert moved_late[before].max() < 0.2 * moved[before].min()  # latency: still (nearly) at the start pose
    assert moved_late[after].min() > 0.02  # then they follow
    pol = load_policy(export_policy(_Feedback(), c, tmp_path / "feedback", ("onnx",)))
    noisy = dataclasses.replace(base, noise_q_std=0.01, noise_gyro_std=0.01)
    _, a = joints(noisy, 3)
    _, b = joints(noisy, 3)
    _, other = joints(noisy, 4)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - other).max() > 1e-4


def test_playback_policy_targets_are_the_next_reference_frame(tmp_path):
    from bcg_policy_node.policy_runner import PolicyRunner
    from bcg_sim.policy import RobotState, load_policy
    from bcg_train.eval.playback import export_playback

    pol = load_policy(export_playback("dance", tmp_path / "pb"))
    runner = PolicyRunner(pol)
    s0 = pol.reference.sample(np.array([0.0]))
    state = RobotState(s0["joint_pos"][0], np.zeros(29), s0["root_quat_w"][0], np.zeros(3))
    runner.start(state)
    lo, hi = pol.contract.target_range()
    for k in range(5):
        target = runner.step(state)
        expected = np.clip(pol.reference.sample(np.array([(k + 1) * pol.contract.control_dt]))["joint_pos"][0], lo, hi)
        np.testing.assert_allclose(target, expected, atol=1e-5)


def test_contact_check_counts_a_foot_without_mujoco_contact(hold, tmp_path):
    """The check can fail: with the soles' collision switched off in the MJCF the feet sink through the floor and
    every such control step counts; the same run with collision on counts none."""
    import mujoco

    from bcg_sim.g1 import FOOT_BODIES
    from bcg_sim.policy import load_policy
    from bcg_train.eval.config import load_eval_config
    from bcg_train.eval.mujoco_eval import MujocoEvaluator, load_eval_model

    pol, cfg = load_policy(hold), load_eval_config()
    model = load_eval_model(None)
    assert MujocoEvaluator(pol, cfg, model, 0.4).run(0).missed_contacts == 0
    feet = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f) for f in FOOT_BODIES]
    for g in range(model.ngeom):
        if model.geom_bodyid[g] in feet:
            model.geom_contype[g] = model.geom_conaffinity[g] = 0
    assert MujocoEvaluator(pol, cfg, model, 0.4).run(0).missed_contacts > 5


def test_delta_d_defaults_to_the_policy_training_kappa(tmp_path, capsys):
    """Without --kappa, delta_d uses the stiffness the policy was trained at (policy.yaml train_kappa), else
    config/sim.yaml's; a train_kappa that is not a stiffness is one line naming the file."""
    from bcg_sim.diffsim import load_sim_config

    c = default_contract(reference_name="stand", gains="policy")
    untrained = export_policy(hold_module(c.n_obs), c, tmp_path / "untrained", ("onnx",))
    c.train_kappa = 50.0
    trained = export_policy(hold_module(c.n_obs), c, tmp_path / "trained", ("onnx",))
    for pol, kappa in ((trained, 50.0), (untrained, load_sim_config().contact.kappa)):
        out = tmp_path / f"out_{pol.name}"
        assert main([str(pol), "--runs", "1", "--seconds", "0.1", "--out", str(out), "--no-render"]) == 0
        assert json.loads((out / "eval.json").read_text())["delta_d"]["kappa"] == kappa
    meta = yaml.safe_load((trained / "policy.yaml").read_text())
    meta["train_kappa"] = -1.0
    (trained / "policy.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    capsys.readouterr()
    _one_error_line(capsys, main([str(trained), "--out", str(tmp_path / "o")]), "policy.yaml", "train_kappa")
