"""Bundled Contact Gradients: zero-radius bundles reproduce the unbundled rollout and gradient exactly,
worlds outside a bundle are untouched, a linear system bundles to its unperturbed mean, a full pool falls
back to the unbundled step, and the quaternion mean is sign-safe. Real Newton worlds unless stated."""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest
import torch

from bcg_sim.diffsim import Bundler, G1DiffEnv, bundle_mean, load_sim_config, quat_mean_about, sample_ball
from bcg_sim.diffsim.bundle import _qmul, quat_exp

STEPS = 8  # control steps; the dropped world touches down in step 5


def make_env(n: int, *, sigma=0.0, sigma_v=0.0, enabled=True, branches=2, horizon=2, pool_size=8, kappa=300.0):
    c = load_sim_config()
    c = dc.replace(c, actuation=dc.replace(c.actuation, gains="stand"),
                   bcg=dc.replace(c.bcg, enabled=enabled, sigma=sigma, sigma_v=sigma_v, branches=branches,
                                  horizon=horizon, pool_size=pool_size)).with_kappa(kappa)
    env = G1DiffEnv(c, n)
    return env


def rollout(env: G1DiffEnv, dropped: list[int], steps: int = STEPS):
    """Drop `dropped` worlds from 5 cm (the others stand), run a differentiable rollout with per-step actions,
    backprop a loss of the whole trajectory. Returns (final joint_q, final joint_qd, [grad of each step's
    actions], outputs)."""
    s = env.state
    s.root_pos_w[dropped, 2] += 0.05
    env.reset(state=s)
    n = env.num_worlds
    g = torch.Generator().manual_seed(1)
    acts = [(0.05 * torch.randn(n, 29, generator=g)).requires_grad_(True) for _ in range(steps)]
    loss, outs = 0.0, []
    for a in acts:
        out = env.step(a)
        outs.append(out)
        loss = loss + out.state.root_pos_w[:, 0].sum() + out.body_pos_w[:, 6, 2].sum() \
            + 0.01 * out.state.joint_vel.sum() + out.body_quat_w[:, 0, 1].sum()
    loss.backward()
    return env.joint_q.detach(), env.joint_qd.detach(), [a.grad.clone() for a in acts], outs


def test_zero_radius_bundle_reproduces_unbundled_rollout_and_gradient():
    q0, qd0, g0, _ = rollout(make_env(2, enabled=False), dropped=[0])
    env = make_env(2, sigma=0.0, sigma_v=0.0, branches=4, horizon=2)
    q1, qd1, g1, outs = rollout(env, dropped=[0])
    st = env.bcg_stats()
    assert st.bundles_completed >= 1 and any(o.bundled[0] for o in outs)
    assert st.branch_spread_pos == 0.0
    assert torch.equal(q0, q1) and torch.equal(qd0, qd1)  # bitwise
    for a, b in zip(g0, g1):  # equal to float32 rounding (the B branch adjoints are summed in another order)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * float(a.abs().max()))


def test_worlds_outside_the_bundle_are_unaffected():
    q0, qd0, g0, _ = rollout(make_env(3, enabled=False), dropped=[1])
    env = make_env(3, sigma=0.01, sigma_v=0.1, branches=4, horizon=2)
    q1, qd1, g1, outs = rollout(env, dropped=[1])
    st = env.bcg_stats()
    assert st.bundles_completed >= 1 and st.branch_spread_pos > 0
    assert not (q0[1] == q1[1]).all()  # the bundled world changed...
    for w in (0, 2):  # ...the others did not, nor did their gradients
        assert torch.equal(q0[w], q1[w]) and torch.equal(qd0[w], qd1[w])
        for a, b in zip(g0, g1):
            assert torch.equal(a[w], b[w])
    assert all(torch.isfinite(g).all() for g in g1)


def test_full_pool_falls_back_to_unbundled_step():
    """Pool room for one bundle, three simultaneous touchdowns: two are counted as overflow and their
    worlds continue exactly as without BCG."""
    q0, _, g0, _ = rollout(make_env(3, enabled=False), dropped=[0, 1, 2])
    env = make_env(3, sigma=0.01, sigma_v=0.1, branches=2, horizon=2, pool_size=2)
    q1, _, g1, outs = rollout(env, dropped=[0, 1, 2])
    st = env.bcg_stats()
    assert st.triggers >= 3 and st.overflow >= 2 and st.bundles_completed >= 1
    assert st.pool_slots_used_max == 2
    bundled = {w for o in outs for w in o.bundled.nonzero().flatten().tolist()}
    unbundled = [w for w in range(3) if w not in bundled]
    assert len(unbundled) >= 1
    for w in unbundled:
        assert torch.equal(q0[w], q1[w])


