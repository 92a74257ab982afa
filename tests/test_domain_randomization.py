"""Per-world physics inside the differentiable simulator (bcg_sim.diffsim.world_params): nominal worlds
are the unrandomized model bit for bit, each parameter moves the dynamics the way physics says, the reverse mode
stays exact under them, BCG branches run their world's constants, and the task draws them reproducibly."""

from __future__ import annotations

import dataclasses as dc

import pytest
import torch
from test_diffsim_native import assert_reverse_mode_exact, native_cfg, targets

from bcg_sim.config import ConfigError
from bcg_sim.diffsim import G1DiffEnv, load_sim_config
from bcg_sim.diffsim.native import NativeSimulator
from bcg_sim.diffsim.world_params import MASS_BODIES, WorldParams

TORSO, PELVIS = MASS_BODIES.index("torso_link"), MASS_BODIES.index("pelvis")


def randomized(n: int, seed: int = 0) -> WorldParams:
    """n worlds, every constant off its nominal value (BeyondMimic-like ranges)."""
    g = torch.Generator().manual_seed(seed)
    p = WorldParams.nominal(n)
    u = lambda lo, hi, *shape: lo + (hi - lo) * torch.rand(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    p.friction_scale = u(0.5, 1.5, n)
    p.kp_scale, p.kd_scale = u(0.85, 1.15, n, 29), u(0.85, 1.15, n, 29)
    p.mass_scale = u(0.85, 1.15, n, len(MASS_BODIES))
    p.com_offset_b[:, TORSO] = (2 * torch.rand(n, 3, generator=g, dtype=torch.float64) - 1) * torch.tensor(
        [0.025, 0.05, 0.05], dtype=torch.float64
    )
    p.friction_slope_scale = u(0.3, 1.0, n)
    return p


def rollout(sim, params, steps=25, q=None, qd=None, tgt=None):
    """`steps` control steps under targets() (or tgt [steps, 29]) from the default state (or q, qd), recording
    gradients w.r.t. the targets; returns (outputs of the last step, the target tensor)."""
    n = sim.num_worlds
    if q is None:
        q, qd = sim.default_state()
    tg = (targets(sim, steps) if tgt is None else tgt)[:, None].expand(-1, n, -1).clone().requires_grad_(True)
    for k in range(steps):
        o = sim.step(tg[k], q, qd, params=params)
        q, qd = o.joint_q, o.joint_qd
    return o, tg


def test_nominal_worlds_equal_the_unrandomized_model_bit_for_bit():
    """In a batch whose other worlds are randomized, a world given the nominal constants runs exactly the
    unrandomized model over 25 control steps in contact (state, body outputs and the gradient w.r.t. its PD
    targets); two worlds given the same non-nominal constants are identical to each other; all-nominal params
    take the model's own path."""
    sim = NativeSimulator(native_cfg(kappa=300.0), 3)
    p = randomized(3)
    p.put([0], WorldParams.nominal(1))
    p.put([2], p.take([1]))
    ref, tg_ref = rollout(sim, None)
    out, tg = rollout(sim, p)
    (ref.joint_q[:, 2].sum() + ref.body_q[..., 2].sum()).backward()
    (out.joint_q[:, 2].sum() + out.body_q[..., 2].sum()).backward()
    for a, b in ((out.joint_q, ref.joint_q), (out.joint_qd, ref.joint_qd), (out.body_q, ref.body_q)):
        assert torch.equal(a[0], b[0])
    assert torch.equal(tg.grad[:, 0], tg_ref.grad[:, 0])  # [steps, 29]: d loss / d targets of world 0
    assert torch.equal(out.joint_q[1], out.joint_q[2]) and torch.equal(tg.grad[:, 1], tg.grad[:, 2])
    assert float((out.joint_q[1] - ref.joint_q[1]).detach().abs().max()) > 1e-3  # world 1 is another robot
    assert sim.world_arrays(WorldParams.nominal(3)) is None


def shoved_feet(sim, o, hold, params, v: float) -> torch.Tensor:
    """From step output `o`: add v [m/s] sideways (y) to every world, hold the targets for 10 control steps under
    `params`; the feet's mean y displacement [N] (m)."""
    q, qd = o.joint_q, o.joint_qd.clone()
    qd[:, 1] += v
    foot = list(sim.m.foot_body)
    start = o.body_q[:, foot, 1].clone()
    with torch.no_grad():
        for _ in range(10):
            o = sim.step(hold, q, qd, params=params)
            q, qd = o.joint_q, o.joint_qd
    return (o.body_q[:, foot, 1] - start).mean(-1)


def test_lower_friction_slides_farther_under_the_same_push():
    """The G1 standing, then shoved sideways at 1.5 m/s: the feet slide farther the lower the friction
    coefficient (x 0.4, 1, 1.5 of contact.friction_mu)."""
    sim = NativeSimulator(native_cfg(kappa=300.0), 3)
    q, qd = sim.default_state()
    with torch.no_grad():
        hold = targets(sim, 1)[0].expand(3, -1)
        for _ in range(10):  # settle onto the floor
            o = sim.step(hold, q, qd)
            q, qd = o.joint_q, o.joint_qd
    p = WorldParams.nominal(3)
    p.friction_scale = torch.tensor([0.4, 1.0, 1.5], dtype=torch.float64)
    slide = shoved_feet(sim, o, hold, p, 1.5)
    assert float(slide[0]) > float(slide[1]) > float(slide[2]) > 0.0
    assert float(slide[0] - slide[1]) > 0.01  # centimetres, not rounding


def test_a_lower_friction_slope_creeps_farther_and_stays_stable():
    """The G1 standing, then nudged sideways at 0.15 m/s (the soles stay below the Coulomb cap, on the viscous
    branch f_t = -kf v_t): the lower the friction slope (x 0.2, 0.5, 1 of contact's kf), the farther the feet creep
    -- and the contact stays stable at 2 ms and kappa 300 even at x 0.2, where the normal damping left over by the
    isotropic implicit mass (kd - kf) would be past the explicit bound (it goes on the normal-only implicit mass):
    the standing foot force settles to the robot's weight without chatter."""
    sim = NativeSimulator(native_cfg(kappa=300.0), 3)
    p = WorldParams.nominal(3)
    p.friction_slope_scale = torch.tensor([0.2, 0.5, 1.0], dtype=torch.float64)
    q, qd = sim.default_state()
    hold = targets(sim, 1)[0].expand(3, -1)
    force = []
    with torch.no_grad():
        for _ in range(40):  # 0.8 s standing under each world's own slope
            o = sim.step(hold, q, qd, params=p)
            q, qd = o.joint_q, o.joint_qd
            force.append(o.foot_force.sum(-1))
        force = torch.stack(force[20:])  # [20, 3] N, both feet
        weight = 9.81 * float(sim.m.inertia[:, 0].sum())  # [N] (column 0 of the inertia rows: mass)
        assert torch.isfinite(q).all()
        assert float((force.mean(0) - weight).abs().max()) < 0.05 * weight
        assert float(force.std(0).max()) < 1.0  # no on/off chatter of the soles
    creep = shoved_feet(sim, o, hold, p, 0.15)
    assert float(creep[0]) > float(creep[1]) > float(creep[2]) > 0.0
    assert float(creep[0] - creep[2]) > 0.002  # millimetres, not rounding


def test_stiffer_kp_tracks_a_step_target_faster():
    """In the air, a 0.3 rad step of every joint's target: after 60 ms the stiffer worlds (kp x 0.8, 1, 1.2 on
    every joint) are closer to it."""
    sim = NativeSimulator(native_cfg(kappa=300.0), 3)
    q, qd = sim.default_state()
    q[:, 2] += 1.0  # no contact
    p = WorldParams.nominal(3)
    p.kp_scale = torch.tensor([0.8, 1.0, 1.2], dtype=torch.float64)[:, None].expand(-1, 29).clone()
    step = torch.as_tensor(sim.m.default_joint_q[7:], dtype=torch.float32) + 0.3
    with torch.no_grad():
        for _ in range(3):
            o = sim.step(step.expand(3, -1), q, qd, params=p)
            q, qd = o.joint_q, o.joint_qd
    err = (q[:, 7:] - step).abs().mean(-1)
    assert float(err[0]) > float(err[1]) > float(err[2])


def test_a_heavier_pelvis_sinks_the_contact_springs_deeper():
    """Standing 0.5 s on the stand gains: a pelvis 40 % heavier (or a torso 40 % heavier) presses the soles deeper
    into the penalty springs than the nominal robot; a lighter one less."""
    sim = NativeSimulator(native_cfg(kappa=300.0), 4)
    p = WorldParams.nominal(4)
    p.mass_scale[1, PELVIS], p.mass_scale[2, PELVIS], p.mass_scale[3, TORSO] = 1.4, 0.6, 1.4
    q, qd = sim.default_state()
    hold = targets(sim, 1)[0].expand(4, -1)
    pen = []
    with torch.no_grad():
        for k in range(25):
            o = sim.step(hold, q, qd, params=p)
            q, qd = o.joint_q, o.joint_qd
            if k >= 15:
                pen.append(o.foot_penetration.mean(-1))
    pen = torch.stack(pen).mean(0)
    assert float(pen[1]) > float(pen[0]) > float(pen[2]) > 0.0
    assert float(pen[3]) > float(pen[0])


def test_a_forward_torso_com_pitches_the_standing_robot_forward():
    """Standing on the stand gains, the torso's COM 5 cm forward (+x in the torso frame) leans the robot forward
    (the pelvis origin moves forward relative to the nominal world), 5 cm back leans it back."""
    sim = NativeSimulator(native_cfg(kappa=300.0), 3)
    p = WorldParams.nominal(3)
    p.com_offset_b[1, TORSO, 0], p.com_offset_b[2, TORSO, 0] = 0.05, -0.05
    q, qd = sim.default_state()
    hold = targets(sim, 1)[0].expand(3, -1)
    with torch.no_grad():
        for _ in range(25):
            o = sim.step(hold, q, qd, params=p)
            q, qd = o.joint_q, o.joint_qd
    head = o.body_q[:, sim.m.body_names.index("torso_link"), 0]
    assert float(head[1]) > float(head[0]) > float(head[2])


@pytest.mark.parametrize("slide", [False, True])
def test_reverse_mode_is_exact_under_per_world_constants(slide):
    """Friction, per-joint gains, pelvis / torso mass and torso COM all off nominal: the adjoint of the C++ step
    equals central finite differences of the same double-precision step, standing in kappa-300 contact and
    (slide) with the feet sliding sideways on the capped friction branch, where mu enters the force."""
    sim = NativeSimulator(native_cfg(kappa=300.0), 1)
    p = randomized(1, seed=3)
    q, qd = sim.default_state()
    tgt = targets(sim, 5)
    with torch.no_grad():
        for k in range(5):
            o = sim.step(tgt[k][None], q, qd, params=p)
            q, qd = o.joint_q, o.joint_qd
    assert (o.foot_force > 50).all()
    q, qd = o.joint_q.clone(), o.joint_qd.clone()
    if slide:
        qd[0, 1] += 1.0
    assert_reverse_mode_exact(sim, q, qd, tgt[-1], params=p)


def test_bcg_branches_run_their_worlds_constants():
    """BCG with a zero perturbation ball: every branch is a copy of its world, so the bundled rollout equals the
    unbundled one -- if and only if the branches (and the contact-onset re-run they start from) run their own
    world's constants. Worlds dropped onto the floor under randomized constants; the same drop with the branches
    on nominal constants would move the bundled worlds (checked: the constants matter over one step)."""
    from bcg_sim.diffsim import from_newton

    base = native_cfg(kappa=300.0)
    on = dc.replace(
        base, bcg=dc.replace(load_sim_config().bcg, enabled=True, pool_size=24, sigma=0.0, sigma_v=0.0)
    ).validate()
    p = randomized(4, seed=1)

    def run(cfg, params):
        env = G1DiffEnv(cfg, 4)
        env.set_world_params(None, params)
        q, qd = env.sim.default_state()
        q[:, 2] += 0.03 * torch.arange(1, 5)
        env.reset(state=from_newton(q, qd, env.root_com_b))
        bundled = torch.zeros(4, dtype=torch.bool)
        with torch.no_grad():
            for _ in range(12):
                out = env.step(torch.zeros(4, 29))
                bundled |= out.bundled
        return env.joint_q, bundled

    q_off, _ = run(base, p)
    q_on, bundled = run(on, p)
    assert int(bundled.sum()) >= 3
    torch.testing.assert_close(q_on, q_off, rtol=0, atol=2e-5)
    q_nom, _ = run(base, WorldParams.nominal(4))
    assert float((q_nom - q_off).abs().max()) > 1e-2
    with pytest.raises(ValueError, match="params of 2 worlds"):
        G1DiffEnv(base, 4).set_world_params(None, WorldParams.nominal(2))


# ------------------------------------------------------------------------------------------ the training task

ON = {
    "friction_scale": [0.5, 1.5],
    "kp_scale": [0.85, 1.15],
    "kd_scale": [0.85, 1.15],
    "pelvis_mass_scale": [0.85, 1.15],
    "torso_mass_scale": [0.85, 1.15],
    "torso_com_offset": [0.025, 0.05, 0.05],
    "friction_slope_scale": [0.3, 1.0],
}


def _trainer(tmp_path, seed=0, n=4, **randomize):
    from train_helpers import tiny_trainer

    return tiny_trainer(
        tmp_path,
        {
            "algo": "shac",
            "num_envs": n,
            "seed": seed,
            "reward": {"kind": "tracking"},
            "task": {"motion": "dance", "randomize": randomize},
        },
    )


def test_task_draws_world_physics_per_episode_reproducibly_per_seed(tmp_path):
    """task.randomize on: every world gets its own constants at its episode start, inside the configured ranges
    (gains per joint); the same seed draws the same, another seed others; a reset of some worlds redraws theirs
    only; the checkpoint carries them; the run folder's config.yaml records the ranges. Off (the defaults):
    no per-world constants at all."""
    import yaml

    a, b, c = (_trainer(tmp_path / k, seed=s, **ON) for k, s in (("a", 0), ("b", 0), ("c", 1)))
    pa, pb, pc = (r.env.world_params for r in (a, b, c))
    for k, t in pa.as_dict().items():
        assert torch.equal(t, pb.as_dict()[k]), k
        assert not torch.equal(t, pc.as_dict()[k]), k
    assert float(pa.friction_scale.min()) >= 0.5 and float(pa.friction_scale.max()) <= 1.5
    assert float(pa.kp_scale.min()) >= 0.85 and float(pa.kp_scale.max()) <= 1.15
    assert pa.kp_scale[0].unique().numel() == 29  # per joint
    assert float(pa.com_offset_b[:, TORSO].abs().amax(0)[1]) <= 0.05
    assert float(pa.com_offset_b[:, PELVIS].abs().max()) == 0
    assert float((pa.mass_scale - 1).abs().min()) > 0
    before = pa.clone()
    a.task.reset(torch.tensor([2]))
    after = a.env.world_params
    assert torch.equal(after.kp_scale[[0, 1, 3]], before.kp_scale[[0, 1, 3]])
    assert not torch.equal(after.kp_scale[2], before.kp_scale[2])
    saved = a.task.state_dict()["world_params"]
    b.task.load_state_dict(a.task.state_dict())
    assert torch.equal(b.env.world_params.kp_scale, saved["kp_scale"])
    a.prepare_folder()
    rec = yaml.safe_load((tmp_path / "a" / "config.yaml").read_text())["task"]["randomize"]
    assert {k: rec[k] for k in ON} == ON
    off = _trainer(tmp_path / "off")
    assert off.task.physics_keys == [] and off.env.world_params is None


def test_the_ramp_grows_the_physics_ranges_and_the_delay_share_over_its_iterations(tmp_path):
    """task.randomize.ramp_iterations 10: the episodes of iteration 0 run the nominal robot with no delay,
    those of iteration 5 half the ranges, from iteration 10 on the full ones; logged as randomize_share."""
    r = _trainer(tmp_path / "ramp", n=64, **ON, action_delay_prob=1.0, ramp_iterations=10)
    p0 = r.env.world_params  # the first episodes, drawn at build (iteration 0)
    assert torch.equal(p0.friction_scale, torch.ones_like(p0.friction_scale))
    assert torch.equal(p0.kp_scale, torch.ones_like(p0.kp_scale)) and float(p0.com_offset_b.abs().max()) == 0
    assert not bool(r.task.delayed.any())
    for iteration, share in ((5, 0.5), (10, 1.0), (40, 1.0)):
        r.task.begin_iteration(iteration)
        r.task.reset()
        p = r.env.world_params
        dev = float((p.friction_scale - 1).abs().max())
        assert 0.35 * share < dev <= 0.5 * share + 1e-12, (iteration, dev)  # friction_scale [0.5, 1.5]
        assert 0.3 * share < float(r.task.delayed.float().mean()) <= share  # action_delay_prob 1 x share
        assert r.task.end_iteration()["randomize_share"] == share


def test_newton_backend_refuses_per_world_physics(tmp_path):
    """The newton backend cannot run per-world constants: the task names the backend and the key in a one-line
    ConfigError, and the env refuses non-nominal params (nominal ones are its own model, accepted)."""
    import bcg_sim.motion
    from bcg_train.config import load_train_config
    from bcg_train.runner import contract_for
    from bcg_train.task import Task

    cfg = load_train_config(
        "tiny", {"algo": "shac", "task": {"motion": "dance", "randomize": {"friction_scale": [0.5, 1.5]}}}
    )
    sim = native_cfg(kappa=300.0).with_backend("newton")
    env = G1DiffEnv(sim, 2)
    motion = bcg_sim.motion.load("dance", fps=sim.control_hz)
    with pytest.raises(ConfigError, match=r"task\.randomize\.friction_scale.*'newton'") as exc:
        Task(cfg, env, motion, contract_for(motion.name, cfg), torch.Generator(), 2)
    assert "\n" not in str(exc.value)
    env.set_world_params(None, WorldParams.nominal(2))
    with pytest.raises(ConfigError, match="newton"):
        env.set_world_params(None, randomized(2))


def test_bad_ranges_are_config_errors(tmp_path):
    """Ranges the config cannot mean, and gain ranges the native step cannot run at sim_dt, are one-line
    ConfigErrors naming the key."""
    from bcg_train.config import load_train_config

    for key, value in (
        ("friction_scale", [1.5, 0.5]),
        ("kp_scale", [0.0, 1.0]),
        ("torso_com_offset", [0.1, 0.1]),
        ("torso_com_offset", [-0.1, 0.0, 0.0]),
        ("obs_root_drift", -0.05),
    ):
        with pytest.raises(ConfigError, match=rf"task\.randomize\.{key}"):
            load_train_config("tiny", {"task": {"randomize": {key: value}}})
    with pytest.raises(ConfigError, match=r"task\.root_estimate: must be one of \('odometry', 'random_walk'\)"):
        load_train_config("tiny", {"task": {"root_estimate": "truth"}})
    with pytest.raises(ConfigError, match=r"task\.randomize\.kp_scale/kd_scale"):
        _trainer(tmp_path, kp_scale=[1.0, 30.0])
    with pytest.raises(ConfigError, match=r"task\.randomize\.friction_slope_scale: max 1\.5"):
        _trainer(tmp_path, friction_slope_scale=[0.5, 1.5])
    sim = NativeSimulator(native_cfg(kappa=300.0), 2)
    p = randomized(2)
    p.mass_scale[1, TORSO] = 0.0
    with pytest.raises(ConfigError, match="mass_scale must be > 0"):
        sim.world_arrays(p)
