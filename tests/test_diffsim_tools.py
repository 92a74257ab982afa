"""Smoke tests of the diffsim tools: `bcg-sim parity` (bcg_sim vs MuJoCo), `bcg-gradvar`, bench/cuda_check.py."""

from __future__ import annotations

import csv
import dataclasses as dc

import numpy as np

from bcg_sim.diffsim import load_sim_config
from bcg_sim.diffsim.cli import run_parity
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


def test_gradvar_writes_csv_and_png(tmp_path):
    gradvar_main(["--worlds", "2", "--horizon", "2", "--kappas", "300", "--bootstrap", "20", "--out", str(tmp_path)])
    rows = list(csv.DictReader(open(tmp_path / "gradvar.csv")))
    assert [r["bcg"] for r in rows] == ["False", "True"]
    assert all(np.isfinite(float(r["var"])) and float(r["grad_norm_mean"]) > 0 for r in rows)
    assert (tmp_path / "gradvar.png").stat().st_size > 1000


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
