"""bcg_sim.diffsim: config validation, state conventions, gradients vs finite differences, standing,
falling, per-world resets and termination -- on both backends (native Pinocchio and Newton; CPU, small N,
short horizons)."""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest
import torch

from bcg_sim.config import ConfigError
from bcg_sim.diffsim import (
    G1DiffEnv,
    SimState,
    Simulator,
    from_newton,
    load_sim_config,
    make_simulator,
    sim_config_from_dict,
    to_newton,
)
from bcg_sim.motion import Motion

# A *passive* PD at the motors' policy gains cannot balance the G1 (ankle kp 28 N m/rad << m g h ~ 220 N m/rad;
# it falls in MuJoCo too), so the tests use the bring-up gains bcg_sim.g1.stand_gains() (docs/sim.md).


BACKENDS = ["native", "newton"]


def cfg_with(
    kappa: float = 100.0,
    gains: str = "stand",
    kp_scale: float = 1.0,
    kd_scale: float = 1.0,
    bcg: bool = False,
    backend: str = "native",
):
    c = load_sim_config().with_backend(backend)
    c = dc.replace(
        c,
        actuation=dc.replace(c.actuation, gains=gains, kp_scale=kp_scale, kd_scale=kd_scale),
        bcg=dc.replace(c.bcg, enabled=bcg),
    )
    return c.with_kappa(kappa)


def default_target(sim) -> torch.Tensor:
    return torch.as_tensor(sim.m.default_joint_q[7:], dtype=torch.float32).expand(sim.num_worlds, -1).clone()


# ------------------------------------------------------------------------------------------- config


def newton(patch: dict) -> dict:
    """config/sim.yaml on the newton backend (what with_backend("newton") sets) as a mapping, with `patch`."""
    out = {
        "backend": "newton",
        "sim_dt": 0.0005,
        "solver": {"stable_pd": False, "implicit_contact": False},
        "bcg": {"start": "step"},
    }
    for key, value in patch.items():
        out[key] = {**out[key], **value} if isinstance(value, dict) and key in out else value
    return out


def test_config_file_loads_and_derives_contact_law():
    c = load_sim_config()
    assert c.backend == "native" and c.substeps == round(c.control_dt / c.sim_dt) == 10
    assert c.contact.ke == pytest.approx(1000.0 * c.contact.kappa)
    assert c.contact.kd == pytest.approx(2 * c.contact.damping_ratio * np.sqrt(c.contact.ke * c.contact.effective_mass))
    n = c.with_backend("newton")
    assert n.sim_dt == c.solver.max_stable_dt == 0.0005 and n.substeps == 40
    assert not n.solver.stable_pd and not n.solver.implicit_contact


@pytest.mark.parametrize(
    "patch, key",
    [
        ({"bcg": {"branches": 0}}, "bcg.branches"),
        ({"bcg": {"sigma": -0.01}}, "bcg.sigma"),
        ({"bcg": {"sigma_v": -1.0}}, "bcg.sigma_v"),
        ({"bcg": {"horizon": 0}}, "bcg.horizon"),
        ({"bcg": {"branches": 3, "antithetic": True, "pool_size": 9}}, "bcg.branches"),
        ({"contact": {"kappa": 0.0}}, "contact.kappa"),
        ({"contact": {"kappa": -50.0}}, "contact.kappa"),
        (newton({"sim_dt": 0.001}), "sim_dt"),  # above Newton's stable bound
        (newton({"solver": {"stable_pd": True}}), "solver.stable_pd"),
        ({"backend": "newton"}, "solver.stable_pd"),  # sim.yaml's implicit PD is the native backend's
        ({"backend": "warp"}, "backend"),
        ({"solver": {"threads": 0}}, "solver.threads"),
        ({"sim_dt": 0.0003}, "sim_dt"),  # 20 ms is not a whole number of 0.3 ms substeps
        ({"bcg": {"pool": 3}}, "pool"),  # unknown key
        ({"bcg": {"branches": 4, "pool_size": 6}}, "bcg.pool_size"),
        ({"actuation": {"gains": "soft"}}, "actuation.gains"),
        ({"bcg": {"start": "touchdown"}}, "bcg.start"),
        ({"solver": {"implicit_contact": False, "implicit_contact_spring": True}}, "solver.implicit_contact_spring"),
        ({"solver": {"implicit_spring_theta": 0.4}}, "solver.implicit_spring_theta"),  # not stable below 0.5
        (newton({"bcg": {"start": "contact"}}), "bcg.start"),  # no partial steps on newton
    ],
)
def test_bad_config_raises_clear_error(patch, key):
    """A key left out of the mapping is config/sim.yaml's; one bad key is a ConfigError naming it."""
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        sim_config_from_dict(patch)


