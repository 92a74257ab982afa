"""Bundled Contact Gradients: zero-radius bundles reproduce the unbundled rollout and gradient exactly,
worlds outside a bundle are untouched, a linear system bundles to its unperturbed mean, a full pool falls
back to the unbundled step, and the quaternion mean is sign-safe. Real Newton worlds unless stated."""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest
import torch

from bcg_sim.config import ConfigError
from bcg_sim.diffsim import Bundler, G1DiffEnv, bundle_mean, load_sim_config, quat_mean_about, sample_ball
from bcg_sim.diffsim.bundle import LegJacobian
from bcg_sim.quat import exp_smooth, multiply

STEPS = 8  # control steps; the dropped world touches down in step 5


def make_env(
    n: int,
    *,
    sigma=0.0,
    sigma_v=0.0,
    enabled=True,
    branches=2,
    horizon=2,
    pool_size=8,
    kappa=300.0,
    perturbation=None,
    start=None,
):
    c = load_sim_config()
    c = dc.replace(
        c,
        actuation=dc.replace(c.actuation, gains="stand"),
        bcg=dc.replace(
            c.bcg,
            enabled=enabled,
            sigma=sigma,
            sigma_v=sigma_v,
            branches=branches,
            horizon=horizon,
            pool_size=pool_size,
            start=start or c.bcg.start,
            perturbation=perturbation or c.bcg.perturbation,
        ),
    ).with_kappa(kappa)
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
        loss = (
            loss
            + out.state.root_pos_w[:, 0].sum()
            + out.body_pos_w[:, 6, 2].sum()
            + 0.01 * out.state.joint_vel.sum()
            + out.body_quat_w[:, 0, 1].sum()
        )
    loss.backward()
    return env.joint_q.detach(), env.joint_qd.detach(), [a.grad.clone() for a in acts], outs


@pytest.mark.parametrize(
    "perturbation,start", [("base", "step"), ("leg", "step"), ("base", "contact"), ("leg", "contact")]
)
def test_zero_radius_bundle_reproduces_unbundled_rollout_and_gradient(perturbation, start):
    q0, qd0, g0, _ = rollout(make_env(2, enabled=False), dropped=[0])
    env = make_env(2, sigma=0.0, sigma_v=0.0, branches=4, horizon=2, perturbation=perturbation, start=start)
    q1, qd1, g1, outs = rollout(env, dropped=[0])
    st = env.bcg_stats()
    assert st.bundles_completed >= 1 and any(o.bundled[0] for o in outs)
    assert st.branch_spread_pos == 0.0
    if start == "step":
        assert st.start_substeps == 0
        assert torch.equal(q0, q1) and torch.equal(qd0, qd1)  # bitwise
        rtol = 1e-5  # the B branch adjoints are summed in another order
    else:
        # the branches start inside the step (the dropped foot lands mid-step), from the re-run first substeps'
        # state rounded to float32, where the unbundled step carried double precision on: equal to that rounding
        assert st.start_substeps > 0
        torch.testing.assert_close(q1, q0, rtol=0, atol=1e-5)
        torch.testing.assert_close(qd1, qd0, rtol=0, atol=1e-4)
        rtol = 1e-4
    for a, b in zip(g0, g1):
        torch.testing.assert_close(a, b, rtol=rtol, atol=rtol * float(a.abs().max()))


@pytest.mark.parametrize("perturbation", ["base", "leg"])
def test_worlds_outside_the_bundle_are_unaffected(perturbation):
    q0, qd0, g0, _ = rollout(make_env(3, enabled=False), dropped=[1])
    env = make_env(3, sigma=0.01, sigma_v=0.1, branches=4, horizon=2, perturbation=perturbation)
    q1, qd1, g1, outs = rollout(env, dropped=[1])
    st = env.bcg_stats()
    assert st.bundles_completed >= 1 and st.branch_spread_pos > 0
    assert not (q0[1] == q1[1]).all()  # the bundled world changed...
    for w in (0, 2):  # ...the others did not, nor did their gradients
        assert torch.equal(q0[w], q1[w]) and torch.equal(qd0[w], qd1[w])
        for a, b in zip(g0, g1):
            assert torch.equal(a[w], b[w])
    assert all(torch.isfinite(g).all() for g in g1)


