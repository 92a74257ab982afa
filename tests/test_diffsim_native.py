"""The native backend (Pinocchio ABA + analytic derivatives, bcg_sim.diffsim.native): same physics as the Newton
backend at the same discretization, exact reverse mode, threads, and a policy gradient that agrees with Newton's."""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest
import torch

import bcg_sim.motion
from bcg_sim.diffsim import G1DiffEnv, load_sim_config, make_simulator
from bcg_sim.diffsim.native import (
    NativeSimulator,
    _coords_grad_to_tangent,
    _tangent_grad_to_coords,
    newton_to_pin_velocity,
)


def native_cfg(
    kappa=300.0,
    gains="stand",
    dt=None,
    stable_pd=None,
    implicit_contact=None,
    threads=1,
    spring=None,
    normal_only=True,
    theta=1.0,
):
    """spring: solver.implicit_contact_spring (None: the config's); normal_only: solver.implicit_spring_normal_only;
    theta: solver.implicit_spring_theta."""
    c = load_sim_config().with_kappa(kappa)
    s = dc.replace(
        c.solver,
        threads=threads,
        stable_pd=c.solver.stable_pd if stable_pd is None else stable_pd,
        implicit_contact=c.solver.implicit_contact if implicit_contact is None else implicit_contact,
        implicit_contact_spring=c.solver.implicit_contact_spring if spring is None else spring,
        implicit_spring_normal_only=normal_only,
        implicit_spring_theta=theta,
    )
    return dc.replace(
        c,
        sim_dt=c.sim_dt if dt is None else dt,
        solver=s,
        bcg=dc.replace(c.bcg, enabled=False),
        actuation=dc.replace(c.actuation, gains=gains),
    ).validate()


def targets(sim, steps):
    """Default pose plus 0.05 rad sines: the joints move while the feet carry the robot."""
    d = torch.as_tensor(sim.m.default_joint_q[7:], dtype=torch.float32)
    t = torch.arange(steps, dtype=torch.float32)[:, None] * 0.02
    return d + 0.05 * torch.sin(2 * np.pi * (0.5 + torch.arange(29) / 29.0) * t)


def test_same_discretization_matches_newton():
    """Explicit PD and contact at 0.5 ms: the native backend integrates the same G1, contact law and PD as Newton's
    Featherstone (which adds a small artificial angular damping): body positions agree to 0.1 mm over 1 s."""
    nat = make_simulator(native_cfg(kappa=100.0, dt=0.0005, stable_pd=False, implicit_contact=False), 1)
    new = make_simulator(native_cfg(kappa=100.0).with_backend("newton"), 1)
    qa, va = nat.default_state()
    qb, vb = new.default_state()
    tg = targets(nat, 50)
    with torch.no_grad():
        for k in range(50):
            a, b = nat.step(tg[k][None], qa, va), new.step(tg[k][None], qb, vb)
            qa, va, qb, vb = a.joint_q, a.joint_qd, b.joint_q, b.joint_qd
    assert float((a.body_q[..., :3] - b.body_q[..., :3]).abs().max()) < 1e-4
    assert float((a.foot_force - b.foot_force).abs().max()) < 0.01 * float(b.foot_force.max())


@pytest.mark.parametrize(
    "kappa,substeps,dt,spring,normal_only,theta",
    [
        (50.0, None, None, False, True, 1.0),
        (300.0, None, None, False, True, 1.0),
        (300.0, 4, None, False, True, 1.0),
        (300.0, None, 0.005, True, True, 1.0),
        (1000.0, None, 0.005, True, True, 1.0),
        (300.0, 2, 0.005, True, True, 1.0),
        (300.0, None, 0.005, True, False, 1.0),
        (1000.0, None, 0.005, True, False, 1.0),
        (300.0, None, 0.005, True, True, 0.5),
    ],
)
def test_reverse_mode_is_exact_in_double_precision(kappa, substeps, dt, spring, normal_only, theta):
    """One 2 ms-substep control step standing on the ground (contact, stable PD, implicit contact damping): the
    adjoint of the C++ step equals central finite differences of the same double-precision step -- a loss on the
    last state and on the body poses/twists -- w.r.t. the initial coordinates (quaternion included), velocities
    and PD targets (measured 1e-8 .. 3e-6 relative). Also for a partial step (4 of the 10 substeps, as BCG's
    re-run up to a contact onset), and at 5 ms with the normal spring implicit (solver.implicit_contact_spring,
    backward Euler in contact) at kappa 300 and 1000, whole and partial (2 of 4), its implicit part on the normals
    only (the default) or as an isotropic point mass, and with the trapezoidal spring (theta 0.5)."""
    sim = NativeSimulator(native_cfg(kappa=kappa, dt=dt, spring=spring, normal_only=normal_only, theta=theta), 1)
    q, qd = sim.default_state()
    tgt = targets(sim, 5)
    with torch.no_grad():
        for k in range(5):
            o = sim.step(tgt[k][None], q, qd)
            q, qd = o.joint_q, o.joint_qd
    assert (o.foot_force > 50).all()
    assert_reverse_mode_exact(sim, o.joint_q, o.joint_qd, tgt[-1], substeps=substeps)


