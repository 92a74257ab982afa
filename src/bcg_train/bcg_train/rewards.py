"""Rewards on reference features (bcg_train.task.features): ADD (a discriminator on the differential vector)
and a DeepMimic-style tracking reward. Both are differentiable functions of the simulated state, so SHAC's
actor gradient reaches the policy through the dynamics; the discriminator is frozen while the actor learns.

ADD: delta = ref - sim features, scaled per feature by a running mean of |delta| (`DeltaScale`). The single
positive sample is delta = 0, the negatives are the current rollout's deltas plus a replay buffer of past ones.
Loss = BCE + grad_penalty * E|d logit / d x|^2 at the positive + logit_reg * |W_logit|^2, Adam with weight decay.
Reward r = -log(max(1 - D(delta), reward_floor)), D = sigmoid(logit): large where the robot looks like the clip.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from bcg_train.config import FEATURE_GROUPS, ADDConfig, RewardConfig
from bcg_train.task import Features


def mlp(sizes: list[int], activation=torch.nn.ELU) -> torch.nn.Sequential:
    """Linear layers of `sizes` with `activation` between them (none after the last)."""
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(activation())
    return torch.nn.Sequential(*layers)


class TrackingReward:
    """r = sum_k w_k exp(-|delta_k|^2 / s_k^2) over FEATURE_GROUPS (delta_k = ref - sim of group k)."""

    def __init__(self, cfg: RewardConfig):
        self.cfg = cfg

    def __call__(self, sim: Features, ref: Features) -> torch.Tensor:
        r = 0.0
        for g in FEATURE_GROUPS:
            err2 = ((ref.groups[g] - sim.groups[g]) ** 2).sum(-1)
            r = r + self.cfg.tracking_weights[g] * torch.exp(-err2 / self.cfg.tracking_scales[g] ** 2)
        return r

    def observe(self, sim: Features, ref: Features) -> None:
        """Nothing to learn."""

    def update(self) -> dict:
        return {}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, d: dict) -> None:
        pass

    def modules(self) -> list[torch.nn.Module]:
        return []


class DeltaScale(torch.nn.Module):
    """Running mean of |delta| per feature (exponential, `momentum`), floored at `minimum`."""

    def __init__(self, dim: int, momentum: float, minimum: float):
        super().__init__()
        self.momentum, self.minimum = momentum, minimum
        self.register_buffer("scale", torch.ones(dim))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))

    @torch.no_grad()
    def update(self, delta: torch.Tensor) -> None:
        m = delta.abs().reshape(-1, delta.shape[-1]).mean(0)
        if not bool(self.initialized):
            self.scale.copy_(m)
            self.initialized.fill_(True)
        else:
            self.scale.mul_(1 - self.momentum).add_(self.momentum * m)

    def forward(self, delta: torch.Tensor) -> torch.Tensor:
        return delta / self.scale.clamp(min=self.minimum)


class ADDReward:
    """Adversarial Differential Discriminator reward. `reduce_grads`: all-reduce hook (two-process runs)."""

    def __init__(self, cfg: ADDConfig, dim: int, device, generator: torch.Generator, reduce_grads=None,
                 gather=None):
        self.cfg, self.dim, self.device, self.gen = cfg, dim, device, generator
        self.disc = mlp([dim, *cfg.hidden, 1]).to(device)
        self.scale = DeltaScale(dim, cfg.delta_norm_momentum, cfg.delta_norm_min).to(device)
        self.opt = torch.optim.Adam(self.disc.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.replay = torch.zeros(cfg.replay_size, dim, device=device)
        self.replay_count = 0  # samples ever pushed (ring index = count % size)
        self.current: list[torch.Tensor] = []
        self.reduce_grads = reduce_grads
        self.gather = gather or (lambda x: x)

    @contextlib.contextmanager
    def frozen(self):
        """D's parameters take no gradient (the actor update sees D as a fixed function)."""
        params = list(self.disc.parameters())
        flags = [p.requires_grad for p in params]
        for p in params:
            p.requires_grad_(False)
        try:
            yield
        finally:
            for p, f in zip(params, flags):
                p.requires_grad_(f)

    def logit(self, delta: torch.Tensor) -> torch.Tensor:
        return self.disc(self.scale(delta)).squeeze(-1)

    def __call__(self, sim: Features, ref: Features) -> torch.Tensor:
        """[N] reward, differentiable w.r.t. the simulated features (D frozen)."""
        with self.frozen():
            d = torch.sigmoid(self.logit(ref.flat() - sim.flat()))
            return -torch.log(torch.clamp(1.0 - d, min=self.cfg.reward_floor))

    @torch.no_grad()
    def observe(self, sim: Features, ref: Features) -> None:
        """Keep this step's deltas as negatives for the next update."""
        self.current.append((ref.flat() - sim.flat()).detach())

    def _push(self, x: torch.Tensor) -> None:
        size = self.cfg.replay_size
        idx = (self.replay_count + torch.arange(x.shape[0], device=self.device)) % size
        self.replay[idx] = x
        self.replay_count += x.shape[0]

    def _sample_replay(self, n: int) -> torch.Tensor:
        filled = min(self.replay_count, self.cfg.replay_size)
        return self.replay[torch.randint(0, filled, (n,), generator=self.gen).to(self.device)]

    def update(self) -> dict:
        """cfg.updates_per_iter discriminator steps on the collected negatives; they then enter the replay."""
        if not self.current:
            return {}
        cur = torch.cat(self.current)
        self.current = []
        finite = torch.isfinite(cur).all(-1)
        cur = cur[finite]  # a diverged world's delta is no sample
        self.scale.update(self.gather(cur))
        half = self.cfg.batch_size // 2
        out = {}
        for _ in range(self.cfg.updates_per_iter):
            neg = cur[torch.randint(0, cur.shape[0], (half,), generator=self.gen).to(self.device)] \
                if cur.shape[0] else cur
            if self.replay_count:
                neg = torch.cat([neg, self._sample_replay(half)])
            out = self._step(neg)
        self._push(cur)
        return out

    def _step(self, neg: torch.Tensor) -> dict:
        pos = torch.zeros(1, self.dim, device=self.device, requires_grad=True)
        lp = self.disc(pos).squeeze(-1)  # delta = 0 normalizes to 0
        ln = self.disc(self.scale(neg)).squeeze(-1)
        bce = F.binary_cross_entropy_with_logits(lp, torch.ones_like(lp)) + \
            F.binary_cross_entropy_with_logits(ln, torch.zeros_like(ln))
        (grad,) = torch.autograd.grad(lp.sum(), pos, create_graph=True)
        gp = (grad ** 2).sum(-1).mean()
        logit_w = self.disc[-1].weight
        loss = bce + self.cfg.grad_penalty * gp + self.cfg.logit_reg * (logit_w ** 2).sum()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.reduce_grads is not None:
            self.reduce_grads(self.disc.parameters())
        self.opt.step()
        with torch.no_grad():
            return {"disc_loss": float(loss), "disc_pos": float(torch.sigmoid(lp).mean()),
                    "disc_neg": float(torch.sigmoid(ln).mean()), "disc_gp": float(gp)}

    def state_dict(self) -> dict:
        return {"disc": self.disc.state_dict(), "scale": self.scale.state_dict(), "opt": self.opt.state_dict(),
                "replay": self.replay[: min(self.replay_count, self.cfg.replay_size)].clone(),
                "replay_count": self.replay_count, "gen": self.gen.get_state()}

    def load_state_dict(self, d: dict) -> None:
        self.disc.load_state_dict(d["disc"])
        self.scale.load_state_dict(d["scale"])
        self.opt.load_state_dict(d["opt"])
        r = d["replay"]
        self.replay[: r.shape[0]] = r.to(self.device)
        self.replay_count = int(d["replay_count"])
        self.gen.set_state(d["gen"])

    def modules(self) -> list[torch.nn.Module]:
        return [self.disc]


def make_reward(kind: str, reward_cfg: RewardConfig, add_cfg: ADDConfig, dim: int, device,
                generator: torch.Generator, reduce_grads=None, gather=None):
    if kind == "tracking":
        return TrackingReward(reward_cfg)
    return ADDReward(add_cfg, dim, device, generator, reduce_grads, gather)
