"""What bcg-train prints: on a terminal a progress bar that counts iterations, with elapsed<remaining as mm:ss
and the newest evaluation; in a log file (not a terminal) no bar, one line per evaluation."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from bcg_train.config import parse_budget
from bcg_train.logger import bar_status
from bcg_train.runner import summary_line

EVAL_LINE = re.compile(
    r"^bcg-train: \[\d+:\d\d, \d+ it, \d+ samples\] eval at iteration \d+: whole clip E_track "
    r"[\d.]+ cm, falls \d+% of \d+, survival [\d.]+ s; \d+ windows of [\d.]+ s: [\d.]+ cm, "
    r"falls \d+%$"
)


@pytest.mark.parametrize(
    "budget, at, text",
    [
        ("200it", (37, 4736, 83.25), "37/200 it [01:23<06:06, 2.25s/it]"),
        ("2M", (37, 1_180_000, 83.25), "37 it, 1.18M/2.00M samples [01:23<00:57, 2.25s/it]"),
        ("30min", (37, 4736, 565.49), "37 it [09:25<20:34, 15.28s/it]"),
        ("1h", (0, 0, 0.0), "0 it [00:00<?, ?s/it]"),
    ],
)
def test_bar_counts_iterations_and_shows_minutes(budget, at, text):
    """The bar's text for each kind of budget: iterations as the count, mm:ss times, never raw seconds."""
    frac, status = bar_status(parse_budget(budget), *at)
    assert status == text
    assert frac == pytest.approx({"200it": 37 / 200, "2M": 0.59, "30min": 565.49 / 1800, "1h": 0.0}[budget])


def test_summary_line_rounds_to_the_units():
    """The end-of-training line: cm to 0.1, seconds to 0.01, MB whole, counts whole (summary.json keeps all)."""
    summary = {
        "kappa": 300.0,
        "wall_s": 2.3812,
        "s_per_iteration": 0.79377,
        "e_track_cm_last": 6.922884315252304,
        "falls_total": 3.0,
        "eval_last_falls": 0.125,
        "eval_last_survival_s": 0.1,
        "best_eval": [0.0, 2.190983274090609, 3],
        "s_missing": None,
        "peak_rss_mb_rank0": 689.1,
    }
    assert summary_line(summary) == (
        "kappa=300, wall_s=2.38, s_per_iteration=0.79, e_track_cm_last=6.9, falls_total=3, eval_last_falls=0.125, "
        "eval_last_survival_s=0.10, best_eval=[0, 2.2, 3], s_missing=None, peak_rss_mb_rank0=689"
    )


def _bcg_train(out, stderr) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bcg_train",
            "--preset",
            "tiny",
            "--algo",
            "shac-bcg",
            "--budget",
            "2it",
            "--out",
            str(out),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_terminal_gets_the_bar_and_a_log_file_gets_lines(tmp_path):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # a 200-column terminal
    p = _bcg_train(tmp_path / "tty", slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert p.wait(timeout=600) == 0
    screen = b"".join(chunks).decode(errors="replace")
    frames = [f for f in re.split(r"[\r\n]", screen) if "2/2 it [" in f]
    assert frames, screen[-3000:]
    # the last frame: both iterations, mm:ss elapsed<remaining, and the evaluation before the last iteration
    assert re.search(
        r"100%\|.*\| 2/2 it \[\d\d:\d\d<00:00, [\d.]+s/it\], eval [\d.]+cm \d+% falls, batch E "
        r"[\d.]+cm",
        frames[-1],
    ), frames[-1]

    with open(tmp_path / "train.log", "w") as log:
        assert _bcg_train(tmp_path / "file", log).wait(timeout=600) == 0
    text = (tmp_path / "train.log").read_text()
    assert "\r" not in text and "it [" not in text  # no bar in a file
    evals = [ln for ln in text.splitlines() if " eval at iteration " in ln]
    assert len(evals) == 2 and all(EVAL_LINE.match(ln) for ln in evals), text  # tiny: at 0 and at 2
