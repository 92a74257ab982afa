"""The fixed-protocol evaluation during training (bcg_train.eval.diffsim_eval.window_tracking): exported
policies through the node's PolicyRunner in bcg_sim, one world per start time, no early termination."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch  # noqa: F401 - a hard dependency: a broken install fails, not skips

from bcg_sim.config import ConfigError
from bcg_sim.policy import default_contract, export_policy, load_policy
from bcg_sim.policy.cli import hold_module
from bcg_train.eval.config import load_eval_config
from bcg_train.eval.diffsim_eval import diffsim_rollouts, window_tracking
from bcg_train.eval.metrics import series


def _hold(tmp_path, reference: str, gains: str):
    """Zero actions (PD to the default pose) exported with the built-in clip `reference` at the control rate
    ("stand": the default pose itself)."""
    from bcg_sim.motion import load
    from bcg_sim.policy import ReferenceTrack

    c = default_contract(reference_name=reference, gains=gains)
    track = None if reference == "stand" else ReferenceTrack.from_motion(load(reference, fps=1.0 / c.control_dt))
    return load_policy(
        export_policy(hold_module(c.n_obs), c, tmp_path / f"{reference}-{gains}", ("onnx",), reference=track)
    )


def test_each_world_starts_in_the_reference_state_at_its_own_time(tmp_path):
    """The run clip moves 2 m/s: a reference aligned for another world's start would be metres off."""
    pol = _hold(tmp_path, "run", "policy")
    cfg = load_eval_config()
    starts = [0.0, 0.3, 2.5]
    runs = diffsim_rollouts(pol, cfg, [0, 1, 2], 0.1, 300.0, starts)
    for r in runs:
        s = series(r, pol.contract.control_dt, cfg.contact_height)
        assert s["e_track"][0] < 0.02, s["e_track"][0]  # start noise only (init_joint_noise 0.02 rad)
        np.testing.assert_allclose(r.ref_qpos[0, :2], 0.0, atol=1e-9)  # each clip placed at the origin
    # the starts are different poses of the clip
    assert np.abs(runs[0].ref_qpos[0, 7:] - runs[1].ref_qpos[0, 7:]).max() > 0.05


def test_a_fall_counts_and_keeps_scoring_over_the_window(tmp_path):
    """Zero actions with the motors' gains cannot hold the G1 (docs/sim.md); the bring-up gains can."""
    cfg = load_eval_config()
    limp = window_tracking(_hold(tmp_path, "stand", "policy"), cfg, [0.0, 0.5], 2.0, 300.0)
    held = window_tracking(_hold(tmp_path, "stand", "stand"), cfg, [0.0, 0.5], 2.0, 300.0)
    assert limp["worlds"] == held["worlds"] == 2
    assert limp["falls"] == 1.0 and limp["survival_s"] < 1.5
    assert held["falls"] == 0.0 and held["survival_s"] == pytest.approx(2.0)
    assert held["e_track_cm"] < 5.0 < 4 * held["e_track_cm"] < limp["e_track_cm"]


def test_eval_settings_are_validated():
    from bcg_train.config import load_train_config

    assert load_train_config(overrides={"eval": {"every": 0}}).eval.every == 0  # 0: never
    for key, value in (("every", -1), ("starts", 0), ("seconds", 0.0)):
        with pytest.raises(ConfigError, match=f"eval.{key}"):
            load_train_config(overrides={"eval": {key: value}})


def test_clip_tracking_runs_the_whole_clip_from_bcg_evals_noisy_starts(tmp_path):
    """The headline of the evaluation during training is bcg-eval's protocol: the whole clip from its first
    frame, run i from the start state of seed i (so runs differ), a fall scored to the end."""
    from bcg_train.eval.diffsim_eval import clip_tracking

    cfg = load_eval_config()
    pol = _hold(tmp_path, "jump", "policy")
    runs = diffsim_rollouts(pol, cfg, [0, 1], pol.reference.duration, 300.0, stop_at_falls=False)
    assert runs[0].time[-1] == pytest.approx(pol.reference.duration, abs=pol.contract.control_dt)
    assert np.abs(runs[0].qpos[0, 7:] - runs[1].qpos[0, 7:]).max() > 1e-3  # seeds 0, 1: different starts
    score = clip_tracking(pol, cfg, 2, 0.0, 300.0)
    assert score["worlds"] == 2 and score["falls"] == 1.0  # zero actions on the motors' gains fall
    short = clip_tracking(pol, cfg, 2, 0.5, 300.0)
    assert short["survival_s"] == pytest.approx(0.5) and short["falls"] == 0.0