def test_native_branches_in_one_call_equal_branches_per_chunk():
    """The native backend steps every active bundle in one call; stepping each bundle's chunk on its own
    simulator gives the same rollout and gradients bitwise (worlds are independent in the step). Branches from
    the step start: per-chunk stepping has no partial steps (the newton backend's case)."""
    from bcg_sim.diffsim.native import NativeSimulator

    assert load_sim_config().backend == "native"
    batched = make_env(4, sigma=0.01, sigma_v=0.1, branches=2, horizon=2, pool_size=8, start="step")
    assert batched.bundler.step_batch is not None and batched.pool == []
    q0, qd0, g0, _ = rollout(batched, dropped=[0, 1, 3])
    chunked = make_env(4, sigma=0.01, sigma_v=0.1, branches=2, horizon=2, pool_size=8, start="step")
    chunked.pool = [NativeSimulator(chunked.cfg, 2) for _ in range(4)]
    chunked.bundler.step_batch = None
    q1, qd1, g1, _ = rollout(chunked, dropped=[0, 1, 3])
    st0, st1 = batched.bcg_stats(), chunked.bcg_stats()
    assert st0.bundles_completed >= 2 and st0.pool_slots_used_max >= 4  # bundles ran side by side
    assert st0.as_dict() == st1.as_dict()
    assert torch.equal(q0, q1) and torch.equal(qd0, qd1)
    for a, b in zip(g0, g1):
        assert torch.equal(a, b)


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

    cfg = dc.replace(
        load_sim_config().bcg,
        branches=6,
        horizon=3,
        sigma=0.3,
        sigma_v=0.7,
        pool_size=6,
        antithetic=True,
        perturbation="base",
    )
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
    qs = multiply(q.expand(2, 4), exp_smooth(rv))
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


# ------------------------------------------------------------------------- "leg" perturbation mapping


def _touchdown_state(frame: int = 40):
    """Newton (q [36], qd [35]) of the built-in run clip at `frame` (a bent stance/swing leg pose)."""
    import bcg_sim.motion
    from bcg_sim.diffsim.env import motion_state
    from bcg_sim.diffsim.state import to_newton

    lj = LegJacobian(0.03)
    com = torch.as_tensor(lj.root_com_b, dtype=torch.float32)
    q, qd = to_newton(motion_state(bcg_sim.motion.load("run"), torch.tensor([frame])), com)
    return lj, q[0], qd[0]


def test_leg_jacobian_fk_is_the_simulators():
    """LegJacobian's kinematics (MuJoCo) put the soles where Newton's FK of the same state does, its root CoM
    is Newton's, and its leg indices are Newton's joint coordinates / DoFs of the 12 leg hinges."""
    import newton

    from bcg_sim import g1
    from bcg_sim.diffsim.model import newton_builder

    lj, q, _ = _touchdown_state()
    b = newton_builder("29dof")
    model = b.finalize(device="cpu", requires_grad=False)
    state = model.state()
    state.joint_q.assign(q.numpy())
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    body_q = state.body_q.numpy().astype(np.float64)
    names = [lbl.split("/")[-1] for lbl in b.body_label]
    for foot, name in enumerate(g1.FOOT_BODIES):
        p, quat = body_q[names.index(name), :3], body_q[names.index(name), 3:]  # quat x y z w
        u, w = quat[:3], quat[3]
        t = 2.0 * np.cross(u, lj.sole_b)
        np.testing.assert_allclose(lj.sole_points(q)[foot], p + lj.sole_b + w * t + np.cross(u, t), atol=1e-5)
    np.testing.assert_allclose(lj.root_com_b, model.body_com.numpy()[0], atol=1e-6)
    q_start, qd_start = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    leg = {j: names[int(model.joint_child.numpy()[j])] for j in range(model.joint_count)}
    for foot, side in enumerate(("left", "right")):
        joints = [
            j
            for j, body in leg.items()
            if body.startswith(f"{side}_") and any(k in body for k in ("hip", "knee", "ankle"))
        ]
        assert sorted(lj.legs[foot][1]) == sorted(int(q_start[j]) for j in joints)
        assert sorted(lj.legs[foot][2]) == sorted(int(qd_start[j]) for j in joints)


def test_leg_jacobian_matches_finite_differences_of_the_fk():
    lj, q, _ = _touchdown_state()
    for foot in (0, 1):
        J = lj.jacobian(q, foot)
        _, qi, _ = lj.legs[foot]
        p0 = lj.sole_points(q.double())[foot]
        for k, i in enumerate(qi):  # central differences in float64 coordinates (FK runs in float32)
            qp, qm = q.double().clone(), q.double().clone()
            qp[i] += 1e-3
            qm[i] -= 1e-3
            fd = (lj.sole_points(qp)[foot] - lj.sole_points(qm)[foot]) / 2e-3
            np.testing.assert_allclose(J[:, k], fd, atol=2e-3)
        assert np.abs(p0).max() < 5.0


