"""ADD reward (bcg_train.rewards.ADDReward) on small real tensors: the default reward's gradient points towards
delta = 0 on bad samples, the discriminator's steps follow the samples (equal on every process), the gradient
penalty covers negatives and positive, the delta scale is a count-weighted cumulative mean, the world horizontal
root position is hidden, per-iteration logs, resume."""

from __future__ import annotations

import copy
import dataclasses as dc
import io
import math

import pytest
import torch

from bcg_sim.config import ConfigError
from bcg_train.config import FEATURE_GROUPS, ADDConfig, load_train_config
from bcg_train.rewards import ADDReward, DeltaScale
from bcg_train.task import Features

# a small feature layout with the task's group names and order (body_pos: 2 bodies)
SIZES = {"root_pos": 3, "root_ori": 6, "joint_pos": 4, "body_pos": 6, "root_vel": 6, "joint_vel": 4}
DIM = sum(SIZES.values())


def feats(x: torch.Tensor) -> Features:
    out, i = {}, 0
    for g in FEATURE_GROUPS:
        out[g] = x[:, i : i + SIZES[g]]
        i += SIZES[g]
    return Features(out, torch.zeros(x.shape[0], 1, 3))


def make(**over) -> ADDReward:
    cfg = dc.replace(ADDConfig(), hidden=[32, 32], replay_size=4096, **over)
    return ADDReward(cfg, DIM, "cpu", torch.Generator().manual_seed(0))


def trained(iters: int = 150, **over) -> ADDReward:
    """A discriminator trained (Adam: a few seconds) on negatives delta = s * N(0, 1) per feature, s ~ U(1/4, 4)
    per sample: worlds near the clip and far from it, like a rollout's."""
    torch.manual_seed(0)
    over = {"optimizer": "adam", "lr": 2e-3, "batch_size": 64, **over}
    add = make(**over)
    g = torch.Generator().manual_seed(1)
    zero = torch.zeros(64, DIM)
    for _ in range(iters):
        s = 0.25 + 3.75 * torch.rand(64, 1, generator=g)
        add.observe(feats(-s * torch.randn(64, DIM, generator=g)), feats(zero))  # delta = ref - sim
        add.update()
    return add


def reward_and_grad(add: ADDReward, delta: torch.Tensor):
    """r(delta) and dr/d delta (delta = ref - sim with ref = 0)."""
    d = delta.clone().requires_grad_(True)
    r = add(feats(-d), feats(torch.zeros_like(d)))
    (g,) = torch.autograd.grad(r.sum(), d)
    return r.detach(), g


def _points_towards_zero(add: ADDReward, bad: torch.Tensor) -> torch.Tensor:
    r, grad = reward_and_grad(add, bad)
    assert float(grad.norm(dim=-1).min()) > 0
    toward_zero = -(grad * bad).sum(-1)  # directional derivative along -delta (towards 0)
    assert (toward_zero > 0).float().mean() >= 0.95, (toward_zero > 0).float().mean()
    r_step, _ = reward_and_grad(add, bad - 0.05 * bad / bad.norm(dim=-1, keepdim=True))
    assert (r_step > r).float().mean() >= 0.95  # a small step towards delta = 0 raises the reward
    return grad


@pytest.mark.parametrize("sharp", [False, True], ids=["default_penalties", "sharp_discriminator"])
def test_default_reward_gradient_points_towards_zero_on_bad_samples(sharp):
    """Bad samples: the far end of the negatives (|delta| 3.5x typical). With the default penalties D is soft
    there (~0.15); a sharper D (small gradient penalty, no logit regularization) puts D ~ 0 there, where
    MimicKit's -log(1 - D) has almost no gradient left and the default form keeps one."""
    add = trained(**({"grad_penalty": 0.2, "logit_reg": 0.0} if sharp else {}))
    assert add.cfg.reward_form == "rational"
    bad = 3.5 * torch.randn(256, DIM, generator=torch.Generator().manual_seed(7))
    bad[:, :2] = 0.0  # the world x y is not the discriminator's (see the masking test)
    with torch.no_grad():
        d_bad, d_pos = torch.sigmoid(add.logit(bad)), torch.sigmoid(add.logit(torch.zeros(1, DIM)))
    assert float(d_bad.max()) < 0.5 < float(d_pos)
    grad = _points_towards_zero(add, bad)
    if sharp:
        assert float(d_bad.mean()) < 0.02, float(d_bad.mean())
        soft = copy.copy(add)  # the same discriminator, MimicKit's reward
        soft.cfg = dc.replace(add.cfg, reward_form="softplus")
        _, grad_soft = reward_and_grad(soft, bad)
        assert float(grad.norm(dim=-1).median()) > 3 * float(grad_soft.norm(dim=-1).median())