@pytest.mark.parametrize("dt,spring", [(None, False), (0.005, True)])
def test_reverse_mode_is_exact_past_the_joint_ranges(dt, spring):
    """In the air, with a knee above its range and an elbow below it (the joint-range stops act): the adjoint
    still equals central finite differences of the double-precision step (2 ms, and 5 ms with the implicit
    contact spring)."""
    from bcg_sim import g1

    sim = NativeSimulator(native_cfg(kappa=300.0, dt=dt, spring=spring), 1)
    q, qd = sim.default_state()
    q[0, 2] += 0.5  # no contact
    lo, hi = g1.joint_limits("29dof")
    names = g1.joint_names("29dof")
    knee, elbow = names.index("left_knee_joint"), names.index("right_elbow_joint")
    q[0, 7 + knee] = hi[knee] + 0.03
    q[0, 7 + elbow] = lo[elbow] - 0.03
    qd[0, 6 + knee] = 0.5  # moving further out
    tgt = targets(sim, 1)[0].clone()
    tgt[knee], tgt[elbow] = q[0, 7 + knee], q[0, 7 + elbow]  # the PD holds them there: only the stops push back
    with torch.no_grad():
        o = sim.step(tgt[None], q, qd)
    assert o.joint_q[0, 7 + knee] < hi[knee] + 0.02 and o.joint_q[0, 7 + elbow] > lo[elbow] - 0.02
    assert_reverse_mode_exact(sim, q, qd, tgt)


def assert_reverse_mode_exact(sim, q_t, qd_t, tgt, substeps=None, params=None):
    """The C++ adjoint of one control step from (q_t, qd_t) [1, ...] under targets tgt [29] equals central finite
    differences of the double-precision step, for a loss on the last state and the body poses/twists, w.r.t.
    the initial coordinates (quaternion included), velocities and PD targets. substeps: a partial step's
    substep count (None: the whole step). params: per-world constants (WorldParams of 1 world; None: the model's)."""
    nsub = None if substeps is None else np.array([substeps], dtype=np.int32)
    wargs = sim.world_arrays(params)
    end = sim.substeps if substeps is None else substeps
    q = q_t.double().numpy().copy()
    v = newton_to_pin_velocity(q_t, qd_t, sim._root_com).double().numpy().copy()
    t = tgt[None].double().numpy().copy()
    rng = np.random.default_rng(0)
    wq, wv = rng.standard_normal(36), rng.standard_normal(35)
    wbq, wbqd = rng.standard_normal((1, 30, 7)), 0.1 * rng.standard_normal((1, 30, 6))

    def loss(q_, v_, t_):
        tq, tv, _, _, _, _, bq, bqd = sim._forward(
            np.ascontiguousarray(t_), np.ascontiguousarray(q_), np.ascontiguousarray(v_), nsub, wargs
        )
        return float(tq[0, end] @ wq + tv[0, end] @ wv + (bq * wbq).sum() + (bqd * wbqd).sum()), tq, tv

    _, tq, tv = loss(q, v, t)
    g_tan = _coords_grad_to_tangent(torch.as_tensor(tq[:, end]), torch.as_tensor(wq[None])).numpy()
    gq, gv, gt = sim._backward(
        tq, tv, t, np.ascontiguousarray(g_tan), np.ascontiguousarray(wv[None]), wbq, wbqd, nsub, wargs
    )
    gq = _tangent_grad_to_coords(torch.as_tensor(q), torch.as_tensor(gq)).numpy()
    eps = 1e-7
    for which, x, g in (("q", q, gq), ("v", v, gv), ("target", t, gt)):
        fd = np.empty(x.shape[1])
        for j in range(x.shape[1]):
            xp, xm = x.copy(), x.copy()
            xp[0, j] += eps
            xm[0, j] -= eps
            args = {"q": lambda y: (y, v, t), "v": lambda y: (q, y, t), "target": lambda y: (q, v, y)}[which]
            fd[j] = (loss(*args(xp))[0] - loss(*args(xm))[0]) / (2 * eps)
        assert np.abs(fd - g[0]).max() < 1e-4 * np.abs(fd).max(), which


