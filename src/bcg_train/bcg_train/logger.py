"""The outputs of a training run that people and tools read: metrics.csv, eval.csv, TensorBoard (tb/) and
stderr -- a live progress bar on a terminal, one line per evaluation and the stop messages everywhere (a log
file then reads as lines). Only the main process writes; on the others every method does nothing.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

from tqdm import tqdm

from bcg_train.config import Budget

METRICS_FILE, EVAL_FILE = "metrics.csv", "eval.csv"
# The bar is drawn from the fraction of the budget spent; bar_status() writes the counts and times after it.
_BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {status}{postfix}"


class _Bar(tqdm):
    """A tqdm bar whose format has a {status} field: bar_status's text, set before each refresh."""

    status = ""

    @property
    def format_dict(self) -> dict:
        return {**super().format_dict, "status": self.status}


def bar_status(budget: Budget, iteration: int, samples: int, elapsed: float) -> tuple[float, str]:
    """Where a run stands, for the progress bar: the fraction of its budget spent, and a text that counts
    iterations ("37/200 it" for an iteration budget, "37 it, 1.18M/2.00M samples" for a sample budget, "37 it"
    for a wall-clock one) followed by elapsed<remaining as [h:]mm:ss and the time per iteration."""
    done = {"iterations": iteration, "samples": samples, "seconds": elapsed}[budget.kind]
    frac = min(1.0, done / budget.amount)
    if budget.kind == "iterations":
        count = f"{iteration}/{budget.amount:.0f} it"
    elif budget.kind == "samples":
        count = f"{iteration} it, {tqdm.format_sizeof(samples)}/{tqdm.format_sizeof(budget.amount)} samples"
    else:
        count = f"{iteration} it"
    # at the run's average pace so far (for a wall-clock budget: exactly the time left)
    remaining = tqdm.format_interval(elapsed * (1 - frac) / frac) if frac > 0 else "?"
    per_it = f"{elapsed / iteration:.2f}s/it" if iteration else "?s/it"
    return frac, f"{count} [{tqdm.format_interval(elapsed)}<{remaining}, {per_it}]"


class TrainLog:
    """metrics.csv (one row per iteration), eval.csv (one row per evaluation), tb/ and stderr of a run folder.

    `resume_iteration`: None for a new run (earlier metrics.csv / eval.csv are removed), else the checkpoint's
    iteration (rows logged after it are dropped: the resumed run computes them again). `progress` is where the
    budget stands at the start, in its unit."""

    def __init__(
        self, out: Path, budget: Budget, title: str, main: bool, resume_iteration: int | None, progress: float
    ):
        self.out, self.budget, self.main = out, budget, main
        self.last_eval_row: dict | None = None
        self._columns: list[str] | None = None
        self.writer = self.bar = None
        if not main:
            return
        for name in (METRICS_FILE, EVAL_FILE):
            if resume_iteration is None:
                (out / name).unlink(missing_ok=True)
            else:
                truncate_rows(out / name, resume_iteration)
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(
            str(out / "tb"), purge_step=None if resume_iteration is None else resume_iteration + 1
        )
        # a terminal gets a live bar; a log file (not a terminal) gets lines: one per evaluation
        self.bar = _Bar(
            total=1.0,
            desc=title,
            bar_format=_BAR_FORMAT,
            dynamic_ncols=True,
            file=sys.stderr,
            initial=min(1.0, progress / budget.amount),
            disable=not sys.stderr.isatty(),
        )

    def __enter__(self) -> TrainLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.writer is not None:
            self.writer.close()
        self.bar = self.writer = None

    def iteration(self, row: dict) -> None:
        """One metrics.csv row (its first row fixes the columns), its numbers to TensorBoard, the bar moved."""
        if not self.main:
            return
        path = self.out / METRICS_FILE
        new = not path.is_file()
        if new:
            self._columns = list(row)
        elif self._columns is None:
            with open(path) as f:
                self._columns = next(csv.reader(f))
        with open(path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self._columns, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow({k: row.get(k, "") for k in self._columns})
        for k, v in row.items():
            if isinstance(v, (int, float)) and math.isfinite(v) and k != "iteration":
                self.writer.add_scalar(k, v, row["iteration"])
        self.bar.n, self.bar.status = bar_status(self.budget, row["iteration"], row["samples"], row["wall_s"])
        # the evaluation first: a narrow terminal cuts the line's end
        self.bar.set_postfix_str(
            f"{self._eval_postfix()}batch E {row['e_track_cm']:.1f}cm, r {row['reward']:.3f}, "
            f"|g| {row['grad_norm']:.2g}, skip {row.get('skipped_total', 0)}",
            refresh=False,
        )
        self.bar.refresh()

    def evaluation(self, row: dict, elapsed: float, iteration: int, samples: int, window_s: float) -> None:
        """One eval.csv row and its line on stderr."""
        if not self.main:
            return
        path = self.out / EVAL_FILE
        new = not path.is_file()
        with open(path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(row))
            if new:
                w.writeheader()
            w.writerow(row)
        self.last_eval_row = row
        m, sec = divmod(int(elapsed), 60)
        self.bar.write(
            f"bcg-train: [{m:d}:{sec:02d}, {iteration} it, {samples} samples] eval at iteration "
            f"{row['iteration']}: whole clip E_track {row['e_track_cm']:.1f} cm, "
            f"falls {row['falls']:.0%} of {row['worlds']}, survival {row['survival_s']:.2f} s; "
            f"{row['win_worlds']} windows of {window_s:g} s: {row['win_e_track_cm']:.1f} cm, "
            f"falls {row['win_falls']:.0%}"
            + (
                f"; MuJoCo {row['mj_e_track_cm']:.1f} cm, falls {row['mj_falls']:.0%} of {row['mj_worlds']}"
                if "mj_falls" in row
                else ""
            ),
            file=sys.stderr,
        )

    def message(self, text: str) -> None:
        """A line on stderr below the bar (the main process only)."""
        if self.main:
            print(f"\n{text}", file=sys.stderr)

    def _eval_postfix(self) -> str:
        """The newest evaluation for the progress bar: whole-clip E_track and falls (and MuJoCo's, when measured)."""
        r = self.last_eval_row
        if r is None:
            return ""
        mj = f"MuJoCo {r['mj_e_track_cm']:.1f}cm {r['mj_falls']:.0%} falls, " if "mj_falls" in r else ""
        return f"eval {r['e_track_cm']:.1f}cm {r['falls']:.0%} falls, {mj}"


def truncate_rows(path: Path, iteration: int) -> None:
    """Drop the rows of a CSV log whose `iteration` is after `iteration`."""
    if not path.is_file():
        return
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return
    keep = [r for r in rows if int(r["iteration"]) <= iteration]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(keep)
