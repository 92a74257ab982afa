"""The training side of delta_d: the same policy, from the same start states, rolled out forward-only in
bcg_sim.diffsim (the simulator it is trained in), at a chosen contact stiffness kappa.

The policy runs through the node's runner here too (`BatchPolicyRunner`: PolicyRunner's code, all worlds in one
call per step; observation builder, leg odometry or the simulated pose source, target clipping); the PD targets go
to the simulator's `step` directly, so the contract's action scale and gains are used, not the sim config's. The
sim's gain table (actuation.gains) must match the contract's kp/kd: "policy" (the motors') or "stand" (bring-up),
else the comparison would be of two different robots and it is refused.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import torch

from bcg_sim.policy import Policy, RobotState
from bcg_sim.quat import yaw
from bcg_train.eval.config import EvalConfig
from bcg_train.eval.metrics import Rollout
from bcg_train.eval.mujoco_eval import EvalError, pose_source, reference_qpos, start_state

GAIN_TOLERANCE = 1e-6  # relative: contract gains equal a sim gain table


def sim_config_for(policy: Policy, kappa: float | None):
    """config/sim.yaml with this kappa [kN/m] (None: the policy's train_kappa, else sim.yaml's), BCG off (forward
    only) and the gain table of the contract."""
    from bcg_sim.diffsim import load_sim_config
    from bcg_sim.diffsim.model import pd_gains

    cfg = load_sim_config()
    kappa = policy.contract.train_kappa if kappa is None else kappa
    contact = cfg.contact if kappa is None else dataclasses.replace(cfg.contact, kappa=float(kappa))
    cfg = dataclasses.replace(cfg, contact=contact, bcg=dataclasses.replace(cfg.bcg, enabled=False))
    c = policy.contract
    if abs(cfg.control_dt - c.control_dt) > 1e-9:
        raise EvalError(
            f"policy control_dt {c.control_dt} s != bcg_sim control period {cfg.control_dt} s "
            "(config/sim.yaml control_hz)"
        )
    for gains in ("policy", "stand"):
        trial = dataclasses.replace(
            cfg, actuation=dataclasses.replace(cfg.actuation, gains=gains, kp_scale=1.0, kd_scale=1.0)
        )
        kp, kd = (np.asarray(g, float) for g in pd_gains(trial))
        if np.allclose(kp, c.kp, rtol=GAIN_TOLERANCE) and np.allclose(kd, c.kd, rtol=GAIN_TOLERANCE):
            return trial.validate()
    raise EvalError(
        f"{policy.path}/policy.yaml: kp/kd match neither bcg_sim gain table ('policy' motors' "
        "gains or 'stand' bring-up gains); delta_d needs the same robot in both simulators"
    )


def diffsim_rollouts(
    policy: Policy,
    cfg: EvalConfig,
    seeds: list[int],
    seconds: float,
    kappa: float | None = None,
    start_times: list[float] | None = None,
    stop_at_falls: bool = True,
    bcg: bool = False,
) -> list[Rollout]:
    """One forward-only bcg_sim rollout per seed (the seeds' MuJoCo start states), batched as worlds.
    `start_times` [s]: each world starts at that time of the clip (default 0), with its own aligned copy of the
    reference. `stop_at_falls`: end when every world has fallen (else run all `seconds`; a fallen world's
    motors hold their last targets). `bcg`: the state goes on as in training, the bundle mean replacing it H
    steps after each touchdown (bundles are never cut: there are no rollout boundaries here)."""
    from bcg_policy_node.policy_runner import BatchPolicyRunner
    from bcg_sim.diffsim.backend import make_simulator
    from bcg_sim.diffsim.state import SimState, from_newton, to_newton
    from bcg_sim.quat import conjugate, rotate

    sim_cfg = sim_config_for(policy, kappa)
    n = len(seeds)
    env = None  # with `bcg`: the training env, whose own simulator steps the worlds (bundles need its Bundler)
    if bcg:
        from bcg_sim.diffsim.env import G1DiffEnv

        env = G1DiffEnv(dataclasses.replace(sim_cfg, bcg=dataclasses.replace(sim_cfg.bcg, enabled=True)), n)
    sim = make_simulator(sim_cfg, n) if env is None else env.sim  # the configured training backend (config/sim.yaml)
    t0 = [0.0] * n if start_times is None else [float(t) for t in start_times]
    if len(t0) != n:
        raise EvalError(f"{len(t0)} start times for {n} seeds")
    refs = [copy.copy(policy.reference) for _ in seeds]  # per-world alignment (align_yaw mutates the track)
    starts = [start_state(policy, cfg, np.random.default_rng(s), t, ref) for s, t, ref in zip(seeds, t0, refs)]
    f32 = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float32, device=sim.torch_device)  # noqa: E731
    state = SimState(
        f32([s[0][:3] for s in starts]),
        f32([s[0][3:7] for s in starts]),
        f32([s[1] for s in starts]),
        f32([s[2] for s in starts]),
        f32([s[0][7:] for s in starts]),
        f32([s[3] for s in starts]),
    )
    root_com_b = f32(sim.m.root_com_b)
    q, qd = to_newton(state, root_com_b)
    if env is not None:
        env.reset(state=state)
    # the node's runner, all worlds in one call per step
    runner = BatchPolicyRunner(policy, refs, cfg.pose_timeout_s, cfg.root_source or None)
    poses = pose_source(runner, cfg, seeds[0] if seeds else 0)
    alive = np.ones(n, dtype=bool)
    dt = policy.contract.control_dt

    def robots(st: SimState) -> RobotState:
        """What each world's robot measures [n, ...] (float64 numpy, gyroscope in the pelvis frame)."""
        w_b = rotate(conjugate(st.root_quat_w), st.root_ang_vel_w)
        return RobotState(*(x.double().cpu().numpy() for x in (st.joint_pos, st.joint_vel, st.root_quat_w, w_b)))

    def qpos(st: SimState) -> np.ndarray:
        return torch.cat([st.root_pos_w, st.root_quat_w, st.joint_pos], dim=-1).double().cpu().numpy()

    with torch.no_grad():
        st = from_newton(q, qd, root_com_b)
        runner.start(robots(st), t0)
        hist = [qpos(st)]
        steps = 0
        for _ in range(round(seconds / dt)):
            if poses is not None:  # the pelvis as a lidar odometry would report it
                pose = poses.step(
                    st.root_pos_w[:, :2].double().cpu().numpy(), yaw(st.root_quat_w.double().cpu().numpy())
                )
                if pose is not None:
                    runner.observe_pose(*pose)
            targets, causes = runner.step(robots(st))
            alive &= np.array([c is None for c in causes])
            # a fallen or faulted world's motors hold its last targets
            targets = np.where(alive[:, None], targets, hist[-1][:, 7:])
            if env is None:
                out = sim.step(f32(targets), q, qd)
                q, qd = out.joint_q, out.joint_qd
                st = from_newton(q, qd, root_com_b)
            else:
                st = env.step(env.action_for_target(f32(targets))).state
            hist.append(qpos(st))
            steps += 1
            alive &= hist[-1][:, 2] >= cfg.fall_height
            if stop_at_falls and not alive.any():
                break
    h = np.stack(hist)  # [T, n, 36]
    t = np.arange(steps + 1) * dt
    return [Rollout(t, h[:, i], reference_qpos(refs[i], t0[i] + t)) for i in range(n)]


def _score(runs: list[Rollout], policy: Policy, cfg: EvalConfig) -> dict[str, float]:
    """Mean E_track [cm] over worlds and steps 1..T, fall fraction, mean survival [s], world count."""
    from bcg_train.eval import metrics

    e, fell, surv = [], [], []
    for r in runs:
        s = metrics.series(r, policy.contract.control_dt, cfg.contact_height)
        e.append(float(np.mean(s["e_track"][1:])))
        i = metrics.first_fall(s["root_height"], cfg.fall_height)
        fell.append(i is not None)
        surv.append(float(s["time"][i]) if i is not None else float(s["time"][-1]))
    return {
        "e_track_cm": 100.0 * float(np.mean(e)),
        "falls": float(np.mean(fell)),
        "survival_s": float(np.mean(surv)),
        "worlds": len(runs),
    }


def window_tracking(
    policy: Policy, cfg: EvalConfig, start_times: list[float], seconds: float, kappa: float | None = None
) -> dict[str, float]:
    """A fixed-protocol tracking score in the training simulator: one world per start time [s], started exactly
    in the reference state (no initial noise), the policy through the node's runner for `seconds` with no
    early termination, so a fall keeps counting as the large error it is and policies that survive different
    times are compared over the same window.
    Returns e_track_cm (mean over worlds and steps 1..T of metrics.tracking_error), falls (fraction of worlds
    whose pelvis went below cfg.fall_height), survival_s (mean time to that, or `seconds`), worlds."""
    quiet = dataclasses.replace(cfg, init_joint_noise=0.0, init_root_vel_noise=0.0)
    runs = diffsim_rollouts(
        policy, quiet, list(range(len(start_times))), seconds, kappa, start_times, stop_at_falls=False
    )
    return _score(runs, policy, cfg)


def clip_tracking(
    policy: Policy, cfg: EvalConfig, runs: int, seconds: float = 0.0, kappa: float | None = None
) -> dict[str, float]:
    """bcg-eval's protocol in the training simulator: `runs` rollouts of the whole clip (or `seconds` of it)
    from its first frame, run i from bcg-eval's start state of seed cfg.base_seed + i (cfg's start noise), no
    early termination. Same keys as window_tracking."""
    duration = policy.reference.duration if seconds <= 0 else min(seconds, policy.reference.duration)
    seeds = [cfg.base_seed + i for i in range(runs)]
    return _score(diffsim_rollouts(policy, cfg, seeds, duration, kappa, stop_at_falls=False), policy, cfg)