@pytest.mark.parametrize("foot", [0, 1])
def test_leg_perturbation_moves_only_the_contacting_foot_within_the_ball(foot):
    """'leg': the sole centre moves by the sampled dp (and its velocity by dv) up to linearisation and DLS
    damping error; base coordinates, the other leg and every other joint are untouched (bitwise)."""
    lj, q0, qd0 = _touchdown_state()
    sigma, sigma_v = 0.02, 0.2
    cfg = dc.replace(
        load_sim_config().bcg,
        branches=8,
        horizon=1,
        sigma=sigma,
        sigma_v=sigma_v,
        pool_size=8,
        perturbation="leg",
        leg_damping=0.03,
    )
    bundler = Bundler(cfg, lambda *a: None, quat_slices=(None, None), leg_map=lj)
    assert bundler.trigger(0, foot, q0, qd0)
    b = bundler.bundles[0]
    _, qi, di = lj.legs[foot]
    other = [i for i in range(q0.numel()) if i not in qi]
    other_d = [i for i in range(qd0.numel()) if i not in di]
    assert torch.equal(b.q[:, other], q0[other].expand(8, -1))  # base and other leg untouched
    assert torch.equal(b.qd[:, other_d], qd0[other_d].expand(8, -1))
    p0 = lj.sole_points(q0)
    J = torch.as_tensor(lj.jacobian(q0, foot), dtype=torch.float32)
    for k in range(8):
        p = lj.sole_points(b.q[k])
        np.testing.assert_allclose(p[1 - foot], p0[1 - foot], atol=1e-6)  # the other foot does not move
        disp = p[foot] - p0[foot]
        dp = b.dp[k].numpy()
        # tolerance: DLS damping shrinks the weakest direction (smallest singular value ~0.1 m here ->
        # factor ~0.9) plus second-order FK error |dq|^2 * leg length ~ 1 mm at sigma = 2 cm
        assert np.linalg.norm(disp - dp) <= 0.15 * sigma, (k, disp, dp)
        assert np.linalg.norm(disp) <= 1.1 * sigma
        dv_foot = (J @ (b.qd[k, di] - qd0[di])).numpy()  # velocity map is linear in qd: exact via J
        assert np.linalg.norm(dv_foot - b.dv[k].numpy()) <= 0.15 * sigma_v
        assert np.linalg.norm(dv_foot) <= 1.1 * sigma_v


def test_zero_radius_leg_perturbation_is_exact():
    lj, q0, qd0 = _touchdown_state()
    cfg = dc.replace(load_sim_config().bcg, branches=4, sigma=0.0, sigma_v=0.0, pool_size=4, perturbation="leg")
    bundler = Bundler(cfg, lambda *a: None, quat_slices=(None, None), leg_map=lj)
    q0, qd0 = q0.clone().requires_grad_(True), qd0.clone().requires_grad_(True)
    assert bundler.trigger(0, 1, q0, qd0)
    b = bundler.bundles[0]
    assert torch.equal(b.q, q0.detach().expand(4, -1)) and torch.equal(b.qd, qd0.detach().expand(4, -1))
    (b.q.sum() + b.qd.sum()).backward()  # differentiable w.r.t. the bundled state
    assert torch.equal(q0.grad, torch.full_like(q0, 4.0)) and torch.equal(qd0.grad, torch.full_like(qd0, 4.0))


@pytest.mark.parametrize("bad", [dict(perturbation="foot"), dict(perturbation="leg", leg_damping=0.0)])
def test_bad_perturbation_config_raises(bad):
    c = load_sim_config()
    with pytest.raises(ConfigError, match="bcg"):
        dc.replace(c, bcg=dc.replace(c.bcg, **bad)).validate()


def test_a_landing_bounce_is_one_touchdown_per_foot():
    """Dropped 2 cm onto kappa 300 with the motors' gains, the soles bounce: their end-of-step force dips
    below the trigger while the step's peak stays above it. That is one landing, so one touchdown per foot."""
    c = load_sim_config()
    c = dc.replace(
        c, actuation=dc.replace(c.actuation, gains="policy"), bcg=dc.replace(c.bcg, enabled=False)
    ).with_kappa(300.0)
    env = G1DiffEnv(c, 1)
    s = env.state
    s.root_pos_w[0, 2] += 0.02
    env.reset(state=s)
    per_foot, dips = torch.zeros(2, dtype=torch.long), 0
    dipped = torch.zeros(2, dtype=torch.bool)  # last step: peak above the trigger, end-of-step force below it
    with torch.no_grad():
        for _ in range(40):
            out = env.step(torch.zeros(1, 29))
            per_foot += out.touchdown[0].long()
            peak_hi = out.foot_force_peak[0] > c.bcg.trigger_force
            dips += int((dipped & peak_hi).sum())  # loaded again after an end-of-step dip: a bounce
            dipped = peak_hi & (out.foot_force[0] <= c.bcg.trigger_force)
    assert dips >= 1, "the scenario must bounce, else it tests nothing"
    assert per_foot.tolist() == [1, 1]


def test_rearm_force_must_be_below_the_trigger():
    c = load_sim_config()
    with pytest.raises(ConfigError, match="bcg.rearm_force"):
        dc.replace(c, bcg=dc.replace(c.bcg, rearm_force=c.bcg.trigger_force)).validate()