def test_reward_forms_are_bounded_monotone_and_the_default_keeps_its_slope():
    add = make()
    logit = torch.linspace(-40.0, 20.0, 601, requires_grad=True)
    r = add.reward_of_logit(logit)
    (slope,) = torch.autograd.grad(r.sum(), logit)
    assert bool((r > 0).all()) and bool((r <= 1).all())  # a fall is never worth more than staying up
    assert bool((slope > 0).all())  # strictly increasing in D
    k = add.cfg.reward_knee
    at = {v: float(slope[int(round((v + 40) * 10))]) for v in (-30.0, -10.0, -5.0, 0.0)}
    assert at[-10.0] > 1e-2 and at[-30.0] > 1e-3, at  # polynomial, not exponential, decay
    assert math.isclose(float(add.reward_of_logit(torch.tensor(-k - math.log1p(-math.exp(-k))))), 0.5, rel_tol=1e-5)
    soft = make(reward_form="softplus")
    lg = torch.tensor([-10.0], requires_grad=True)
    (s_soft,) = torch.autograd.grad(soft.reward_of_logit(lg).sum(), lg)
    assert float(s_soft) < 1e-4 < at[-10.0]  # softplus' gradient vanishes where the rational form's does not


def test_discriminator_steps_follow_the_samples():
    add = make(batch_size=16, epochs=2)
    steps = []
    add.reduce_grads = lambda params: steps.append(1)
    for _ in range(3):  # 3 control steps x 20 worlds = 60 negatives: 2 epochs x ceil(60 / 16) = 8 steps
        add.observe(feats(torch.randn(20, DIM)), feats(torch.zeros(20, DIM)))
    out = add.update()
    assert out["disc_steps"] == 8 and len(steps) == 8
    add.observe(feats(torch.randn(5, DIM)), feats(torch.zeros(5, DIM)))
    assert add.update()["disc_steps"] == 2 and len(steps) == 10


def test_every_process_makes_the_same_number_of_steps():
    """Two ranks with different (finite) sample counts, with a gather that sees the other rank's rows."""
    rows = {0: torch.randn(40, DIM), 1: torch.randn(7, DIM)}
    rows[1][:3] = math.nan  # a diverged world on rank 1: 4 samples left there
    ranks, calls = [], {0: 0, 1: 0}
    for rank in (0, 1):
        add = make(batch_size=8, epochs=3)

        def gather(x, rank=rank):
            other = 1 - rank
            if x.shape[-1] == 1:  # the sample counts
                n = torch.isfinite(rows[other]).all(-1).sum()
                return torch.cat([x, torch.tensor([[float(n)]])])
            return torch.cat([x, rows[other][torch.isfinite(rows[other]).all(-1)]])

        def reduce_grads(params, rank=rank):
            calls[rank] += 1

        add.gather, add.reduce_grads = gather, reduce_grads
        add.observe(feats(rows[rank]), feats(torch.zeros_like(rows[rank])))
        ranks.append(add.update())
    assert ranks[0]["disc_steps"] == ranks[1]["disc_steps"] == 3 * math.ceil(40 / 8)
    assert calls[0] == calls[1] == 15
    assert set(ranks[0]) == set(ranks[1])  # comm.mean needs the same keys on every rank


def test_gradient_penalty_covers_negatives_and_positive():
    add = make()
    g = torch.Generator().manual_seed(3)
    add.scale.update(torch.randn(100, DIM, generator=g))
    near, far = 0.1 * torch.randn(32, DIM, generator=g), 3.0 * torch.randn(32, DIM, generator=g)
    t_near, t_far = add.losses(near), add.losses(far)
    # the positive's term is the same network gradient at delta = 0, only the negatives' differ
    assert torch.isclose(t_near["gp_pos"], t_far["gp_pos"])
    assert not torch.isclose(t_near["gp"], t_far["gp"], rtol=1e-3)
    for neg, t in ((near, t_near), (far, t_far)):  # gp = 0.5 (E_neg + E_pos) |d logit / dx|^2, independently
        x = torch.cat([torch.zeros(1, DIM), add.scale(neg * add.mask)]).requires_grad_(True)
        (gx,) = torch.autograd.grad(add.disc(x).sum(), x)
        sq = (gx**2).sum(-1)
        assert torch.isclose(t["gp"], 0.5 * (sq[0] + sq[1:].mean()), rtol=1e-5)
        with torch.no_grad():
            lg = add.disc(x).squeeze(-1)
        bce = 0.5 * (torch.nn.functional.softplus(-lg[0]) + torch.nn.functional.softplus(lg[1:]).mean())
        assert torch.isclose(t["bce"], bce, rtol=1e-5)  # averaged, not summed


