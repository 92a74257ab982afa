"""The trained policies committed under policies/<motion>/ load with this bcg's contract and still dance: they
are what a user runs without training (`bcg-eval policies/dance`), so a change of the contract, the observation
or the simulator that breaks them must turn this red."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bcg_sim.motion import load
from bcg_sim.policy import load_policy
from bcg_train.eval import metrics
from bcg_train.eval.config import load_eval_config
from bcg_train.eval.evaluate import run_mujoco

POLICIES = Path(__file__).resolve().parents[1] / "policies"


@pytest.mark.parametrize("motion", sorted(p.name for p in POLICIES.iterdir() if p.is_dir()))
def test_committed_policy_tracks_its_builtin_clip_in_mujoco(motion):
    policy = load_policy(POLICIES / motion)
    clip = load(motion, fps=1.0 / policy.contract.control_dt)
    # the policy's reference is the clip this checkout builds
    assert policy.reference.duration == pytest.approx(clip.duration, abs=policy.contract.control_dt)
    cfg = dataclasses.replace(load_eval_config(), runs=1)
    (run,) = run_mujoco(policy, cfg, None, 3.0)  # the first 3 s, seed 0's start noise
    s = metrics.summarize(run["series"], cfg.fall_height)
    assert not s["fell"] and s["e_track_cm"] < 20.0, s
