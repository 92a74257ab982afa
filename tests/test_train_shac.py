"""bcg_train SHAC on the real simulator (2 worlds, tiny networks, kappa 300): the loss falls on a fixed batch,
its gradient matches finite differences, the NaN guard keeps the weights, ADD's discriminator learns Delta = 0."""

from __future__ import annotations

import dataclasses as dc
import math

import pytest
import torch
from train_helpers import QUIET, tiny_trainer

from bcg_train.algorithm import all_finite
from bcg_train.config import ConfigError
from bcg_train.runner import Trainer


def _trainer(tmp_path, **over) -> Trainer:
    base = {"algo": "shac", "budget": "100it", "reward": {"kind": "tracking"}}
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) else v
    return tiny_trainer(tmp_path, base)


def _snapshot(r: Trainer):
    return r.task.state_dict(), r.algo.noise_gen.get_state()


def _restore(r: Trainer, snap) -> None:
    r.env.new_rollout()
    r.task.load_state_dict(snap[0])
    r.algo.noise_gen.set_state(snap[1])


def _loss(r: Trainer, snap) -> float:
    _restore(r, snap)
    with torch.no_grad():
        loss, _, _ = r.algo.rollout_loss(update_norm=False)
    return float(loss)


def test_shac_reduces_its_loss_on_a_fixed_batch(tmp_path):
    # the fixed batch: 2 worlds at their reference start states (reset noise off); with 2 worlds a noisy start
    # can make 6 Adam steps non-monotone, which says nothing about the update itself
    r = _trainer(tmp_path, shac={"horizon": 3, "critic_iters": 0, "gradvar_every": 0}, task={"randomize": QUIET})
    shac = r.algo
    obs = r.task.observation(r.env.state, r.task.frame, r.task.last_action)
    shac.norm.update(obs)  # sensible statistics, then frozen: the loss is a function of the actor only
    shac.update_norm = False
    snap = _snapshot(r)
    before = _loss(r, snap)
    for _ in range(6):
        _restore(r, snap)
        m = shac.iteration()
        assert m["skipped"] == 0
    after = _loss(r, snap)
    assert math.isfinite(before) and after < before - 1e-3, (before, after)


def test_actor_loss_gradient_matches_finite_differences(tmp_path):
    r = _trainer(tmp_path, shac={"horizon": 2, "action_noise_std": 0.0})
    shac = r.algo
    shac.norm.update(r.task.observation(r.env.state, r.task.frame, r.task.last_action))
    snap = _snapshot(r)
    params = list(shac.actor.parameters())
    g = torch.Generator().manual_seed(3)
    direction = [torch.randn(p.shape, generator=g) for p in params]
    norm = math.sqrt(sum(float((d**2).sum()) for d in direction))
    direction = [d / norm for d in direction]

    _restore(r, snap)
    loss, _, _ = shac.rollout_loss(update_norm=False)
    grads = torch.autograd.grad(loss, params)
    analytic = sum(float((gr * d).sum()) for gr, d in zip(grads, direction))

    def shifted(eps: float) -> float:
        with torch.no_grad():
            for p, d in zip(params, direction):
                p.add_(eps * d)
        value = _loss(r, snap)
        with torch.no_grad():
            for p, d in zip(params, direction):
                p.sub_(eps * d)
        return value

    # Central differences at a few step sizes: stiff contact makes the loss piecewise smooth (a touchdown that
    # moves by a substep is a kink), float32 limits the small steps; the best step must agree within 5 %.
    numeric = {eps: (shifted(eps) - shifted(-eps)) / (2 * eps) for eps in (1e-3, 3e-3, 1e-2)}
    assert abs(analytic) > 1e-4
    best = min(abs(v - analytic) for v in numeric.values())
    assert best <= 0.05 * abs(analytic), (analytic, numeric)