def test_bcg_stats_count_triggers_per_foot():
    env = make_env(1, sigma=0.005, sigma_v=0.05, branches=2, horizon=1)
    rollout(env, dropped=[0])
    st = env.bcg_stats()
    assert st.triggers == sum(st.triggers_per_foot) >= 2  # both feet land
    assert st.bundles_started + st.busy + st.overflow == st.triggers  # every trigger is accounted for
    assert st.bundles_completed == st.bundles_started  # H = 1: each bundle merges in its own step
    assert st.pool_use_mean == 2.0
    env.new_rollout()
    assert env.bcg_stats().triggers == 0


# ------------------------------------------------------------------------------- maths (no Newton)


def test_bundling_a_linear_system_returns_the_unperturbed_mean():
    """x' = A x + b u through the Bundler's own trigger/step/merge path (the stepper is a linear system,
    not Newton): antithetic perturbations average out exactly, up to float rounding."""
    g = torch.Generator().manual_seed(0)
    dq, dv, nj = 4, 3, 2
    A_q, A_v = torch.randn(dq, dq, generator=g) * 0.3, torch.randn(dv, dv, generator=g) * 0.3
    Bq = torch.randn(nj, dq, generator=g)

    def step(target, q, qd):
        return q @ A_q.T + target @ Bq, qd @ A_v.T

    def step_chunk(chunk, target, q, qd):
        return step(target, q, qd)

    cfg = dc.replace(load_sim_config().bcg, branches=6, horizon=3, sigma=0.3, sigma_v=0.7, pool_size=6, antithetic=True)
    bundler = Bundler(cfg, step_chunk, quat_slices=(None, None))
    q, qd = torch.randn(2, dq, generator=g, dtype=torch.float32), torch.randn(2, dv, generator=g)
    targets = [torch.randn(2, nj, generator=g) for _ in range(cfg.horizon)]
    assert bundler.trigger(0, 0, q[0], qd[0])
    merged = []
    for t in targets:
        main = step(t, q, qd)
        (q_b, qd_b), m = bundler.step_and_merge(t, main)
        merged += m
        q, qd = main  # the unperturbed rollout
    assert merged == [0]
    torch.testing.assert_close(q_b, q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(qd_b, qd, rtol=1e-5, atol=1e-5)
    assert bundler.stats.branch_spread_pos > 0.01  # the branches did spread


def test_sample_ball_radius_and_antithetic_mean():
    g = torch.Generator().manual_seed(0)
    x = sample_ball(1000, 3, 0.2, g, antithetic=True)
    assert float(x.norm(dim=-1).max()) <= 0.2 + 1e-6
    assert float(x.mean(0).abs().max()) < 1e-7
    r = sample_ball(4000, 3, 1.0, g, antithetic=False).norm(dim=-1)
    assert abs(float((r < 0.5).float().mean()) - 0.125) < 0.03  # uniform in volume: P(r < 1/2) = 1/8
    assert torch.equal(sample_ball(4, 3, 0.0, g, antithetic=True), torch.zeros(4, 3))


def test_quaternion_mean_is_sign_safe_and_exact():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(4, generator=g)
    q = q / q.norm()
    assert torch.equal(quat_mean_about(q, torch.stack([q, q, q])), q)  # bitwise
    torch.testing.assert_close(quat_mean_about(q, torch.stack([q, -q])), q)  # -q is the same rotation
    # symmetric rotations about q average back to q; a chordal (plain) mean would not be unit length
    rv = torch.tensor([[0.8, 0.0, 0.0], [-0.8, 0.0, 0.0]])
    qs = _qmul(q.expand(2, 4), quat_exp(rv))
    m = quat_mean_about(q, qs)
    torch.testing.assert_close(m, q, rtol=1e-5, atol=1e-6)
    assert float(qs.mean(0).norm()) < 0.93


@pytest.mark.parametrize("quat", [None, slice(3, 7)])
def test_bundle_mean_gradient_goes_to_branches_only(quat):
    main = torch.randn(5, 7).requires_grad_(True)
    branches = main.detach().expand(4, 5, 7).clone().requires_grad_(True)
    out = bundle_mean(main, branches, quat)
    w = torch.randn(5, 7)
    (out * w).sum().backward()
    assert main.grad is None or float(main.grad.abs().max()) == 0.0
    torch.testing.assert_close(branches.grad.sum(0)[:, :3], w[:, :3])
    assert np.isfinite(branches.grad.numpy()).all()
