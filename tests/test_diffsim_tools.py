"""Smoke tests of the diffsim tools: `bcg-sim parity` (bcg_sim vs MuJoCo), `bcg-sim track`, `bcg-gradvar`,
bench/cuda_check.py."""

from __future__ import annotations

import csv
import dataclasses as dc

import numpy as np
import pytest

from bcg_sim.diffsim import load_sim_config
from bcg_sim.diffsim.cli import run_parity
from bcg_sim.diffsim.gradvar import bootstrap_variance_std, gradient_variance, paired_ratio, variance_stats
from bcg_sim.diffsim.gradvar import main as gradvar_main


def test_parity_with_mujoco_short_run():
    cfg = load_sim_config()
    cfg = dc.replace(cfg, actuation=dc.replace(cfg.actuation, gains="stand")).validate()
    r = run_parity(cfg, seconds=0.2, amplitude=0.05)
    assert len(r["rows"]) == 10
    keys = ("final_body_dist_max", "mean_foot_penetration_bcg", "mean_foot_penetration_mujoco")
    assert np.isfinite([r[k] for k in keys]).all()
    # same robot, start and PD targets: both stand, bodies within a few cm (measured 1.6 cm max, at a hand)
    assert r["final_body_dist_mean"] < 0.01 and r["final_body_dist_max"] < 0.03
    assert 0.0 < r["mean_foot_penetration_bcg"] < 0.005
    assert min(row["root_z_bcg"] for row in r["rows"]) > 0.7


def test_track_replay_pairs_the_backends_over_the_same_starts(tmp_path, capsys):
    """`bcg-sim track`: both backends replay the same starts; per-start errors, their standard error and the paired
    difference are reported, and the two discretizations follow the clip alike over a short replay."""
    import json

    from bcg_sim.diffsim.cli import main as sim_main

    out = tmp_path / "track.json"
    assert sim_main(["track", "--clips", "dance", "--worlds", "3", "--seconds", "0.1", "--json", str(out)]) == 0
    native, newton = json.loads(out.read_text())
    assert (native["backend"], newton["backend"]) == ("native", "newton")
    for r in (native, newton):
        e = np.asarray(r["body_error_per_world"])
        assert e.shape == (3,) and r["body_error_mean"] == pytest.approx(e.mean())
        assert r["body_error_se"] == pytest.approx(e.std(ddof=1) / np.sqrt(3))
        assert 0.0 < r["body_error_mean"] < 0.1 and r["fell"] == 0.0  # 0.1 s of dance: centimetres, standing
    d = np.asarray(native["body_error_per_world"]) - np.asarray(newton["body_error_per_world"])
    # 2 ms implicit vs 0.5 ms explicit: measured +0.15 mm of 13.1 (1 %, at most ~2 % for a start)
    assert np.abs(d).max() < 0.05 * newton["body_error_mean"]
    assert "native - newton:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--clips", "nope"], "neither a built-in clip"),
        (["--clips", "jump", "--seconds", "20"], "shorter than 20.0 s"),
        (["--worlds", "0"], "--worlds must be >= 1"),
    ],
)
def test_track_bad_input_is_one_line_and_exit_2(args, msg, capsys):
    from bcg_sim.diffsim.cli import main as sim_main

    assert sim_main(["track", "--backends", "native", "--worlds", "2", *args]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith("Warp")]
    assert len(err) == 1 and msg in err[0]


def test_gradvar_writes_csv_and_png(tmp_path):
    gradvar_main(["--worlds", "2", "--horizon", "2", "--kappas", "300", "--bootstrap", "20", "--out", str(tmp_path)])
    rows = list(csv.DictReader(open(tmp_path / "gradvar.csv")))
    assert [r["bcg"] for r in rows] == ["False", "True"]
    assert all(np.isfinite(float(r["var"])) and float(r["grad_norm_mean"]) > 0 for r in rows)
    assert float(rows[0]["ratio_on_off"]) == 1.0 and float(rows[1]["ratio_on_off"]) > 0
    assert (tmp_path / "gradvar.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--branches", "5", "--pool-size", "16"], "must be a multiple of B=5"),
        (["--joint-noise", "-1"], "--joint-noise must be >= 0"),
    ],
)
def test_gradvar_bad_input_is_one_line_and_exit_2(args, msg, capsys):
    with pytest.raises(SystemExit) as e:
        gradvar_main(["--worlds", "2", "--horizon", "2", "--kappas", "300", *args])
    assert e.value.code == 2 and msg in capsys.readouterr().err