def test_a_diverged_world_is_cut_out_of_the_update(tmp_path):
    """A world whose state turns non-finite contributes nothing to the actor's gradient, the other worlds'
    gradients are exactly those of a clean rollout, and the update is made (DiffRL zeroes such worlds too)."""
    from bcg_sim.diffsim import SimState

    r = _trainer(tmp_path, shac={"horizon": 3}, task={"randomize": QUIET})
    shac = r.algo
    shac.iteration()  # one ordinary update (statistics and optimizer state exist)
    snap = _snapshot(r)

    def per_world_grads(poison: bool) -> torch.Tensor:
        _restore(r, snap)
        if poison:
            bad = SimState(*(t[:1].clone() for t in r.env.state.detach().as_tuple()))
            bad.joint_vel[:] = float("nan")  # a diverged world
            r.env.joint_q, r.env.joint_qd = r.env.joint_q.clone(), r.env.joint_qd.clone()
            r.env.reset(torch.tensor([0]), motion=r.task.motion, frames=r.task.frame[:1].cpu(), state=bad)
        probes = (
            torch.zeros(r.task.n, 2, shac.actor.head.in_features, requires_grad=True),
            torch.zeros(r.task.n, 29, requires_grad=True),
        )
        loss, _, log = shac.rollout_loss(probes, update_norm=False)
        loss.backward()
        assert bool(torch.isfinite(loss)) and log["nonfinite"] >= (1 if poison else 0)
        return torch.cat([p.grad.reshape(r.task.n, -1) for p in probes], dim=1)

    clean, poisoned = per_world_grads(False), per_world_grads(True)
    assert bool(torch.isfinite(poisoned).all())  # world 0 ended there and went on from a reset
    assert float(clean[1].abs().max()) > 0 and torch.allclose(poisoned[1], clean[1], rtol=1e-5, atol=1e-8)

    _restore(r, snap)
    bad = SimState(*(t[:1].clone() for t in r.env.state.detach().as_tuple()))
    bad.joint_vel[:] = float("nan")
    r.env.reset(torch.tensor([0]), state=bad)
    before = {k: v.clone() for k, v in shac.actor.state_dict().items()}
    m = shac.iteration()
    assert m["skipped"] == 0 and m["nonfinite"] >= 1 and all_finite(shac.modules())
    assert any(not torch.equal(v, before[k]) for k, v in shac.actor.state_dict().items())
    assert torch.isfinite(r.env.joint_qd).all()  # the diverged world was terminated and reset
    # never a non-finite checkpoint
    (tmp_path / "checkpoints").mkdir(exist_ok=True)
    with torch.no_grad():
        shac.actor.head.weight[0, 0] = float("nan")
    assert r.save_checkpoint() is False
    assert not (tmp_path / "checkpoints" / "last.pt").exists()


def test_add_discriminator_scores_zero_delta_above_random_deltas():
    from bcg_train.config import ADDConfig
    from bcg_train.rewards import ADDReward
    from bcg_train.task import Features

    dim = 12
    cfg = dc.replace(ADDConfig(), hidden=[32], replay_size=512, batch_size=32, optimizer="adam", lr=1e-3, epochs=4)
    add = ADDReward(cfg, dim, "cpu", torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)

    def feats(x):
        return Features({"all": x}, torch.zeros(x.shape[0], 1, 3))

    zero = torch.zeros(1, dim)
    for _ in range(80):
        add.observe(feats(torch.randn(32, dim, generator=g)), feats(torch.zeros(32, dim)))
        add.update()
    test = torch.randn(64, dim, generator=g)
    d0 = torch.sigmoid(add.logit(zero)).item()
    dr = torch.sigmoid(add.logit(test)).mean().item()
    r0 = add(feats(zero), feats(zero)).item()
    rr = add(feats(test), feats(torch.zeros(64, dim))).mean().item()
    assert d0 > dr + 0.1, (d0, dr)  # the gradient penalty at the negatives keeps D soft (~0.17 apart here)
    assert r0 > rr


def test_reset_noise_perturbs_the_reference_start(tmp_path):
    """task.reset_*_noise: a reset lands near the reference state at its frame (joint noise of the given std,
    inside the joint limits; root velocity perturbed); with zero noise it is the reference state itself."""
    from bcg_sim.g1 import joint_limits

    def start(**noise):
        r = _trainer(tmp_path, num_envs=8, task={"randomize": {**QUIET, **noise}})
        r.task.reset()
        ref = r.task.ref_kinematics(r.task.frame)
        s = r.env.state
        return s.joint_pos - ref.joint_pos, s.root_lin_vel_w - ref.root_lin_vel_w, s.joint_pos

    dq, dv, _ = start(reset_joint_noise=0.0, reset_root_vel_noise=0.0)
    assert dq.abs().max() < 1e-4 and dv.abs().max() < 1e-4
    dq, dv, q = start(reset_joint_noise=0.05, reset_root_vel_noise=0.2)
    assert 0.035 < float(dq.std()) < 0.065 and 0.1 < float(dv.std()) < 0.3
    lo, hi = (torch.tensor(a, dtype=torch.float32) for a in joint_limits())
    assert bool(((q >= lo - 1e-5) & (q <= hi + 1e-5)).all())