@pytest.mark.parametrize("normal_only,theta", [(True, 1.0), (False, 1.0), (True, 0.5)])
def test_reverse_mode_is_exact_landing_and_sliding_with_the_implicit_spring(normal_only, theta):
    """5 ms substeps, normal spring implicit, kappa 300: a world 1 mm above the floor moving down at 0.3 m/s and
    sideways at 0.4 m/s lands and slides within the step (soles switch on mid-step; friction on its capped
    branch): the adjoint still equals central finite differences of the double-precision step."""
    sim = NativeSimulator(native_cfg(kappa=300.0, dt=0.005, spring=True, normal_only=normal_only, theta=theta), 1)
    q, qd = sim.default_state()
    with torch.no_grad():
        o = sim.step(targets(sim, 1), q, qd)  # settle onto the floor
    q, qd = o.joint_q.clone(), o.joint_qd.clone()
    q[0, 2] += 0.001
    qd[0, 0], qd[0, 2] = 0.4, -0.3
    with torch.no_grad():
        o = sim.step(targets(sim, 1), q, qd)
    assert (o.foot_force_peak > 50).all() and float(o.joint_q[0, 0] - q[0, 0]) > 0.002  # landed and slid
    assert_reverse_mode_exact(sim, q, qd, targets(sim, 1)[0])


@pytest.mark.parametrize("dt,spring", [(None, False), (0.005, True)])
def test_partial_steps_compose_and_report_the_contact_onset(dt, spring):
    """A world dropped 4 cm: in the step where its first foot lands mid-step, foot_onset k says where --
    k - 1 substeps leave that sole unloaded, k load it -- and j then S - j substeps give the whole step (to the
    float32 rounding of the state in between); 0 substeps give the input state back; bad counts are errors.
    At 2 ms (10 substeps) and at 5 ms with the implicit contact spring (4 substeps: the onset is found to the
    5 ms substep, and BCG's branches start at state k - 1, up to 5 ms before the sole touches)."""
    sim = NativeSimulator(native_cfg(kappa=300.0, dt=dt, spring=spring), 1, any_batch=True)
    S = sim.substeps
    q, qd = sim.default_state()
    q[0, 2] += 0.04
    tgt = targets(sim, 1)
    with torch.no_grad():
        for _ in range(10):
            o = sim.step(tgt, q, qd)
            if (o.foot_onset >= 2).any():
                break
            assert (o.foot_onset == -1).all()  # in the air before
            q, qd = o.joint_q, o.joint_qd
        f = int((o.foot_onset[0] >= 2).nonzero()[0])
        k = int(o.foot_onset[0, f])
        assert 2 <= k <= S
        assert sim.step(tgt, q, qd, substeps=[k - 1]).foot_force[0, f] == 0.0
        assert sim.step(tgt, q, qd, substeps=[k]).foot_force[0, f] > 0.0
        part = sim.step(tgt, q, qd, substeps=[k - 1])
        rest = sim.step(tgt, part.joint_q, part.joint_qd, substeps=[S - k + 1])
        torch.testing.assert_close(rest.joint_q, o.joint_q, rtol=0, atol=1e-5)
        torch.testing.assert_close(rest.joint_qd, o.joint_qd, rtol=0, atol=1e-4)
        torch.testing.assert_close(rest.body_q, o.body_q, rtol=0, atol=1e-5)
        same = sim.step(tgt, q, qd, substeps=[0])
        torch.testing.assert_close(same.joint_q, q, rtol=0, atol=1e-6)
        torch.testing.assert_close(same.joint_qd, qd, rtol=0, atol=1e-5)
        for bad in ([S + 1], [-1], [1, 2]):
            with pytest.raises(ValueError, match="substeps"):
                sim.step(tgt, q, qd, substeps=bad)


def test_threads_give_identical_results():
    one = make_simulator(native_cfg(threads=1), 4)
    two = make_simulator(native_cfg(threads=2), 4)
    out = []
    for sim in (one, two):
        q, qd = sim.default_state()
        q[:, 2] += torch.linspace(0.0, 0.05, 4)
        t = torch.as_tensor(sim.m.default_joint_q[7:], dtype=torch.float32).expand(4, -1).clone().requires_grad_(True)
        o = sim.step(t, q, qd)
        (o.body_q[..., 2].sum() + o.joint_qd.sum()).backward()
        out.append((o.joint_q, t.grad))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])


def policy_gradient(cfg, first_frame: int = 0) -> torch.Tensor:
    """Gradient [29 * 65 + 29] of a linear policy's loss over 8 control steps from `run` frames first_frame + 8k
    (k < 8): joint tracking plus body heights. Also docs/results/sim/implicit_spring_theta.py's measure."""
    clip = bcg_sim.motion.load("run")
    frames = torch.arange(first_frame, first_frame + 64, 8)
    ref = torch.as_tensor(clip.joint_pos, dtype=torch.float32)
    env = G1DiffEnv(cfg, len(frames))
    torch.manual_seed(0)
    pol = torch.nn.Linear(29 * 2 + 7, 29)
    with torch.no_grad():
        pol.weight.mul_(0.1)
        pol.bias.zero_()
    env.reset(motion=clip, frames=frames)
    s, loss = env.state, 0.0
    for t in range(8):
        out = env.step(pol(torch.cat([s.joint_pos, s.joint_vel, s.root_quat_w, s.root_ang_vel_w], -1)))
        s = out.state
        f = frames + round((t + 1) * cfg.control_dt * clip.fps)
        loss = loss + ((s.joint_pos - ref[f]) ** 2).sum() + (out.body_pos_w[..., 2] ** 2).sum()
    loss.backward()
    return torch.cat([p.grad.flatten() for p in pol.parameters()])


