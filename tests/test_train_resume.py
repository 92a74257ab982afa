"""Resume after SIGTERM continues exactly like an uninterrupted run; a two-process run ends with identical
weights on both ranks (real processes, tiny preset, kappa 300)."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from bcg_train.cli import main

REPO = Path(__file__).resolve().parents[1]
COMPARED = ("actor_loss", "critic_loss", "reward", "e_track_cm", "grad_norm")


def _cmd(*args):
    return [sys.executable, "-m", "bcg_train", *map(str, args)]


def _rows(run: Path) -> list[dict]:
    with open(run / "metrics.csv") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def constant_lr_preset(tmp_path) -> Path:
    """tiny with a constant learning rate, so runs of different budgets share one schedule."""
    preset = yaml.safe_load((REPO / "config" / "train" / "tiny.yaml").read_text())
    preset["shac"]["lr_decay"] = "constant"
    preset["checkpoint_every"] = 1000  # checkpoints only on the signal and at the end
    path = tmp_path / "tiny_const.yaml"
    path.write_text(yaml.safe_dump(preset))
    return path


def test_resume_after_sigterm_matches_an_uninterrupted_run(tmp_path, constant_lr_preset):
    interrupted = tmp_path / "b"
    p = subprocess.Popen(
        _cmd("--preset", constant_lr_preset, "--algo", "shac", "--budget", "1000it", "--out", interrupted),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and p.poll() is None:
        if (interrupted / "metrics.csv").is_file() and len(_rows(interrupted)) >= 2:
            break
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "interrupted at iteration" in err and "--resume" in err
    k = torch.load(interrupted / "checkpoints" / "last.pt", weights_only=False)["iteration"]
    assert k >= 2
    total = k + 2
    # the resumed and the uninterrupted run in this process (bcg_train.cli.main, the console script's function)
    assert main(["--resume", str(interrupted), "--budget", f"{total}it"]) == 0
    straight = tmp_path / "a"
    assert (
        main(["--preset", str(constant_lr_preset), "--algo", "shac", "--budget", f"{total}it", "--out", str(straight)])
        == 0
    )

    a, b = _rows(straight), _rows(interrupted)
    assert [int(x["iteration"]) for x in b] == list(range(1, total + 1))
    for ra, rb in zip(a, b):  # the interrupted run's rows before the signal, and the resumed ones after it
        for key in COMPARED:
            assert float(rb[key]) == pytest.approx(float(ra[key]), rel=1e-5, abs=1e-7), (ra["iteration"], key)
    ea, eb = (list(csv.DictReader(open(run / "eval.csv"))) for run in (straight, interrupted))
    assert [r["iteration"] for r in eb] == [r["iteration"] for r in ea]  # none lost or repeated by the resume
    for ra, rb in zip(ea, eb):
        assert float(rb["e_track_cm"]) == pytest.approx(float(ra["e_track_cm"]), rel=1e-5), ra["iteration"]
    wa = torch.load(straight / "checkpoints" / "last.pt", weights_only=False)["algo"]
    wb = torch.load(interrupted / "checkpoints" / "last.pt", weights_only=False)["algo"]
    for name in wa["actor"]:
        torch.testing.assert_close(wb["actor"][name], wa["actor"][name], rtol=1e-5, atol=1e-7)
    assert (interrupted / "policy" / "policy.yaml").is_file()


def test_two_process_run_ends_with_identical_weights(tmp_path):
    out = tmp_path / "dp"
    r = subprocess.run(
        _cmd("--preset", "tiny", "--algo", "shac", "--procs", 2, "--budget", "2it", "--out", out),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    a = torch.load(out / "checkpoints" / "last.pt", weights_only=False)
    b = torch.load(out / "checkpoints" / "last.rank1.pt", weights_only=False)
    for part in ("actor", "critic", "target_critic", "norm"):
        for name, t in a["algo"][part].items():
            assert torch.equal(t, b["algo"][part][name]), (part, name)
    # different worlds on the two ranks: they simulated different start frames
    assert not torch.equal(a["task"]["frame"], b["task"]["frame"]) or not torch.equal(
        a["task"]["sim_state"][0], b["task"]["sim_state"][0]
    )
    rows = _rows(out)
    assert len(rows) == 2 and int(rows[-1]["samples"]) == 2 * 2 * 2  # 2 worlds (1 per rank) x h 2 x 2 its
    assert yaml.safe_load((out / "config.yaml").read_text())["procs"] == 2