def test_bcg_at_evaluation_changes_the_state_only_from_the_first_touchdown(tmp_path):
    """Started in the jump's first flight: with BCG on, the bundle mean replaces the state after the landing,
    so the two rollouts agree to the bit in the air and part afterwards."""
    cfg = load_eval_config()
    pol = _hold(tmp_path, "jump", "stand")
    start = [1.25]  # stand 0.4 + crouch 0.5 + push 0.24 s: mid-flight (config/motions.yaml jump)
    off = diffsim_rollouts(pol, cfg, [0], 0.6, 300.0, start, stop_at_falls=False)[0]
    on = diffsim_rollouts(pol, cfg, [0], 0.6, 300.0, start, stop_at_falls=False, bcg=True)[0]
    diff = np.abs(on.qpos - off.qpos).max(axis=-1)  # [T]
    parted = np.flatnonzero(diff > 0)
    assert parted.size, "no bundle merged: no touchdown in 0.6 s?"
    assert 2 <= parted[0] <= 20, parted[0]  # after some steps in the air, within the 0.29 s left of the flight
    assert diff[-1] > 1e-6


def test_mujoco_validation_scores_bcg_evals_protocol_in_mujoco(tmp_path):
    """eval.mujoco_runs' score (bcg_train.eval.evaluate.mujoco_tracking): the whole window in MuJoCo from the
    first frame -- zero actions on the motors' gains fall there as in bcg_sim, the bring-up gains stand to the end;
    seeds give different start states."""
    from bcg_train.eval.evaluate import mujoco_tracking

    cfg = load_eval_config()
    limp = mujoco_tracking(_hold(tmp_path, "stand", "policy"), cfg, 2, 100, 2.0)
    held = mujoco_tracking(_hold(tmp_path, "stand", "stand"), cfg, 2, 100, 2.0)
    assert limp["worlds"] == held["worlds"] == 2
    assert limp["falls"] == 1.0 and limp["survival_s"] < 1.5
    assert held["falls"] == 0.0 and held["survival_s"] == pytest.approx(2.0, abs=0.03)
    assert held["e_track_cm"] < 5.0 < limp["e_track_cm"]
    # eval.mujoco_noise reaches the observations: a trained policy (it reads them) from the same seeds scores
    # differently with sensor noise, and the same numbers again without (the default is noiseless)
    jump = load_policy(Path(__file__).parents[1] / "policies" / "jump")
    clean = mujoco_tracking(jump, cfg, 1, 100, 0.6)
    assert mujoco_tracking(jump, cfg, 1, 100, 0.6, (0.0, 0.0, 0.0)) == clean
    noisy = mujoco_tracking(jump, cfg, 1, 100, 0.6, (0.05, 2.0, 1.0))
    assert noisy["e_track_cm"] != clean["e_track_cm"]


def test_mujoco_validation_during_training_picks_policy_best(tmp_path):
    """A tiny run with eval.mujoco_runs 2 and best_by mujoco: every eval.csv row has the mj_* columns and
    policy_best is the row with the fewest MuJoCo falls, then the lowest MuJoCo E_track; a bad setting is a
    one-line ConfigError."""
    import csv
    import json

    import yaml
    from test_train_cli import bcg_train

    from bcg_train.config import load_train_config

    preset = yaml.safe_load(open(Path(__file__).parents[1] / "config/train/tiny.yaml"))
    preset["eval"].update(mujoco_runs=2, best_by="mujoco", clip_seconds=0.3)
    path = tmp_path / "tiny_mj.yaml"
    path.write_text(yaml.safe_dump(preset))
    p = bcg_train("--preset", str(path), "--algo", "shac", "--budget", "4it", "--out", tmp_path / "run")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "MuJoCo" in p.stderr  # the evaluation line shows it
    rows = list(csv.DictReader(open(tmp_path / "run" / "eval.csv")))
    assert [int(r["iteration"]) for r in rows] == [0, 2, 4]
    for r in rows:
        assert int(r["mj_worlds"]) == 2 and 0.0 < float(r["mj_survival_s"]) <= 0.3 + 1e-6
    best = min(rows, key=lambda r: (float(r["mj_falls"]), float(r["mj_e_track_cm"])))
    summary = json.load(open(tmp_path / "run" / "summary.json"))
    assert summary["best_eval"][2] == int(best["iteration"])
    assert summary["best_eval"][1] == pytest.approx(float(best["mj_e_track_cm"]))
    # with two processes rank 1 runs MuJoCo while rank 0 runs bcg_sim: before the first update (the same weights
    # and normalizer as the one-process run) both rows are the same, so rank 1's figures reached rank 0's row
    p = bcg_train("--preset", str(path), "--algo", "shac", "--procs", "2", "--budget", "2it", "--out", tmp_path / "dp")
    assert p.returncode == 0, p.stderr[-3000:]
    first = next(csv.DictReader(open(tmp_path / "dp" / "eval.csv")))
    assert int(first["iteration"]) == 0 and int(first["mj_worlds"]) == 2
    for k in ("e_track_cm", "mj_e_track_cm", "mj_falls", "mj_survival_s"):
        assert float(first[k]) == pytest.approx(float(rows[0][k]), rel=1e-6), k
    with pytest.raises(ConfigError, match=r"eval\.best_by"):
        load_train_config("tiny", {"eval": {"best_by": "mujoco"}})
    with pytest.raises(ConfigError, match=r"eval\.mujoco_runs"):
        load_train_config("tiny", {"eval": {"mujoco_runs": -1}})
    with pytest.raises(ConfigError, match=r"eval\.mujoco_noise"):
        load_train_config("tiny", {"eval": {"mujoco_noise": [0.01, 0.5]}})
