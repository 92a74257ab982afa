"""Rewards on reference features (bcg_train.task.features): ADD (a discriminator on the differential vector)
and a DeepMimic-style tracking reward. Both are differentiable functions of the simulated state, so SHAC's
actor gradient reaches the policy through the dynamics; the discriminator is frozen while the actor learns.

ADD (Adversarial Differential Discriminator; MimicKit's add_agent, adapted to a first-order learner)
--------------------------------------------------------------------------------------------------
Input. delta = ref - sim features per world, the task's FEATURE_GROUPS concatenated. The world horizontal root
position (root_pos x, y) is zeroed unless `add.root_xy`: the actor observes no world x y, so a discriminator
keying on drift would hand it a reward it cannot act on knowingly (root height z stays). The tracking reward
keeps x y, and its analytic gradient still pulls the robot back along the clip; `root_xy: true` gives ADD the
same. Each feature is divided by its scale, a
count-weighted cumulative mean of |delta| over every negative seen so far (`DeltaScale`, floored at
delta_norm_min; MimicKit's DiffNormalizer), so the scale settles instead of chasing the latest batches.

Discriminator. D(delta) = sigmoid(logit(delta / scale)), an MLP. The one positive sample is delta = 0 (the
robot exactly on the clip); the negatives are the current rollout's deltas, plus as many drawn from a replay of
past ones. Loss per step, as in MimicKit:
    0.5 (BCE(pos, 1) + BCE(neg, 0))  +  grad_penalty * 0.5 (E_neg + E_pos) |d logit / d x|^2  +  logit_reg |W_out|^2
The gradient penalty is taken at the negatives too: they are exactly where SHAC differentiates D, and a smooth
D there is what gives the actor a useful direction. It also keeps D soft on the negatives (in a toy, logits
~ -2 on the far negatives, against -10 to -25 with the penalty at the positive only), which bounds the reward's
slope there as well; the reward form below matters most where D does saturate. Per iteration D takes
epochs x ceil(n / batch_size) steps (n: current negatives, the largest count over the processes, so every
process steps equally often), SGD with momentum (or Adam), so its training follows the samples collected.

Reward. MimicKit's PPO reward r = -log(1 - D) = softplus(logit) is fine as a scalar, but its derivative
dr/dlogit = D vanishes exactly on the bad samples (D ~ 0) where a first-order learner needs a gradient most.
The default form is
    r = knee / (knee + softplus(-logit)) = knee / (knee - log D)   in (0, 1]
  - monotone in D, so a state is never rewarded above one the discriminator finds closer to the clip, and
    bounded below by 0 (positive everywhere), so ending an episode early (a fall) is never worth more than
    staying up; bounded above by 1, like the tracking reward, so SHAC's critic and learning rates carry over;
  - dr/dlogit = knee (1 - D) / (knee - log D)^2: ~1/knee around D ~ 1/2, and on bad samples (logit -> -inf)
    it decays only like knee / logit^2 (polynomially), not like D = e^logit. With knee = 2 the slope is 0.10 at
    logit -2, 0.04 at -5 and 0.014 at -10, where -log(1 - D) has 0.12, 0.0067 and 4.5e-5;
  - r = 1/2 where -log D = knee. Good samples (D -> 1) saturate at 1 with a vanishing slope, as the tracking
    reward does at zero error.
(`add.reward_form: softplus` keeps MimicKit's form, e.g. for PPO.)

A moving reward. D and its scale change every iteration, so earlier rewards were paid by an older D. The
count-weighted scale converges; D moves by a few small SGD steps per iteration; and the critic is refit each
iteration to TD(lambda) targets whose rewards come from the current rollout (the D of this iteration), so its
targets track D with one iteration's lag (the slow target critic in SHAC's bootstrap lags more).

Logged per iteration (`update()`): disc_pos (D at delta = 0), disc_neg (mean D on the current negatives),
disc_loss, disc_bce, disc_gp (means over the iteration's steps), disc_steps, and disc_share_<group>: each
feature group's share of |d D / d x| summed over its features, x = delta / scale (sensitivity per typical
deviation, comparable across rad, m and rad/s), mean over the current negatives.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Protocol

import torch
import torch.nn.functional as F

from bcg_sim.config import ConfigError
from bcg_train.config import FEATURE_GROUPS, ADDConfig, RewardConfig, TrainConfig
from bcg_train.task import Features

if TYPE_CHECKING:
    from bcg_train.dist import Comm


class Reward(Protocol):
    """A reward on reference features that an algorithm differentiates (SHAC) or samples (PPO)."""

    @classmethod
    def from_config(cls, cfg: TrainConfig, dim: int, device, generator: torch.Generator, comm: Comm) -> Reward:
        """`dim`: width of Features.flat(); `generator`: the reward's random stream; `comm`: the processes."""
        ...

    def __call__(self, sim: Features, ref: Features) -> torch.Tensor:
        """Per-world reward [N] of a simulated state against the reference (differentiable in `sim`)."""
        ...

    def observe(self, sim: Features, ref: Features) -> None:
        """Record a step's samples for `update()`."""
        ...

    def update(self) -> dict:
        """Learn from the samples observed since the last call; returns numbers for metrics.csv."""
        ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, d: dict) -> None: ...

    def modules(self) -> list[torch.nn.Module]: ...


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

    @classmethod
    def from_config(cls, cfg: TrainConfig, dim: int, device, generator: torch.Generator, comm) -> TrackingReward:
        return cls(cfg.reward)

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
    """Per-feature count-weighted cumulative mean of |delta| over every sample seen, floored at `minimum`
    (1 before any sample). Float64 statistics: the mean of a long stream does not drift with rounding."""

    def __init__(self, dim: int, minimum: float):
        super().__init__()
        self.minimum = minimum
        self.register_buffer("mean_abs", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, delta: torch.Tensor) -> None:
        d = delta.reshape(-1, delta.shape[-1])
        n = d.shape[0]
        if n == 0:
            return
        total = self.count + n
        self.mean_abs.add_((d.abs().double().mean(0) - self.mean_abs) * (n / total))
        self.count.copy_(total)

    @property
    def scale(self) -> torch.Tensor:
        s = self.mean_abs.clamp(min=self.minimum) if bool(self.count > 0) else torch.ones_like(self.mean_abs)
        return s.float()

    def forward(self, delta: torch.Tensor) -> torch.Tensor:
        return delta / self.scale.to(delta.dtype)