def test_dataclass_defaults_are_sim_yaml():
    """config/sim.yaml and SimConfig's defaults say the same (each default has one value), and the newton
    patch above is a valid config: its cases fail on their own key only."""
    from bcg_sim.diffsim import SimConfig

    assert SimConfig() == load_sim_config()
    assert sim_config_from_dict(newton({})) == load_sim_config().with_backend("newton")


def test_newton_backend_bundles_from_the_step_start():
    """config/sim.yaml starts branches at the contact onset (native); on newton the same config starts them at
    the touchdown step's start, which its simulator can re-run."""
    c = load_sim_config()
    assert c.backend == "native" and c.bcg.start == "contact"
    assert c.with_backend("newton").bcg.start == "step"


def test_stiff_contact_tightens_dt_bound():
    c = load_sim_config().with_backend("newton")
    with pytest.raises(ConfigError, match="stable bound"):
        c.with_kappa(1e5)  # omega = sqrt(1e8) -> 0.2 * 2 / omega = 0.04 ms < 0.5 ms


def test_native_dt_above_computed_bound_is_a_clear_error():
    """The native bound is computed from the robot (sole effective masses, kappa, damping): 2 ms is inside it
    at kappa 300 and outside at kappa 600, and the error names the bound."""
    from bcg_sim.diffsim import make_simulator

    ok = make_simulator(cfg_with(kappa=300.0, gains="policy"), 1)
    assert 0.002 <= 0.9 * ok.stable_dt < 0.004
    with pytest.raises(ConfigError, match=r"sim_dt: 2 ms is above the native backend's bound 1\.\d+ ms"):
        make_simulator(cfg_with(kappa=600.0, gains="policy"), 1)


def test_implicit_contact_spring_lifts_the_contact_bound():
    """With the normal spring implicit too (backward Euler in contact) no contact mode bounds the substep: 5 ms
    passes at kappa 1000 (2 ms is refused there without it); what is left is the PD's explicit spring and, with
    stable_pd_exact_damping, kd - dt kp >= 0 (stand gains: ankle 5 / 300 = 16.7 ms), named in the one-line error."""
    from bcg_sim.diffsim import make_simulator

    def spring(kappa, gains, dt):
        c = cfg_with(kappa=kappa, gains=gains)
        return dc.replace(c, sim_dt=dt, solver=dc.replace(c.solver, implicit_contact_spring=True)).validate()

    for gains in ("policy", "stand"):
        sim = make_simulator(spring(1000.0, gains, 0.005), 1)
        assert 0.9 * sim.stable_dt >= 0.005
    assert make_simulator(spring(1000.0, "stand", 0.005), 1).stable_dt == pytest.approx(5.0 / 300.0, rel=1e-6)
    with pytest.raises(ConfigError, match=r"^sim config: sim_dt: 20 ms is above the native backend's bound 16\.7 ms"):
        make_simulator(spring(300.0, "stand", 0.02), 1)


# ----------------------------------------------------------------------------------------- state


