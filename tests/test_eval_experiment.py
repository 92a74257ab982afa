"""bcg-experiment: cells run, tables and report are written, --resume skips finished cells, bad input is one
line with exit 2. The table arithmetic is checked with a stand-in trainer (a script that exports a copy of the
hold policy and writes logs with bcg-train's columns and known values); `all` runs the real bcg-train (tiny
preset), so the harness and the trainer's command line and logs cannot drift apart."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch  # noqa: F401 - a hard dependency: a broken install fails, not skips
import yaml

from bcg_sim.config import config_dir
from bcg_sim.policy.cli import export_hold
from bcg_train.eval.experiment import main

TRAINER = """
import argparse, csv, json, shutil, sys
from pathlib import Path
ap = argparse.ArgumentParser()
for k in ("preset", "reward", "motion", "algo", "kappa", "budget", "seed", "out"):
    ap.add_argument("--" + k, required=True)
a = ap.parse_args(sys.argv[2:])
shutil.copytree(sys.argv[1], Path(a.out) / "policy")  # the hold policy, exported once by the test
scale = 0.5 if a.algo == "shac-bcg" else 1.0
with open(Path(a.out) / "metrics.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["iteration", "samples", "wall_s", "reward", "gradvar", "gradvar_std"])
    for i in range(1, 7):  # row 6 has no measurement (NaN), as bcg-train's rows between gradvar_every
        g = scale * float(a.kappa) * (1 + 0.1 * (i % 2)) if i < 6 else float("nan")
        w.writerow([i, 64 * i, 0.5 * i, -1.0 / i, g, 1.0 if i < 6 else float("nan")])
(Path(a.out) / "summary.json").write_text(json.dumps({"iterations": 6, "samples": 384, "eval_first_e_track_cm": 50.0,
                                                      "eval_last_e_track_cm": 20.0, "eval_last_falls": 0.25}))
"""


@pytest.fixture(scope="module")
def cfg(tmp_path_factory) -> Path:
    """An eval.yaml whose train_command is the stand-in trainer (files shared by the tests, cells are not)."""
    tmp_path = tmp_path_factory.mktemp("experiment")
    trainer = tmp_path / "trainer.py"
    trainer.write_text(textwrap.dedent(TRAINER))
    hold = export_hold(str(tmp_path / "hold"), ("onnx",))
    train_command = [
        sys.executable,
        str(trainer),
        str(hold),
        "--preset",
        "{preset}",
        "--reward",
        "{reward}",
        "--motion",
        "{motion}",
        "--algo",
        "{algo}",
        "--kappa",
        "{kappa}",
        "--budget",
        "{budget}",
        "--seed",
        "{seed}",
        "--out",
        "{out}",
    ]
    return _short_eval_config(tmp_path / "eval.yaml", train_command)


def _short_eval_config(path: Path, train_command: list[str] | None = None) -> Path:
    """config/eval.yaml with one 0.2 s evaluation run per cell (and a 0.2 s bcg_sim rollout), written to path.

    train_command replaces the experiment's trainer; None keeps the real bcg-train.
    """
    data = yaml.safe_load((config_dir() / "eval.yaml").read_text())
    if train_command is not None:
        data["experiment"]["train_command"] = train_command
    data["eval"].update(runs=1, seconds=0.2, diffsim_seconds=0.2)
    path.write_text(yaml.safe_dump(data))
    return path


def _dance_k300_tiny(command: str, out: Path, config: Path, budget: str, *extra: str) -> list[str]:
    """bcg-experiment arguments for the real bcg-train: motion dance, kappa 300, tiny preset, no PNG strips."""
    return [
        command,
        "--out",
        str(out),
        "--motions",
        "dance",
        "--kappas",
        "300",
        "--preset",
        "tiny",
        "--budget",
        budget,
        "--no-render",
        "--config",
        str(config),
        *extra,
    ]


def test_stiffness_table_report_and_resume(cfg, tmp_path, capsys):
    out = tmp_path / "res"
    args = [
        "stiffness",
        "--out",
        str(out),
        "--motions",
        "run",
        "--kappas",
        "50",
        "300",
        "--no-render",
        "--config",
        str(cfg),
    ]
    assert main(args) == 0
    table = (out / "sections" / "table1.md").read_text()
    assert "κ = 50 kN/m" in table and "κ = 300 kN/m" in table and "| run | 0/1, " in table
    table_b = table.split("Table 1b")[1]  # the same starts in bcg_sim: the hold policy stands there too
    assert "| run | 0/1, 0.20 s | 0/1, 0.20 s |" in table_b, table_b
    report = (out / "report.md").read_text()
    assert "commit:" in report and "budget per cell:" in report and "Table 1" in report
    assert "| run | shac-bcg | 50 | 0 | 6 | 384 | 50.0 → 20.0 cm, falls 25% | 0/1 |" in report  # the cells table
    assert "| ok (max " in report  # bcg-eval's contact check per cell
    evals = sorted(out.glob("cells/*/eval/eval.json"))
    assert len(evals) == 2
    stamp = [p.stat().st_mtime_ns for p in evals]
    capsys.readouterr()
    assert main(args + ["--resume"]) == 0
    assert "2 finished (skipped), 0 to run" in capsys.readouterr().err
    assert [p.stat().st_mtime_ns for p in evals] == stamp  # nothing re-ran
    assert main(args) == 2  # finished cells without --resume: refused, one line
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("bcg-experiment: ") and "--resume" in err[-1]


def test_gradvar_and_curves_from_training_logs(cfg, tmp_path, capsys):
    """gradvar trains SHAC+BCG and SHAC at 50 and 300 (no evaluation); curves with --resume reuses them."""
    out = tmp_path / "res"
    common = ["--out", str(out), "--motions", "run", "--config", str(cfg), "--resume"]
    assert main(["gradvar", "--kappas", "50", "300", *common]) == 0
    fig3 = (out / "sections" / "fig3.md").read_text()
    # stand-in logs: gradvar = scale * kappa * (1.1, 1, 1.1, 1, 1.1), std 1 each, scale 0.5 with BCG: first
    # 0.5 k 1.1 and 1.1 k; mean 0.5 k 1.06 and 1.06 k with std sqrt(5) / 5 = 0.45; the NaN row is not counted
    assert "| run | shac-bcg | 300 | 165 ± 1 | 159 ± 0.45 | 5 |" in fig3
    assert "| run | shac | 300 | 330 ± 1 | 318 ± 0.45 | 5 |" in fig3
    assert "4 to run" in capsys.readouterr().err
    assert main(["curves", "--kappa", "300", *common]) == 0
    assert "1 finished (skipped), 0 to run" in capsys.readouterr().err  # SHAC+BCG at 300, from gradvar
    assert (out / "fig3_gradvar.png").stat().st_size > 0 and (out / "fig5_curves.png").stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "Fig. 3" in report and "Fig. 5" in report


def test_all_with_the_real_trainer(tmp_path, capsys):
    """`all` on one motion and kappa with bcg-train's tiny preset, two cells at a time: SHAC+BCG, PPO and SHAC
    train, the first two are evaluated, and every section comes from the trainer's own logs."""
    p = _short_eval_config(tmp_path / "eval.yaml")
    out = tmp_path / "res"
    assert main(_dance_k300_tiny("all", out, p, "2it", "--kappa", "300", "--jobs", "2")) == 0
    cells = sorted(d.name for d in (out / "cells").iterdir())
    assert cells == ["dance_ppo_k300_s0", "dance_shac-bcg_k300_s0", "dance_shac_k300_s0"]
    assert (out / "cells/dance_ppo_k300_s0/eval/eval.json").is_file()
    assert not (out / "cells/dance_shac_k300_s0/eval").exists()  # gradvar's SHAC cell needs no evaluation
    report = (out / "report.md").read_text()
    for title in (
        "Table 1",
        "Table 2",
        "Fig. 3",
        "Fig. 5",
        "### Cells",
        "preset tiny, reward tracking, 2 cell(s) at a time",
    ):
        assert title in report, title
    assert "| dance | shac-bcg | 300 |" in report and "| dance | shac | 300 |" in report
    assert "[3/3]" in capsys.readouterr().err


def test_resume_continues_an_interrupted_cell(tmp_path, capsys):
    """A cell whose bcg-train was stopped by SIGTERM (checkpoint, no policy) is continued by --resume from that
    checkpoint up to the experiment's budget, not restarted, then evaluated."""
    p = _short_eval_config(tmp_path / "eval.yaml")
    out = tmp_path / "res"
    cell = out / "cells" / "dance_shac-bcg_k300_s0"
    cmd = [
        "bcg-train",
        "--preset",
        "tiny",
        "--reward",
        "tracking",
        "--motion",
        "dance",
        "--algo",
        "shac-bcg",
        "--kappa",
        "300",
        "--budget",
        "1000it",
        "--seed",
        "0",
        "--out",
        str(cell),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while not (cell / "checkpoints" / "last.pt").is_file() and proc.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint within 600 s"
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=300) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    done = [int(r["iteration"]) for r in csv.DictReader(open(cell / "metrics.csv"))]
    assert not (cell / "policy").exists() and done
    budget = done[-1] + 2
    assert main(_dance_k300_tiny("stiffness", out, p, f"{budget}it", "--resume")) == 0
    assert "resumed from checkpoints/last.pt" in capsys.readouterr().err
    rows = [int(r["iteration"]) for r in csv.DictReader(open(cell / "metrics.csv"))]
    assert rows[-1] == budget and rows.count(1) == 1  # continued to the budget, iteration 1 logged once
    assert json.loads((cell / "summary.json").read_text())["iterations"] == budget
    assert (cell / "eval" / "eval.json").is_file()


def test_missing_trainer_is_one_line(tmp_path, capsys):
    bad = yaml.safe_load((config_dir() / "eval.yaml").read_text())
    bad["experiment"]["train_command"] = ["no-such-trainer-xyz", "--out", "{out}"]
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(bad))
    assert (
        main(["stiffness", "--out", str(tmp_path / "r"), "--motions", "run", "--kappas", "50", "--config", str(p)]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len([e for e in err if "no-such-trainer-xyz" in e]) == 1 and "Traceback" not in "".join(err)