def group_slices(groups: dict[str, torch.Tensor]) -> dict[str, slice]:
    """Column range of each group in Features.flat() (groups concatenated in their order). The task's layout
    must be FEATURE_GROUPS' order: the discriminator's input columns are read by these offsets."""
    names = list(groups)
    if set(names) == set(FEATURE_GROUPS) and tuple(names) != FEATURE_GROUPS:
        raise ValueError(f"feature groups in order {names}, expected {FEATURE_GROUPS}")
    out, i = {}, 0
    for g, t in groups.items():
        out[g] = slice(i, i + t.shape[-1])
        i += t.shape[-1]
    return out


STATE_VERSION = 2  # 2: cumulative-mean delta scale, root x y masked, epochs of steps (1: EMA scale, unversioned)


class ADDReward:
    """Adversarial Differential Discriminator reward (module docstring). `reduce_grads`: all-reduce of the
    discriminator's gradients, `gather`: rows of every process (two-process runs; identity otherwise)."""

    def __init__(self, cfg: ADDConfig, dim: int, device, generator: torch.Generator, reduce_grads=None, gather=None):
        self.cfg, self.dim, self.device, self.gen = cfg, dim, device, generator
        self.disc = mlp([dim, *cfg.hidden, 1]).to(device)
        self.scale = DeltaScale(dim, cfg.delta_norm_min).to(device)
        if cfg.optimizer == "sgd":
            self.opt = torch.optim.SGD(
                self.disc.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
            )
        elif cfg.optimizer == "adam":
            self.opt = torch.optim.Adam(self.disc.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        else:
            raise ValueError(f"add.optimizer: {cfg.optimizer!r} (sgd | adam)")
        self.replay = torch.zeros(cfg.replay_size, dim, device=device)
        self.replay_count = 0  # samples ever pushed (ring index = count % size)
        self.current: list[torch.Tensor] = []
        self.reduce_grads = reduce_grads
        self.gather = gather or (lambda x: x)
        self.layout: dict[str, slice] | None = None  # group -> columns, from the first features seen
        self.mask = torch.ones(dim, device=device)  # 0 on root_pos x y

    @classmethod
    def from_config(cls, cfg: TrainConfig, dim: int, device, generator: torch.Generator, comm) -> ADDReward:
        return cls(cfg.add, dim, device, generator, comm.reduce_grads, comm.gather)

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

    def _set_layout(self, groups: dict[str, torch.Tensor]) -> None:
        if self.layout is not None:
            return
        self._use_layout(group_slices(groups))

    def _use_layout(self, layout: dict[str, slice]) -> None:
        width = max((s.stop for s in layout.values()), default=0)
        if width != self.dim:
            raise ValueError(f"features have {width} columns, the discriminator takes {self.dim}")
        mask = torch.ones(self.dim, device=self.device)
        if "root_pos" in layout and not self.cfg.root_xy:
            start = layout["root_pos"].start
            mask[start : start + 2] = 0.0  # world x y: not observable by the actor; z (height) stays
        self.layout, self.mask = layout, mask

    def delta(self, sim: Features, ref: Features) -> torch.Tensor:
        """[N, D] discriminator input before scaling: ref - sim with the world horizontal root position zeroed."""
        self._set_layout(ref.groups)
        return (ref.flat() - sim.flat()) * self.mask

    def logit(self, delta: torch.Tensor) -> torch.Tensor:
        return self.disc(self.scale(delta * self.mask)).squeeze(-1)

    def reward_of_logit(self, logit: torch.Tensor) -> torch.Tensor:
        if self.cfg.reward_form == "rational":
            k = self.cfg.reward_knee
            return k / (k + F.softplus(-logit))  # = k / (k - log D)
        d = torch.sigmoid(logit)
        return -torch.log(torch.clamp(1.0 - d, min=self.cfg.reward_floor))

    def __call__(self, sim: Features, ref: Features) -> torch.Tensor:
        """[N] reward, differentiable w.r.t. the simulated features (D frozen)."""
        with self.frozen():
            return self.reward_of_logit(self.logit(self.delta(sim, ref)))

    @torch.no_grad()
    def observe(self, sim: Features, ref: Features) -> None:
        """Keep this step's deltas as negatives for the next update."""
        self.current.append(self.delta(sim, ref).detach())

    def _push(self, x: torch.Tensor) -> None:
        size = self.cfg.replay_size
        if x.shape[0] > size:
            x = x[-size:]
        idx = (self.replay_count + torch.arange(x.shape[0], device=self.device)) % size
        self.replay[idx] = x
        self.replay_count += x.shape[0]

    def _draw(self, n: int, high: int) -> torch.Tensor:
        return torch.randint(0, high, (n,), generator=self.gen).to(self.device)

    def _sample_replay(self, n: int) -> torch.Tensor:
        filled = min(self.replay_count, self.cfg.replay_size)
        if n == 0 or filled == 0:
            return self.replay[:0]
        return self.replay[self._draw(n, filled)]

    def steps_for(self, n: int) -> int:
        """Discriminator steps for n current negatives (the largest count over processes)."""
        return self.cfg.epochs * max(1, math.ceil(n / self.cfg.batch_size))

    def update(self) -> dict:
        """Train D on the collected negatives (module docstring); they then enter the replay."""
        if not self.current:
            return {}
        cur = torch.cat(self.current)
        self.current = []
        cur = cur[torch.isfinite(cur).all(-1)]  # a diverged world's delta is no sample
        self.scale.update(self.gather(cur))
        n = cur.shape[0]
        counts = self.gather(torch.tensor([[float(n)]], device=self.device))
        n_max = int(counts.max())  # the same on every process: equal step counts for reduce_grads
        bs = self.cfg.batch_size
        per_epoch = max(1, math.ceil(n_max / bs))
        sums = {"disc_loss": 0.0, "disc_bce": 0.0, "disc_gp": 0.0}
        for _ in range(self.cfg.epochs):
            perm = torch.randperm(n, generator=self.gen).to(self.device) if n else None
            for i in range(per_epoch):
                if n == 0:
                    neg = cur
                else:
                    idx = perm[i * bs : (i + 1) * bs]
                    if idx.numel() == 0:  # this process has fewer samples than the largest: draw again
                        idx = self._draw(min(bs, n), n)
                    neg = cur[idx]
                neg = torch.cat([neg, self._sample_replay(neg.shape[0] if n else bs)])
                for k, v in self._step(neg).items():
                    sums[k] += v
        steps = self.cfg.epochs * per_epoch
        out = {k: v / steps for k, v in sums.items()}
        out["disc_steps"] = steps
        out.update(self.diagnostics(cur))
        self._push(cur)
        return out

    def losses(self, neg: torch.Tensor) -> dict[str, torch.Tensor]:
        """Discriminator loss terms for negatives `neg` [M, D] (unscaled deltas) against the positive delta = 0:
        bce = 0.5 (pos + neg), gp = 0.5 (gp_pos + gp_neg) with gp_* = E |d logit / d x|^2 on that side."""
        x_pos = torch.zeros(1, self.dim, device=self.device, requires_grad=True)  # 0 scales to 0
        x_neg = self.scale(neg).detach().requires_grad_(True)
        lp = self.disc(x_pos).squeeze(-1)
        ln = self.disc(x_neg).squeeze(-1)
        g_pos, g_neg = torch.autograd.grad(lp.sum() + ln.sum(), (x_pos, x_neg), create_graph=True)
        gp_pos = (g_pos**2).sum(-1).mean()
        bce_pos = F.binary_cross_entropy_with_logits(lp, torch.ones_like(lp))
        if ln.numel() > 0:
            gp_neg = (g_neg**2).sum(-1).mean()
            bce_neg = F.binary_cross_entropy_with_logits(ln, torch.zeros_like(ln))
        else:  # no negative on this process yet (it still steps: every process makes the same steps)
            gp_neg = bce_neg = torch.zeros((), device=self.device)
        bce = 0.5 * (bce_pos + bce_neg)
        gp = 0.5 * (gp_pos + gp_neg)
        logit_w = self.disc[-1].weight
        loss = bce + self.cfg.grad_penalty * gp + self.cfg.logit_reg * (logit_w**2).sum()
        return {
            "loss": loss,
            "bce": bce,
            "gp": gp,
            "gp_pos": gp_pos,
            "gp_neg": gp_neg,
            "bce_pos": bce_pos,
            "bce_neg": bce_neg,
        }

    def _step(self, neg: torch.Tensor) -> dict:
        """One optimizer step on `losses(neg)` (gradients averaged over processes first)."""
        terms = self.losses(neg)
        self.opt.zero_grad(set_to_none=True)
        terms["loss"].backward()
        if self.reduce_grads is not None:
            self.reduce_grads(self.disc.parameters())
        self.opt.step()
        return {
            "disc_loss": float(terms["loss"].detach()),
            "disc_bce": float(terms["bce"].detach()),
            "disc_gp": float(terms["gp"].detach()),
        }

    def diagnostics(self, cur: torch.Tensor) -> dict:
        """D at the positive, mean D on `cur` and each group's share of |dD/dx| (x = delta / scale)."""
        with self.frozen():
            d_pos = torch.sigmoid(self.disc(torch.zeros(1, self.dim, device=self.device))).item()
        out = {"disc_pos": d_pos, "disc_neg": math.nan}
        groups = self.layout or {}
        for g in groups:
            out[f"disc_share_{g}"] = math.nan
        if cur.shape[0] == 0:
            return out
        with self.frozen():
            x = self.scale(cur).detach().requires_grad_(True)
            d = torch.sigmoid(self.disc(x).squeeze(-1))
            (g,) = torch.autograd.grad(d.sum(), x)
        out["disc_neg"] = float(d.detach().mean())
        sens = g.abs().mean(0)
        total = float(sens.sum())
        for name, sl in groups.items():
            out[f"disc_share_{name}"] = float(sens[sl].sum()) / total if total > 0 else math.nan
        return out

    def state_dict(self) -> dict:
        return {
            "version": STATE_VERSION,
            "disc": self.disc.state_dict(),
            "scale": self.scale.state_dict(),
            "opt": self.opt.state_dict(),
            "optimizer": self.cfg.optimizer,
            "replay": self.replay[: min(self.replay_count, self.cfg.replay_size)].clone(),
            "replay_count": self.replay_count,
            "gen": self.gen.get_state(),
            "layout": None if self.layout is None else [(g, sl.start, sl.stop) for g, sl in self.layout.items()],
        }

    def load_state_dict(self, d: dict) -> None:
        version = d.get("version", 1)
        if version != STATE_VERSION:
            raise ConfigError(
                f"ADD reward state of format {version} (this bcg_train writes {STATE_VERSION}: cumulative-mean "
                "delta scale, root x y masked, epochs of discriminator steps); this checkpoint cannot be resumed "
                "with the current ADD reward, start a new run"
            )
        if d.get("optimizer") != self.cfg.optimizer:
            raise ConfigError(
                f"ADD reward state: optimizer {d.get('optimizer')!r}, the config has "
                f"add.optimizer {self.cfg.optimizer!r}"
            )
        self.disc.load_state_dict(d["disc"])
        self.scale.load_state_dict(d["scale"])
        self.opt.load_state_dict(d["opt"])
        r = d["replay"]
        self.replay[: r.shape[0]] = r.to(self.device)
        self.replay_count = int(d["replay_count"])
        self.gen.set_state(d["gen"])
        self.layout = None
        if d["layout"] is not None:
            self._use_layout({g: slice(a, b) for g, a, b in d["layout"]})

    def modules(self) -> list[torch.nn.Module]:
        return [self.disc, self.scale]


REWARDS: dict[str, type[Reward]] = {"add": ADDReward, "tracking": TrackingReward}  # keys: config.REWARD_KINDS


def make_reward(cfg: TrainConfig, dim: int, device, generator: torch.Generator, comm: Comm) -> Reward:
    """The reward `cfg.reward.kind` names."""
    return REWARDS[cfg.reward.kind].from_config(cfg, dim, device, generator, comm)