def _sensitivity(r: Trainer, obs: torch.Tensor, keys=None) -> float:
    r.algo.smooth_gen.manual_seed(7)  # the same noise draw every time
    with torch.no_grad():
        return float(r.algo.obs_sensitivity(obs, r.task.noise_std(keys) if keys else None))


def test_obs_smoothness_makes_the_actor_ignore_sensor_noise(tmp_path):
    # the same fixed batch trained without the term, with it on all sensors and with it on the gyro alone: the
    # actions move less when the noise it was given is added, and the gyro-only term leaves the joint velocities'
    # share alone; without sensor noise there is nothing to measure
    noise = {**QUIET, "obs_joint_vel": 0.3, "obs_ang_vel": 0.1}
    gyro, vel = ["obs_ang_vel"], ["obs_joint_vel"]
    after = {}
    for name, w, keys in (("none", 0.0, None), ("all", 200.0, None), ("gyro", 200.0, gyro)):
        r = _trainer(
            tmp_path / name,
            shac={"horizon": 3, "critic_iters": 0, "gradvar_every": 0, "obs_smoothness": w}
            | ({"obs_smoothness_keys": keys} if keys else {}),
            task={"randomize": noise},
        )
        obs = r.task.observation(r.env.state, r.task.frame, r.task.last_action)
        r.algo.norm.update(obs)
        r.algo.update_norm = False
        assert _sensitivity(r, obs) > 0
        snap = _snapshot(r)
        for _ in range(6):
            _restore(r, snap)
            m = r.algo.iteration()
            assert m["skipped"] == 0 and m["obs_sensitivity"] > 0
        after[name] = {
            "all": _sensitivity(r, obs),
            "gyro": _sensitivity(r, obs, gyro),
            "vel": _sensitivity(r, obs, vel),
        }
    assert after["all"]["all"] < 0.5 * after["none"]["all"], after
    assert after["gyro"]["gyro"] < 0.5 * after["none"]["gyro"], after
    assert after["gyro"]["vel"] > after["all"]["vel"], after
    r = _trainer(tmp_path / "quiet", task={"randomize": QUIET})
    obs = r.task.observation(r.env.state, r.task.frame, r.task.last_action)
    assert _sensitivity(r, obs) == 0.0


def test_obs_smoothness_keys_pick_the_columns_of_their_sensors(tmp_path):
    r = _trainer(tmp_path / "gyro", shac={"obs_smoothness": 1.0, "obs_smoothness_keys": ["obs_ang_vel"]})
    gyro = r.task.contract.slices()["base_ang_vel_b"]
    on = r.algo.smooth_std.nonzero().squeeze(-1).tolist()
    assert on == list(range(gyro.start, gyro.stop))
    assert torch.all(r.algo.smooth_std[on] == r.cfg.task.randomize.obs_ang_vel)
    with pytest.raises(ConfigError, match="shac.obs_smoothness_keys"):
        _trainer(tmp_path / "bad", shac={"obs_smoothness_keys": ["obs_gyro"]})


def test_obs_smoothness_needs_sensor_noise_on_an_observed_feature(tmp_path):
    with pytest.raises(ConfigError, match="shac.obs_smoothness"):
        _trainer(tmp_path / "quiet", shac={"obs_smoothness": 1.0}, task={"randomize": QUIET})
    # noise on the offset from the clip counts where the actor observes that offset, not where it does not
    offset_only = {**QUIET, "obs_root_offset": 0.02}
    with pytest.raises(ConfigError, match="shac.obs_smoothness"):
        _trainer(tmp_path / "blind", shac={"obs_smoothness": 1.0}, task={"randomize": offset_only})
    r = _trainer(
        tmp_path / "seeing",
        shac={"obs_smoothness": 1.0},
        task={"randomize": offset_only, "observe_root_offset": True},
    )
    obs = r.task.observation(r.env.state, r.task.frame, r.task.last_action)
    r.algo.norm.update(obs)
    assert _sensitivity(r, obs) > 0
