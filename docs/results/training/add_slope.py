"""The measurement behind docs/results/training.md "ADD: the scale is not the gap" (not part of the package).

Usage: python docs/results/training/add_slope.py RUN   (a run folder trained with the ADD reward)

Loads the run's last checkpoint (discriminator, delta scale, replay), takes the last 20 000 replayed negatives
(the final policy's own deltas) and prints, per feature group, their mean |delta| over the scale; then along
delta(a) = a * delta the mean reward and its slope dr/da for ADD and for the tracking reward, and the slopes
for other reward knees with the same discriminator.
"""

import dataclasses
import sys
from pathlib import Path

import torch

from bcg_train.rewards import ADDReward, TrackingReward
from bcg_train.runner import check_run_folder
from bcg_train.task import Features

LAST = 20000


def main(run: str) -> None:
    cfg, _ = check_run_folder(Path(run))
    ck = torch.load(f"{run}/checkpoints/last.pt", map_location="cpu", weights_only=False)
    state = ck["algo"]["reward"]
    reward = ADDReward(cfg.add, state["replay"].shape[1], "cpu", torch.Generator())
    reward.load_state_dict(state)
    size = cfg.add.replay_size
    end = reward.replay_count % size
    recent = reward.replay[torch.arange(end - LAST, end) % size]
    scale = reward.scale.scale
    for g, s in reward.layout.items():
        print(
            f"{g:10s} scale {scale[s].mean():.4f}  recent |delta| {recent[:, s].abs().mean():.4f}  "
            f"ratio {recent[:, s].abs().mean() / scale[s].mean():.2f}"
        )

    tracking_reward = TrackingReward(cfg.reward)

    def tracking(d: torch.Tensor) -> torch.Tensor:  # the run's tracking reward with ref - sim = d
        ref = Features({g: d[:, s] for g, s in reward.layout.items()}, body_pos_w=None)
        return tracking_reward(Features({g: torch.zeros_like(x) for g, x in ref.groups.items()}, None), ref)

    def add(d: torch.Tensor) -> torch.Tensor:
        with reward.frozen():
            return reward.reward_of_logit(reward.logit(d))

    def slope(fn, a: float) -> tuple[float, float]:
        t = torch.tensor(a, requires_grad=True)
        r = fn(t * recent).mean()
        (g,) = torch.autograd.grad(r, t)
        return r.item(), g.item()

    print("   a  r_add  dr/da_add  r_tracking  dr/da_tracking")
    for a in (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0):
        (ra, ga), (rt, gt) = slope(add, a), slope(tracking, a)
        print(f"{a:4.2f}  {ra:.3f}  {ga:9.4f}  {rt:10.3f}  {gt:14.4f}")
    for knee in (2.0, 1.0, 0.5, 0.25):
        reward.cfg = dataclasses.replace(reward.cfg, reward_knee=knee)
        row = "  ".join(f"a={a}: {slope(add, a)[1]:.3f}" for a in (0.1, 0.25, 0.5, 1.0, 2.0))
        print(f"knee {knee}: r(0) {slope(add, 0.0)[0]:.3f} r(1) {slope(add, 1.0)[0]:.3f} | dr/da {row}")


if __name__ == "__main__":
    main(sys.argv[1])