def test_state_conventions_round_trip():
    n = 3
    g = torch.Generator().manual_seed(0)
    quat = torch.randn(n, 4, generator=g)
    quat = quat / quat.norm(dim=-1, keepdim=True)
    s = SimState(
        torch.randn(n, 3, generator=g),
        quat,
        torch.randn(n, 3, generator=g),
        torch.randn(n, 3, generator=g),
        torch.randn(n, 29, generator=g),
        torch.randn(n, 29, generator=g),
    )
    com = torch.tensor([0.0, 0.0, -0.07605])
    q, qd = to_newton(s, com)
    assert q.shape == (n, 36) and qd.shape == (n, 35)
    assert torch.equal(q[:, 3:7], torch.cat([quat[:, 1:], quat[:, :1]], -1))  # Newton: x y z w
    back = from_newton(q, qd, com)
    for a, b in zip(s.as_tuple(), back.as_tuple()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_root_velocity_is_pelvis_origin_velocity(backend):
    """A pure spin about the pelvis origin: the origin does not move, the COM (below it) does."""
    env = G1DiffEnv(cfg_with(backend=backend), 1)
    s = env.state
    s.root_pos_w[:, 2] += 1.0  # in the air
    s.root_ang_vel_w[:] = torch.tensor([1.0, 0.0, 0.0])
    env.reset(state=s)
    v_com = env.joint_qd[0, :3]
    assert v_com.abs().max() > 0.05  # the COM moves: Newton's free-joint velocity is the COM's
    torch.testing.assert_close(env.state.root_lin_vel_w, torch.zeros(1, 3), atol=1e-6, rtol=0)


# ------------------------------------------------------------------------------------- gradients


def _fd_check(sim, q0, qd0, steps: int, eps: float, components, seed: int = 0):
    """(autograd, central FD) of a random linear loss of the final joint_q, joint_qd, body_q after `steps`
    control steps w.r.t. the first step's PD target, for the listed target components."""
    g = torch.Generator().manual_seed(seed)
    n = sim.num_worlds
    wq, wqd = torch.randn(n, 36, generator=g), 0.1 * torch.randn(n, 35, generator=g)
    wb = torch.randn(n, 30, 7, generator=g)
    tgt0 = default_target(sim)

    def loss(first_target):
        q, qd, t = q0, qd0, first_target
        for _ in range(steps):
            o = sim.step(t, q, qd)
            q, qd, t = o.joint_q, o.joint_qd, tgt0
        return (wq * q).sum() + (wqd * qd).sum() + (wb * o.body_q).sum()

    t = tgt0.clone().requires_grad_(True)
    sim.new_rollout()
    loss(t).backward()
    ad, fd = [], []
    with torch.no_grad():
        for j in components:
            tp, tm = tgt0.clone(), tgt0.clone()
            tp[0, j] += eps
            tm[0, j] -= eps
            fd.append(float((loss(tp) - loss(tm)) / (2 * eps)))
            ad.append(float(t.grad[0, j]))
    return np.array(ad), np.array(fd)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_in_air_matches_finite_differences(backend):
    """Joint motion in the air over two control steps: tight tolerance, 0.5 % of the largest component
    (measured error ~1e-4 of it; float32 central differences are the floor)."""
    sim = make_simulator(cfg_with(backend=backend), 1)
    q0, qd0 = sim.default_state()
    q0[:, 2] += 1.0
    ad, fd = _fd_check(sim, q0, qd0, steps=2, eps=1e-2, components=[0, 3, 6, 9, 13, 15, 20, 27])
    scale = np.abs(fd).max()
    assert scale > 0.1
    np.testing.assert_allclose(ad, fd, rtol=0, atol=5e-3 * scale)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_in_foot_contact_kappa300_matches_finite_differences(backend):
    """Standing on stiff contact (kappa = 300 kN/m), one control step: loose tolerance, 10 % of the largest
    component (measured newton 1-3 %, native 0.06 %: float32 FD is noisy)."""
    sim = make_simulator(cfg_with(kappa=300.0, backend=backend), 1)
    q0, qd0 = sim.default_state()
    with torch.no_grad():  # settle onto the ground first
        for _ in range(5):
            o = sim.step(default_target(sim), q0, qd0)
            q0, qd0 = o.joint_q, o.joint_qd
    assert (o.foot_force > 50).all(), "both feet should carry load"
    ad, fd = _fd_check(sim, q0, qd0, steps=1, eps=1e-3, components=[0, 3, 4, 6, 9, 10])
    scale = np.abs(fd).max()
    assert scale > 0.1
    np.testing.assert_allclose(ad, fd, rtol=0, atol=0.1 * scale)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_reaches_every_step_of_a_rollout(backend):
    """Actions of every control step of a 4-step rollout get a nonzero gradient, and a reset of another
    world does not cut it."""
    env = G1DiffEnv(cfg_with(backend=backend), 2)
    acts = [torch.zeros(2, 29, requires_grad=True) for _ in range(4)]
    loss = 0.0
    for t, a in enumerate(acts):
        out = env.step(a)
        loss = loss + out.body_pos_w[0, :, 2].sum() + out.state.joint_pos[0].sum()
        if t == 1:
            env.reset([1])
    loss.backward()
    for a in acts:
        assert torch.isfinite(a.grad).all()
        assert a.grad[0].abs().max() > 0
        assert a.grad[1].abs().max() == 0  # world 1 does not enter the loss


def test_backward_after_new_rollout_raises():
    """Newton recycles tape buffers across rollouts (the native backend keeps each step's states in its graph)."""
    sim = Simulator(cfg_with(backend="newton"), 1)
    q, qd = sim.default_state()
    t = default_target(sim).requires_grad_(True)
    o = sim.step(t, q, qd)
    sim.new_rollout()
    sim.step(default_target(sim).requires_grad_(True), q, qd)  # reuses the same buffers
    with pytest.raises(RuntimeError, match="reused"):
        o.joint_q.sum().backward()


# -------------------------------------------------------------------------------------- physics


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kappa", [50.0, 100.0, 300.0])
def test_holds_default_pose_for_5s(kappa, backend):
    assert_holds_5s(cfg_with(kappa=kappa, backend=backend))


@pytest.mark.parametrize("normal_only", [True, False])
@pytest.mark.parametrize("dt", [0.004, 0.005])
@pytest.mark.parametrize("kappa", [50.0, 100.0, 300.0, 1000.0])
def test_holds_default_pose_for_5s_with_implicit_contact_spring(kappa, dt, normal_only):
    """Native, normal spring implicit (solver.implicit_contact_spring, on the normals only or isotropic): 4 and
    5 ms substeps stand 5 s at every kappa, 1000 included (the explicit spring's bound is 2.6 ms at kappa 300 and
    1.4 ms at 1000)."""
    c = cfg_with(kappa=kappa)
    s = dc.replace(c.solver, implicit_contact_spring=True, implicit_spring_normal_only=normal_only)
    assert_holds_5s(dc.replace(c, sim_dt=dt, solver=s).validate())


@pytest.mark.parametrize("kappa", [50.0, 100.0, 300.0])
def test_holds_default_pose_for_5s_with_the_trapezoidal_spring(kappa):
    """solver.implicit_spring_theta 0.5 (half the backward-Euler spring's numerical damping) stands 5 s at 5 ms up
    to kappa 300. (At kappa 1000 it creeps 25 mm in 5 s, against 0.5 mm at theta 1: measured, not asserted.)"""
    c = cfg_with(kappa=kappa)
    s = dc.replace(c.solver, implicit_contact_spring=True, implicit_spring_theta=0.5)
    assert_holds_5s(dc.replace(c, sim_dt=0.005, solver=s).validate())


def assert_holds_5s(cfg):
    sim = make_simulator(cfg, 1)
    q, qd = sim.default_state()
    q_start = q.clone()
    tgt = default_target(sim)
    with torch.no_grad():
        for _ in range(int(5.0 * cfg.control_hz)):
            o = sim.step(tgt, q, qd)
            q, qd = o.joint_q, o.joint_qd
    assert torch.isfinite(q).all() and torch.isfinite(qd).all()
    assert abs(float(q[0, 2] - q_start[0, 2])) < 0.02  # pelvis height [m]
    assert float((q[0, :2] - q_start[0, :2]).norm()) < 0.05  # horizontal creep [m]
    assert float((q[0, 7:] - q_start[0, 7:]).abs().max()) < 0.1  # joints [rad]
    assert float(q[0, 6].abs()) > 0.995  # upright: quaternion w (x y z w layout)
    assert (o.foot_force > 50).all() and (o.foot_penetration < 0.005).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_unactuated_g1_falls_without_nan(backend):
    cfg = cfg_with(kappa=100.0, kp_scale=0.0, kd_scale=0.0, backend=backend)
    env = G1DiffEnv(cfg, 1)
    zero = torch.zeros(1, 29)
    fell_at = None
    with torch.no_grad():
        for t in range(int(2.0 * cfg.control_hz)):
            out = env.step(zero)
            assert torch.isfinite(env.joint_q).all() and torch.isfinite(env.joint_qd).all()
            if fell_at is None and out.fell[0]:
                fell_at = t
    assert fell_at is not None, "a limp robot must collapse below termination.min_root_height"
    assert float(env.state.root_pos_w[0, 2]) > 0.0  # the body spheres keep the pelvis above the floor


# ------------------------------------------------------------------------------- reset/termination


def _still_motion(env: G1DiffEnv, frames: int = 20, dz: float = 0.0) -> Motion:
    s = env.state
    rep = lambda x: np.repeat(x.detach().numpy()[:1].astype(np.float64), frames, axis=0)  # noqa: E731
    root = rep(s.root_pos_w)
    root[:, 2] += dz
    return Motion(
        name="still",
        fps=50.0,
        root_pos_w=root,
        root_quat_w=rep(s.root_quat_w),
        joint_pos=rep(s.joint_pos),
        root_lin_vel_w=np.zeros((frames, 3)),
        root_ang_vel_w=np.zeros((frames, 3)),
        joint_vel=np.zeros((frames, 29)),
    )


def test_per_world_reset_leaves_other_worlds_untouched():
    env = G1DiffEnv(cfg_with(), 3)
    with torch.no_grad():
        for _ in range(3):
            env.step(0.3 * torch.ones(3, 29))
    before_q, before_qd = env.joint_q.clone(), env.joint_qd.clone()
    motion = _still_motion(env, dz=0.2)
    env.reset([1], motion=motion, frames=[5])
    assert torch.equal(env.joint_q[[0, 2]], before_q[[0, 2]]) and torch.equal(env.joint_qd[[0, 2]], before_qd[[0, 2]])
    torch.testing.assert_close(env.state.root_pos_w[1], torch.as_tensor(motion.root_pos_w[5], dtype=torch.float32))
    torch.testing.assert_close(env.state.joint_pos[1], torch.as_tensor(motion.joint_pos[5], dtype=torch.float32))


def test_reset_from_builtin_clip_frames():
    """Reset worlds at arbitrary frames of a built-in reference clip: the state is the clip's, in bcg's
    convention (w x y z, pelvis-origin velocity), and stepping from it stays finite."""
    import bcg_sim.motion

    clip = bcg_sim.motion.load("run")
    env = G1DiffEnv(cfg_with(), 2)
    frames = [0, clip.num_frames // 2]
    env.reset(motion=clip, frames=frames)
    s = env.state
    for name in ("root_pos_w", "root_quat_w", "root_lin_vel_w", "root_ang_vel_w", "joint_pos", "joint_vel"):
        ref = getattr(clip, name)
        if ref is not None:
            torch.testing.assert_close(
                getattr(s, name), torch.as_tensor(ref[frames], dtype=torch.float32), rtol=1e-4, atol=1e-4, msg=name
            )
    with torch.no_grad():
        out = env.step(torch.zeros(2, 29))
    assert torch.isfinite(env.joint_q).all() and not out.tracking_failed.any()


def test_termination_signals():
    env = G1DiffEnv(cfg_with(), 3)
    motion = _still_motion(env)
    motion.root_pos_w[1:, 0] += 1.0  # the clip jumps 1 m forward after frame 0
    env.reset(motion=motion, frames=[5, 5, 0])  # world 2 starts at frame 0: next frame is 1 m away
    s = env.state
    lying = SimState(*(t[[1]].clone() for t in s.as_tuple()))
    lying.root_pos_w[0, 2] = 0.2  # on its back, pelvis below termination.min_root_height
    lying.root_quat_w[0] = torch.tensor([np.cos(np.pi / 4), 0.0, -np.sin(np.pi / 4), 0.0])
    env.reset([1], state=lying)  # a state reset: world 1 no longer tracks the clip
    with torch.no_grad():
        out = env.step(torch.zeros(3, 29))
    assert out.fell.tolist() == [False, True, False]
    assert out.tracking_failed.tolist() == [False, False, True]
    assert out.terminated.tolist() == [False, True, True]


def test_bad_inputs_raise():
    env = G1DiffEnv(cfg_with(), 2)
    with pytest.raises(ValueError, match="actions"):
        env.step(torch.zeros(2, 28))
    with pytest.raises(IndexError):
        env.reset([5])
    with pytest.raises(ValueError, match="frames"):
        env.reset([0], motion=_still_motion(env), frames=[100])
