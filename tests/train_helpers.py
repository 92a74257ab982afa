"""Helpers for tests that build bcg-train's Trainer on the real simulator (tiny preset, one process)."""

from __future__ import annotations

from pathlib import Path

from bcg_train.config import load_train_config
from bcg_train.dist import Comm
from bcg_train.runner import Trainer

# task.randomize with every reset noise, push and sensor noise off: worlds start exactly at their reference
# state and observe it unchanged, so a test sees only the randomization it turns on itself.
QUIET = {
    "reset_joint_noise": 0.0,
    "reset_root_vel_noise": 0.0,
    "reset_root_ang_vel_noise": 0.0,
    "push_lin_vel": 0.0,
    "obs_joint_pos": 0.0,
    "obs_joint_vel": 0.0,
    "obs_ang_vel": 0.0,
    "obs_gravity": 0.0,
}


def tiny_trainer(run_dir: Path, overrides: dict) -> Trainer:
    """A built Trainer of the tiny preset changed by `overrides` (train config keys), writing to run_dir."""
    cfg = load_train_config("tiny", overrides)
    r = Trainer(cfg, run_dir, Comm(), 1, resume=False)
    r.build()
    return r
