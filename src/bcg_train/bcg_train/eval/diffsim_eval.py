"""The training side of delta_d: the same policy, from the same start states, rolled out forward-only in
bcg_sim.diffsim (the simulator it is trained in), at a chosen contact stiffness kappa.

The policy runs through the node's `PolicyRunner` here too (observation builder, target clipping); the PD
targets go to the simulator's `step` directly, so the contract's action scale and gains are used, not the sim
config's. The sim's gain table (actuation.gains) must match the contract's kp/kd: "policy" (the motors') or
"stand" (bring-up), else the comparison would be of two different robots and it is refused.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from bcg_sim.policy import Policy, RobotState
from bcg_train.eval.config import EvalConfig
from bcg_train.eval.metrics import Rollout
from bcg_train.eval.mujoco_eval import EvalError, reference_qpos, start_state

GAIN_TOLERANCE = 1e-6  # relative: contract gains equal a sim gain table


def sim_config_for(policy: Policy, kappa: float | None):
    """config/sim.yaml with this kappa [kN/m], BCG off (forward only) and the gain table of the contract."""
    from bcg_sim.diffsim import load_sim_config
    from bcg_sim.diffsim.model import pd_gains

    cfg = load_sim_config()
    contact = cfg.contact if kappa is None else dataclasses.replace(cfg.contact, kappa=float(kappa))
    cfg = dataclasses.replace(cfg, contact=contact, bcg=dataclasses.replace(cfg.bcg, enabled=False))
    c = policy.contract
    if abs(cfg.control_dt - c.control_dt) > 1e-9:
        raise EvalError(f"policy control_dt {c.control_dt} s != bcg_sim control period {cfg.control_dt} s "
                        "(config/sim.yaml control_hz)")
    for gains in ("policy", "stand"):
        trial = dataclasses.replace(cfg, actuation=dataclasses.replace(cfg.actuation, gains=gains, kp_scale=1.0,
                                                                       kd_scale=1.0))
        kp, kd = (np.asarray(g, float) for g in pd_gains(trial))
        if np.allclose(kp, c.kp, rtol=GAIN_TOLERANCE) and np.allclose(kd, c.kd, rtol=GAIN_TOLERANCE):
            return trial.validate()
    raise EvalError(f"{policy.path}/policy.yaml: kp/kd match neither bcg_sim gain table ('policy' motors' "
                    "gains or 'stand' bring-up gains); delta_d needs the same robot in both simulators")


def diffsim_rollouts(policy: Policy, cfg: EvalConfig, seeds: list[int], seconds: float,
                     kappa: float | None = None) -> list[Rollout]:
    """One forward-only bcg_sim rollout per seed (the seeds' MuJoCo start states), batched as worlds."""
    from bcg_policy_node.policy_runner import PolicyFault, PolicyRunner
    from bcg_sim.diffsim.backend import make_simulator
    from bcg_sim.diffsim.state import SimState, from_newton, quat_rotate_wxyz, to_newton

    sim_cfg = sim_config_for(policy, kappa)
    n = len(seeds)
    sim = make_simulator(sim_cfg, n)  # the configured training backend (config/sim.yaml)
    starts = [start_state(policy, cfg, np.random.default_rng(s)) for s in seeds]
    f32 = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float32, device=sim.torch_device)  # noqa: E731
    state = SimState(f32([s[0][:3] for s in starts]), f32([s[0][3:7] for s in starts]), f32([s[1] for s in starts]),
                     f32([s[2] for s in starts]), f32([s[0][7:] for s in starts]), f32([s[3] for s in starts]))
    root_com_b = f32(sim.m.root_com_b)
    q, qd = to_newton(state, root_com_b)
    runners = [PolicyRunner(policy) for _ in seeds]
    alive = np.ones(n, dtype=bool)
    dt = policy.contract.control_dt

    def robot(st: SimState, i: int) -> RobotState:
        quat = st.root_quat_w[i:i + 1]
        conj = torch.cat([quat[:, :1], -quat[:, 1:]], dim=-1)
        w_b = quat_rotate_wxyz(conj, st.root_ang_vel_w[i:i + 1])[0]
        return RobotState(st.joint_pos[i].double().numpy(), st.joint_vel[i].double().numpy(),
                          quat[0].double().numpy(), w_b.double().numpy())

    def qpos(st: SimState) -> np.ndarray:
        return torch.cat([st.root_pos_w, st.root_quat_w, st.joint_pos], dim=-1).double().cpu().numpy()

    with torch.no_grad():
        st = from_newton(q, qd, root_com_b)
        for i, r in enumerate(runners):
            r.start(robot(st, i))
        hist = [qpos(st)]
        steps = 0
        for _ in range(round(seconds / dt)):
            targets = np.zeros((n, 29))
            for i, r in enumerate(runners):
                if not alive[i]:
                    targets[i] = hist[-1][i, 7:]
                    continue
                try:
                    targets[i] = r.step(robot(st, i))
                except PolicyFault:
                    alive[i] = False
                    targets[i] = hist[-1][i, 7:]
            out = sim.step(f32(targets), q, qd)
            q, qd = out.joint_q, out.joint_qd
            st = from_newton(q, qd, root_com_b)
            hist.append(qpos(st))
            steps += 1
            alive &= hist[-1][:, 2] >= cfg.fall_height
            if not alive.any():
                break
    h = np.stack(hist)  # [T, n, 36]
    t = np.arange(steps + 1) * dt
    ref = reference_qpos(policy.reference, t)
    return [Rollout(t, h[:, i], ref) for i in range(n)]