def test_policy_gradient_agrees_with_newton():
    """8 control steps of a linear policy from 8 `run` frames, kappa 300, the motors' gains. Reference: the exact
    gradient of the fine discretization (native, 0.5 ms, explicit PD and contact -- the same dynamics as Newton's).
    The default native gradient (2 ms, implicit PD and contact damping) points the way Newton's does, and is no
    further from the reference than twice Newton's own distance (Newton's tape gradient is approximate: it replays
    per-substep matrices; docs/sim.md). Measured: cos 0.991; relative distance 0.044 (native) vs 0.119 (Newton)."""
    native = policy_gradient(native_cfg(gains="policy"))
    newton = policy_gradient(native_cfg(gains="policy").with_backend("newton"))
    exact = policy_gradient(native_cfg(gains="policy", dt=0.0005, stable_pd=False, implicit_contact=False))
    rel = lambda g: float((g - exact).norm() / exact.norm())  # noqa: E731
    cos = float(torch.nn.functional.cosine_similarity(native, newton, dim=0))
    assert cos > 0.9, cos
    assert rel(native) < 2.0 * rel(newton), (rel(native), rel(newton))


def test_native_runs_on_cpu_only():
    from bcg_sim.config import ConfigError

    with pytest.raises(ConfigError, match="CPU only"):
        NativeSimulator(dc.replace(native_cfg(), device="cuda:0"), 1)


def test_rollouts_do_not_accumulate_memory():
    """Regression: an output tensor kept on the autograd ctx kept every step's graph alive (~5 MB per
    64-world x 16-step rollout here, ~8 MB per SHAC iteration, 7 GB peak after a 30-minute run). Resident
    memory after 8 more rollouts must stay within a fraction of what they would leak."""
    import gc

    def rss_mb() -> float:
        with open("/proc/self/status") as f:
            return int(f.read().split("VmRSS:")[1].split()[0]) / 1024.0

    sim = NativeSimulator(native_cfg(kappa=300.0, gains="policy"), 64)
    q0, qd0 = sim.default_state()

    def rollout():
        target = q0[:, 7:].clone().requires_grad_(True)
        q, qd = q0, qd0
        for _ in range(16):
            out = sim.step(target, q, qd)
            q, qd = out.joint_q, out.joint_qd
        (q.sum() + qd.sum()).backward()
        sim.new_rollout()
        gc.collect()

    for _ in range(3):  # allocator warm-up
        rollout()
    before = rss_mb()
    for _ in range(8):
        rollout()
    assert rss_mb() - before < 15.0, f"{rss_mb() - before:.1f} MB more after 8 rollouts"


def test_worlds_without_incoming_gradient_are_skipped_exactly():
    """The reverse pass runs only for worlds that receive a gradient (a world replaced by its BCG bundle mean
    receives none): the other worlds' gradients equal those of a simulator holding only them (bitwise), and the
    skipped world's are zero."""
    clip = bcg_sim.motion.load("run")
    env = G1DiffEnv(native_cfg(gains="policy"), 3)
    env.reset(motion=clip, frames=torch.tensor([10, 30, 50]))
    q0, qd0 = env.joint_q.clone(), env.joint_qd.clone()

    def grads(sim, rows):
        q, qd = q0[rows].clone().requires_grad_(True), qd0[rows].clone().requires_grad_(True)
        tgt = targets(sim, 1)[0].expand(len(rows), -1).clone().requires_grad_(True)
        o = sim.step(tgt, q, qd)
        keep = torch.tensor([r in (0, 2) for r in rows], dtype=torch.float32)[:, None]
        loss = ((o.joint_q[:, :3] ** 2 + o.body_q[:, :, 2].sum(-1, keepdim=True)) * keep).sum() + (
            o.joint_qd * keep
        ).sum()
        loss.backward()
        return tgt.grad, q.grad, qd.grad

    full = grads(NativeSimulator(env.cfg, 3), [0, 1, 2])
    pair = grads(NativeSimulator(env.cfg, 2), [0, 2])
    for a, b in zip(full, pair):
        assert torch.equal(a[[0, 2]], b)
        assert torch.equal(a[1], torch.zeros_like(a[1])) and bool(b.abs().sum() > 0)