def test_parity_on_a_bad_config_is_one_line_and_exit_2(tmp_path, capsys):
    """A config the chosen backend cannot run (the implicit PD on newton) is refused before any simulation."""
    from pathlib import Path

    from bcg_sim.diffsim.cli import main as sim_main

    text = (Path(__file__).resolve().parents[1] / "config" / "sim.yaml").read_text()
    text = text.replace("backend: native ", "backend: newton ", 1)
    assert "backend: newton" in text
    (tmp_path / "sim.yaml").write_text(text)
    assert sim_main(["parity", "--config", str(tmp_path / "sim.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "bcg-sim: sim config: solver.stable_pd: the implicit PD exists in the native backend only"
    assert len([ln for ln in err if not ln.startswith("Warp")]) == 1


def test_bootstrap_variance_std_equals_explicit_resamples():
    """The count-vector form gives the std of gradient_variance over the very resamples it draws."""
    g = np.random.default_rng(0).normal(size=(30, 9)) * np.linspace(0.1, 3.0, 30)[:, None]
    fast = bootstrap_variance_std(g, 300, np.random.default_rng(1))
    rng = np.random.default_rng(1)
    slow = np.std([gradient_variance(g[rng.integers(0, 30, 30)]) for _ in range(300)])
    assert fast == pytest.approx(slow, rel=1e-9) and fast > 0
    assert bootstrap_variance_std(np.ones((8, 3)), 50, rng) == pytest.approx(0.0, abs=1e-12)


def test_variance_stats_equals_explicit_resamples():
    """bcg-gradvar's stds (absolute and relative to |mean|^2) are those of the explicit resamples it draws."""
    g = np.random.default_rng(2).normal(size=(20, 5)) + 0.3
    st = variance_stats(g, 200, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    res = [g[rng.integers(0, 20, 20)] for _ in range(200)]
    assert st["var"] == pytest.approx(gradient_variance(g), rel=1e-12)
    assert st["var_std"] == pytest.approx(np.std([gradient_variance(r) for r in res]), rel=1e-9)
    rel = [gradient_variance(r) / (r.mean(0) ** 2).mean() for r in res]
    assert st["rel_var_std"] == pytest.approx(np.std(rel), rel=1e-9) and st["rel_var_std"] > 0


def test_paired_ratio_of_scaled_gradients_is_exact():
    """Halving every world's gradient quarters the variance, in every paired bootstrap resample too (so its std is
    0); an unpaired comparison would carry the full resampling spread."""
    rng = np.random.default_rng(0)
    g_off = rng.normal(size=(40, 7))
    ratio, std = paired_ratio(g_off, 0.5 * g_off, 200, rng)
    assert ratio == pytest.approx(0.25) and std < 1e-12
    ratio, std = paired_ratio(g_off, rng.normal(size=(40, 7)), 200, rng)
    assert 0.5 < ratio < 2.0 and std > 0.05
    ratio, _ = paired_ratio(np.ones((5, 3)), g_off[:5, :3], 50, rng)
    assert np.isnan(ratio)  # BCG off has no spread: no ratio


def test_gradvar_same_start_isolates_the_start_noise(tmp_path):
    """Identical start states give identical per-world gradients (zero variance); joint noise makes them differ."""
    common = ["--worlds", "3", "--horizon", "2", "--kappas", "300", "--bootstrap", "20", "--same-start", "5"]
    gradvar_main(common + ["--out", str(tmp_path / "exact")])
    gradvar_main(common + ["--joint-noise", "0.02", "--out", str(tmp_path / "noisy")])
    exact = list(csv.DictReader(open(tmp_path / "exact" / "gradvar.csv")))
    noisy = list(csv.DictReader(open(tmp_path / "noisy" / "gradvar.csv")))
    assert all(float(r["var"]) == 0.0 for r in exact)
    assert all(float(r["var"]) > 0.0 and float(r["grad_norm_mean"]) > 0 for r in noisy)


def test_cuda_check_script_self_test_on_cpu():
    """bench/cuda_check.py is the one prepared command for a GPU machine; run its CPU-vs-CPU self-test so it cannot
    rot while no GPU is at hand: both stages run (the BCG rollout must start bundles) and agree exactly."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / "cuda_check.py"
    r = subprocess.run([sys.executable, str(script), "--device", "cpu"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("cuda_check:")]
    assert len(lines) == 2 and all(ln.endswith("-> OK") for ln in lines), r.stdout
    assert "difference 0.00e+00" in lines[1]
