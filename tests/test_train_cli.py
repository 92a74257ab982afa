"""bcg-train as a user runs it (real processes, tiny preset): bad input -> one line and exit 2; SHAC and PPO
runs export artifacts that ONNX Runtime and TorchScript run with the training actor's actions; plot; the
gradient guard stops a run with a checkpoint of untouched weights."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]


def bcg_train(*args, cwd=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "bcg_train", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def main_in_process(capsys, *args):
    """bcg_train.cli.main in this process (the console script's function): (exit code, stderr)."""
    from bcg_train.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    return subprocess.CompletedProcess(args, code, "", capsys.readouterr().err)


def _assert_bad_input(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("bcg-train: error:")]
    assert len(ours) == 1 and len(lines) == 1, p.stderr
    for n in needles:
        assert n in ours[0], ours[0]


@pytest.fixture(scope="module")
def shac_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "shac"
    p = bcg_train("--preset", "tiny", "--algo", "shac-bcg", "--budget", "2it", "--out", out)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def test_shac_run_folder(shac_run):
    for f in (
        "config.yaml",
        "contract.yaml",
        "reference.npz",
        "metrics.csv",
        "summary.json",
        "checkpoints/last.pt",
        "policy/policy.yaml",
    ):
        assert (shac_run / f).is_file(), f
    rows = (shac_run / "metrics.csv").read_text().splitlines()
    assert len(rows) == 3 and "e_track_cm" in rows[0] and "bcg_triggers" in rows[0] and "gradvar" in rows[0]
    logged = list(csv.DictReader(open(shac_run / "metrics.csv")))  # tiny: gradvar every iteration (2 worlds)
    assert all(float(r["gradvar"]) > 0 and float(r["gradvar_std"]) >= 0 for r in logged)
    assert list((shac_run / "tb").glob("events.out.tfevents*"))
    summary = yaml.safe_load((shac_run / "summary.json").read_text())
    assert summary["iterations"] == 2 and summary["samples"] == 2 * 2 * 2 and summary["peak_rss_mb_rank0"] > 0
    # the fixed-protocol evaluation: before the first iteration and at the end (tiny: every 2 iterations)
    evals = list(csv.DictReader(open(shac_run / "eval.csv")))
    assert [int(r["iteration"]) for r in evals] == [0, 2] and [int(r["samples"]) for r in evals] == [0, 8]
    # tiny: one whole-clip run (capped at 0.1 s) and two windows
    assert all(float(r["e_track_cm"]) > 0 and int(r["worlds"]) == 1 and int(r["win_worlds"]) == 2 for r in evals)
    assert (shac_run / "policy_best" / "policy.yaml").is_file()
    assert summary["best_eval"][2] in (0, 2)
    assert summary["eval_first_iteration"] == 0 and summary["eval_last_iteration"] == 2
    assert summary["eval_last_e_track_cm"] == pytest.approx(float(evals[-1]["e_track_cm"]))


def test_export_round_trip_matches_the_training_actor(shac_run, tmp_path, capsys):
    from bcg_sim.policy import load_policy
    from bcg_train.dist import Comm
    from bcg_train.runner import Trainer, check_run_folder

    p = main_in_process(capsys, "export", shac_run, "-o", tmp_path / "pol")
    assert p.returncode == 0, p.stderr[-2000:]
    cfg, procs = check_run_folder(shac_run)
    r = Trainer(cfg, shac_run, Comm(), procs, resume=True)
    r.build()
    r.load_checkpoint()
    obs_list, act_list = [], []
    with torch.no_grad():  # recorded observations of a short rollout of the trained actor
        for _ in range(3):
            obs = r.task.observation(r.env.state, r.task.frame, r.task.last_action)
            a = r.algo.actor(r.algo.norm(obs))
            obs_list.append(obs)
            act_list.append(a)
            out = r.env.step(r.task.env_action(a))
            r.task.last_action = a
            r.task.advance(out)
    obs = torch.cat(obs_list).numpy()
    expected = torch.cat(act_list).numpy()
    for runtime in ("onnx", "torchscript"):
        pol = load_policy(tmp_path / "pol", runtime=runtime)
        np.testing.assert_allclose(pol.act(obs), expected, atol=1e-5, rtol=0)
        assert pol.contract.reference.name == "run"
        assert pol.contract.observation.clip == cfg.task.obs_norm_clip
        assert pol.contract.train_kappa == cfg.kappa  # bcg-eval's default delta_d stiffness
        assert np.allclose(pol.contract.observation.mean, r.algo.norm.mean.numpy())


def test_ppo_runs_two_iterations_and_plot(shac_run, tmp_path, capsys):
    from bcg_sim.policy import load_policy

    out = tmp_path / "ppo"
    p = main_in_process(capsys, "--preset", "tiny", "--algo", "ppo", "--budget", "2it", "--out", out)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = (out / "metrics.csv").read_text().splitlines()
    assert len(rows) == 3
    pol = load_policy(out / "policy")
    assert pol.act(np.zeros(pol.n_obs, dtype=np.float32)).shape == (29,)
    png = tmp_path / "curves.png"
    p = main_in_process(capsys, "plot", shac_run, out, "-o", png)
    assert p.returncode == 0, p.stderr[-2000:]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_learning_rate_decays_on_iterations_and_a_wall_clock_schedule_is_refused(tmp_path, capsys):
    # the schedule is a function of the iteration, so a faster machine meets the same one
    out = tmp_path / "iters"
    p = main_in_process(capsys, "--preset", "tiny", "--algo", "shac", "--budget", "4it", "--out", out)
    assert p.returncode == 0, p.stderr[-2000:]
    lr = [float(r["lr_actor"]) for r in csv.DictReader(open(out / "metrics.csv"))]
    assert lr == pytest.approx([2e-3 * (1 - i / 4) for i in range(1, 5)]), lr
    _assert_bad_input(
        main_in_process(capsys, "--preset", "tiny", "--algo", "shac", "--budget", "4s", "--out", tmp_path / "timed"),
        "wall clock",
        "lr_decay",
    )


def test_a_training_process_runs_torch_on_one_thread(tmp_path, capsys):
    # one core per process: two trainings side by side with torch's default threads ran 6x slower per iteration
    preset = yaml.safe_load((REPO / "config" / "train" / "tiny.yaml").read_text())
    # no evaluation and no export (the guard stops it): loading a TorchScript policy sets the threads as well
    preset["eval"] = {"every": 0}
    preset["shac"].update(max_grad_norm=1e-12, max_consecutive_skips=1)
    path = tmp_path / "noeval.yaml"
    path.write_text(yaml.safe_dump(preset))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        p = main_in_process(capsys, "--preset", path, "--algo", "shac", "--budget", "1it", "--out", tmp_path / "r")
        assert p.returncode == 3, p.stderr[-2000:]
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_guard_stops_the_run_with_a_checkpoint_of_untouched_weights(tmp_path, capsys):
    preset = yaml.safe_load((REPO / "config" / "train" / "tiny.yaml").read_text())
    preset["shac"].update(max_grad_norm=1e-12, max_consecutive_skips=2)  # every update is "too large"
    path = tmp_path / "guard.yaml"
    path.write_text(yaml.safe_dump(preset))
    out = tmp_path / "run"
    p = main_in_process(capsys, "--preset", path, "--algo", "shac", "--budget", "10it", "--out", out)
    assert p.returncode == 3, p.stderr[-2000:]
    assert "stopped at iteration 2: 2 updates in a row skipped" in p.stderr
    d = torch.load(out / "checkpoints" / "last.pt", weights_only=False)
    assert d["iteration"] == 2 and d["algo"]["skipped_total"] == 2
    assert d["algo"]["actor_opt"]["state"] == {}  # the optimizer never stepped
    assert not (out / "policy").exists()


def test_bad_inputs_exit_2_with_one_line(tmp_path, shac_run, capsys):
    _assert_bad_input(
        main_in_process(capsys, "--preset", "tiny", "--motion", "no_such_clip", "--out", tmp_path / "a"), "no_such_clip"
    )
    _assert_bad_input(
        main_in_process(capsys, "--preset", "tiny", "--horizon", "500", "--out", tmp_path / "b"),
        "shorter than horizon 500",
    )
    _assert_bad_input(main_in_process(capsys, "--preset", "tiny", "--budget", "12parsecs"), "budget '12parsecs'")
    bad = tmp_path / "bad.yaml"
    bad.write_text("shac:\n  horizn: 3\n")
    _assert_bad_input(main_in_process(capsys, "--preset", bad), "bad.yaml", "horizn")
    _assert_bad_input(main_in_process(capsys, "--preset", "no_such_preset"), "no_such_preset")
    _assert_bad_input(main_in_process(capsys, "--preset", "tiny", "--out", shac_run), "already holds a run")
    (tmp_path / "empty").mkdir()
    _assert_bad_input(main_in_process(capsys, "--resume", tmp_path / "empty"), "not a bcg-train run folder")
    other = tmp_path / "other"
    shutil.copytree(shac_run, other)
    c = yaml.safe_load((other / "contract.yaml").read_text())
    c["kp"][0] += 1.0
    (other / "contract.yaml").write_text(yaml.safe_dump(c, sort_keys=False))
    _assert_bad_input(main_in_process(capsys, "--resume", other), "another policy contract", "kp")


LAFAN1_DANCE = REPO.parent / "shared" / "data" / "motions" / "lafan1_g1" / "dance1_subject2.csv"


def test_motion_window_of_a_lafan1_clip():
    """task.motion_start/motion_end cut the clip the task trains on: dance1_subject2 from 30 s to 40 s is 10 s of
    control-rate frames whose first is frame 30 x 50 of the whole clip (world positions kept)."""
    if not LAFAN1_DANCE.is_file():
        pytest.skip(f"{LAFAN1_DANCE} not present (LAFAN1-G1 clips are research-only, not in the repository)")
    from bcg_sim.motion import load
    from bcg_train.config import load_train_config
    from bcg_train.runner import load_motion

    cfg = load_train_config("tiny", {"task": {"motion": str(LAFAN1_DANCE), "motion_start": 30.0, "motion_end": 40.0}})
    with pytest.warns(UserWarning):  # the CSV's rate is assumed (30 fps)
        w = load_motion(cfg, 50.0)
        whole = load(LAFAN1_DANCE, fps=50.0)
    assert w.duration == pytest.approx(10.0) and w.num_frames == 501
    np.testing.assert_array_equal(w.qpos()[0], whole.qpos()[1500])
    np.testing.assert_array_equal(w.root_lin_vel_w, whole.root_lin_vel_w[1500:2001])


def test_motion_window_runs_and_bad_windows_exit_2(tmp_path, capsys):
    out = tmp_path / "win"
    p = main_in_process(
        capsys,
        "--preset",
        "tiny",
        "--motion",
        "jump",
        "--motion-start",
        "1",
        "--motion-end",
        "2",
        "--budget",
        "1it",
        "--out",
        out,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    from bcg_sim.motion import load
    from bcg_sim.policy import ReferenceTrack

    ref, whole = ReferenceTrack.load_npz(out / "reference.npz", "jump"), load("jump")
    assert ref.root_pos_w.shape[0] == 51
    np.testing.assert_allclose(ref.root_pos_w, whole.root_pos_w[50:101])
    assert yaml.safe_load((out / "config.yaml").read_text())["task"]["motion_end"] == 2.0
    for args, needles in (
        (("--motion-start", "2", "--motion-end", "1"), ("task.motion_end", "after")),
        (("--motion-start", "-1"), ("task.motion_start", ">= 0")),
        (("--motion-start", "100"), ("outside the clip", "--motion-start")),
        (("--motion-start", "1", "--motion-end", "1.1"), ("1-1.1 s", "shorter than horizon 2")),
    ):
        _assert_bad_input(
            main_in_process(capsys, "--preset", "tiny", "--motion", "jump", *args, "--out", tmp_path / "bad"), *needles
        )
    _assert_bad_input(main_in_process(capsys, "--resume", out, "--motion-end", "3"), "--motion-end")


def test_a_run_changes_sim_keys_and_bad_ones_exit_2(tmp_path, capsys):
    # the 5 ms step of docs/sim.md as a run's own setting: recorded in the run folder, used by the simulator
    from bcg_train.config import config_from_dict
    from bcg_train.runner import sim_config_for

    preset = yaml.safe_load((REPO / "config" / "train" / "tiny.yaml").read_text())
    preset["sim"] = {"sim_dt": 0.005, "solver": {"implicit_contact_spring": True}}
    path = tmp_path / "five_ms.yaml"
    path.write_text(yaml.safe_dump(preset))
    out = tmp_path / "run"
    p = main_in_process(capsys, "--preset", path, "--algo", "shac-bcg", "--budget", "1it", "--out", out)
    assert p.returncode == 0, p.stderr[-2000:]
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["sim"] == preset["sim"]
    saved.pop("procs")  # the run folder also records the process count
    sim = sim_config_for(config_from_dict(saved, "config.yaml"))
    assert (sim.sim_dt, sim.solver.implicit_contact_spring, sim.contact.kappa, sim.bcg.enabled) == (
        0.005,
        True,
        300.0,
        True,
    )
    preset["sim"] = {"sim_dt": 0.005}  # explicit contact spring: above its stability bound
    path.write_text(yaml.safe_dump(preset))
    _assert_bad_input(main_in_process(capsys, "--preset", path, "--out", tmp_path / "a"), "sim_dt")
    preset["sim"] = {"solver": {"implicit_contact_sprin": True}}
    path.write_text(yaml.safe_dump(preset))
    _assert_bad_input(main_in_process(capsys, "--preset", path, "--out", tmp_path / "b"), "implicit_contact_sprin")


def test_root_offset_flag_turns_the_observation_on_and_off():
    """--root-offset / --no-root-offset override the preset's task.observe_root_offset (on in cpu, off in default),
    and the contract a run builds has the feature exactly when it is on."""
    from bcg_train.cli import _overrides, train_parser
    from bcg_train.config import load_train_config
    from bcg_train.runner import contract_for

    def layout(*argv):
        args = train_parser().parse_args(list(argv))
        cfg = load_train_config(args.preset, _overrides(args))
        return [s.name for s in contract_for("dance", cfg).observation.layout]

    assert "ref_root_offset_xy" in layout("--preset", "cpu")
    assert "ref_root_offset_xy" not in layout("--preset", "cpu", "--no-root-offset")
    assert "ref_root_offset_xy" not in layout("--preset", "default")
    assert layout("--preset", "default", "--root-offset")[-1] == "ref_root_offset_xy"