def test_delta_scale_is_the_count_weighted_cumulative_mean():
    g = torch.Generator().manual_seed(5)
    s = DeltaScale(4, minimum=1e-4)
    assert torch.equal(s.scale, torch.ones(4))  # before any sample
    batches = [torch.randn(n, 4, generator=g) * (1 + i) for i, n in enumerate((3, 50, 1, 17))]
    for b in batches[:2]:
        s.update(b)
    resumed = DeltaScale(4, minimum=1e-4)
    resumed.load_state_dict(s.state_dict())
    for b in batches[2:]:
        s.update(b)
        resumed.update(b)
    allb = torch.cat(batches)
    expect = allb.abs().mean(0)
    assert torch.allclose(s.scale, expect, rtol=1e-6)
    assert torch.equal(resumed.scale, s.scale)
    batch_means = torch.stack([b.abs().mean(0) for b in batches]).mean(0)
    assert not torch.allclose(s.scale, batch_means, rtol=1e-2)  # not a mean of batch means (nor an EMA)
    z = DeltaScale(2, minimum=1e-4)
    z.update(torch.tensor([[0.0, 1e-6], [0.0, -1e-6]]))
    assert torch.allclose(z.scale, torch.tensor([1e-4, 1e-4]))  # the floor


def test_world_horizontal_root_position_is_hidden_from_the_discriminator():
    add = trained(iters=20)
    ref = torch.randn(8, DIM)
    sim = (ref + 0.3 * torch.randn(8, DIM)).requires_grad_(True)
    r = add(feats(sim), feats(ref))
    (g,) = torch.autograd.grad(r.sum(), sim)
    x, y, z = 0, 1, 2  # root_pos is the first group
    assert float(g[:, [x, y]].abs().max()) == 0.0 and float(g[:, z].abs().max()) > 0
    moved = sim.detach().clone()
    moved[:, [x, y]] += 5.0  # drift 5 m in the world: same reward
    assert torch.equal(add(feats(moved), feats(ref)), r.detach())
    assert float(add.replay[: add.replay_count, :2].abs().max()) == 0.0  # negatives stored without x y


def test_root_xy_puts_the_world_horizontal_root_position_back_into_the_reward():
    add = trained(iters=20, root_xy=True)
    ref = torch.randn(8, DIM)
    sim = (ref + 0.3 * torch.randn(8, DIM)).requires_grad_(True)
    (g,) = torch.autograd.grad(add(feats(sim), feats(ref)).sum(), sim)
    assert float(g[:, [0, 1]].abs().min()) > 0  # every world feels its drift
    assert float(add.replay[: add.replay_count, :2].abs().max()) > 0


def test_update_logs_discriminator_diagnostics():
    add = trained(iters=5)
    add.observe(feats(torch.randn(64, DIM)), feats(torch.zeros(64, DIM)))
    out = add.update()
    for k in ("disc_pos", "disc_neg", "disc_loss", "disc_gp", "disc_bce", "disc_steps"):
        assert math.isfinite(out[k]), k
    assert 0 < out["disc_neg"] < out["disc_pos"] < 1
    shares = [out[f"disc_share_{g}"] for g in FEATURE_GROUPS]
    assert all(0 <= s <= 1 for s in shares) and math.isclose(sum(shares), 1.0, rel_tol=1e-5)
    with torch.no_grad():
        assert math.isclose(out["disc_pos"], float(torch.sigmoid(add.logit(torch.zeros(1, DIM)))), rel_tol=1e-5)


def test_state_dict_resumes_and_an_old_format_is_refused():
    a = trained(iters=10)
    b = make(optimizer="adam", lr=2e-3, batch_size=64)
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)  # as a checkpoint: no tensor shared with `a`
    buf.seek(0)
    b.load_state_dict(torch.load(buf, weights_only=False))
    neg = torch.randn(64, DIM, generator=torch.Generator().manual_seed(9))
    for add in (a, b):
        add.observe(feats(-neg), feats(torch.zeros_like(neg)))
    out_a, out_b = a.update(), b.update()
    assert out_a == pytest.approx(out_b, nan_ok=True)
    assert torch.equal(a.logit(neg), b.logit(neg)) and torch.equal(a.scale.scale, b.scale.scale)
    old = a.state_dict()
    old.pop("version")
    old["scale"] = {"scale": torch.ones(DIM), "initialized": torch.tensor(True)}
    with pytest.raises(ConfigError, match="cannot be resumed"):
        make().load_state_dict(old)


def test_config_defaults_and_checks():
    cfg = load_train_config()
    assert (cfg.add.reward_form, cfg.add.optimizer, cfg.add.epochs) == ("rational", "sgd", 2)
    assert (cfg.add.lr, cfg.add.momentum, cfg.add.weight_decay, cfg.add.delta_norm_min) == (2.5e-4, 0.9, 1e-4, 1e-4)
    assert cfg.add == ADDConfig()  # default.yaml and the dataclass agree
    with pytest.raises(ConfigError, match="add.reward_form"):
        load_train_config(overrides={"add": {"reward_form": "log"}})
    with pytest.raises(ConfigError, match="add.optimizer"):
        load_train_config(overrides={"add": {"optimizer": "rmsprop"}})
    with pytest.raises(ConfigError, match="unknown key"):
        load_train_config(overrides={"add": {"updates_per_iter": 4}})
