"""Batched, differentiable G1 environment: reset from reference motions, PD actions, termination, BCG.

    env = G1DiffEnv(load_sim_config(), num_worlds=64)
    env.reset(motion=bcg_sim.motion.load("run"), frames=torch.randint(0, 100, (64,)))
    for t in range(horizon):                       # SHAC-style rollout
        out = env.step(policy(obs(out.state)))      # actions [N, 29]
        loss = loss + cost(out)
    loss.backward()                                 # gradients through every control step (and bundles)
    env.new_rollout()                               # cut the graph, recycle tape buffers, reset BCG stats

Actions are dimensionless: PD target = default joint pos + actuation.action_scale * action [rad].
Worlds are independent: resetting some leaves the others (and their autograd history) untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bcg_sim.config import ConfigError
from bcg_sim.diffsim.backend import make_branch_pool, make_simulator
from bcg_sim.diffsim.bundle import BCGStats, Bundler
from bcg_sim.diffsim.config import SimConfig, load_sim_config
from bcg_sim.diffsim.model import NUM_JOINTS
from bcg_sim.diffsim.state import SimState, from_newton, to_newton
from bcg_sim.diffsim.world_params import WorldParams
from bcg_sim.quat import xyzw_to_wxyz

_BODY_QUAT = slice(3, 7)  # x y z w within Newton's (p, q) transforms and the free joint's coordinates


@dataclass
class EnvStep:
    """One control step of N worlds. Differentiable: state, body_*; the rest are plain tensors.

    body_pos_w [N, 30, 3] body origins [m]; body_quat_w [N, 30, 4] w x y z; body_lin_vel_w [N, 30, 3]
    velocity of each body's COM [m/s]; body_ang_vel_w [N, 30, 3] [rad/s] (all world frame, bodies in
    `env.body_names` order). foot_force / foot_force_peak [N, 2] sole normal force at the end of / peak
    over the step [N]; foot_penetration [N, 2] [m]; (left, right). terminated = fell | tracking_failed |
    non-finite state. touchdown [N, 2]: BCG trigger rule fired; bundled [N]: this step's state is a bundle mean.
    """

    state: SimState
    body_pos_w: torch.Tensor
    body_quat_w: torch.Tensor
    body_lin_vel_w: torch.Tensor
    body_ang_vel_w: torch.Tensor
    foot_force: torch.Tensor
    foot_force_peak: torch.Tensor
    foot_penetration: torch.Tensor
    terminated: torch.Tensor
    fell: torch.Tensor
    tracking_failed: torch.Tensor
    touchdown: torch.Tensor
    bundled: torch.Tensor


def motion_state(motion, frames: torch.Tensor) -> SimState:
    """bcg SimState of a `bcg_sim.motion.Motion` at integer frames [n]. Missing velocities (a clip not yet
    completed by bcg_sim.motion.kinematics) are finite differences of the positions."""
    f = np.asarray(frames.cpu() if isinstance(frames, torch.Tensor) else frames, dtype=int)
    if f.min() < 0 or f.max() >= motion.num_frames:
        raise ValueError(f"frames must lie in [0, {motion.num_frames - 1}] for motion {motion.name!r}")

    def vel(x, given):
        if given is not None:
            return given
        return np.gradient(x, 1.0 / motion.fps, axis=0)

    ang = motion.root_ang_vel_w
    if ang is None:  # omega_w = 2 dq/dt q^-1 (w x y z), finite difference
        q = motion.root_quat_w
        dq = np.gradient(q, 1.0 / motion.fps, axis=0)
        w, v = q[:, :1], -q[:, 1:]
        dw, dv = dq[:, :1], dq[:, 1:]
        ang = 2.0 * (w * dv - v * dw + np.cross(dv, v))  # vector part of dq * conj(q)
    arrays = (
        motion.root_pos_w,
        motion.root_quat_w,
        vel(motion.root_pos_w, motion.root_lin_vel_w),
        ang,
        motion.joint_pos,
        vel(motion.joint_pos, motion.joint_vel),
    )
    return SimState(*(torch.as_tensor(a[f], dtype=torch.float32) for a in arrays))


class G1DiffEnv:
    """N G1 worlds with Bundled Contact Gradients. See the module docstring for the loop."""

    def __init__(self, cfg: SimConfig | None = None, num_worlds: int = 1):
        self.cfg = (cfg or load_sim_config()).validate()
        self.num_worlds = num_worlds
        self.sim = make_simulator(self.cfg, num_worlds)
        self.device = self.sim.torch_device
        self.body_names = list(self.sim.m.body_names)
        self.joint_names = list(self.sim.m.joint_names)
        self.root_com_b = torch.as_tensor(self.sim.m.root_com_b, dtype=torch.float32, device=self.device)
        self.default_joint_pos = torch.as_tensor(
            self.sim.m.default_joint_q[7:], dtype=torch.float32, device=self.device
        )
        self.joint_q, self.joint_qd = self.sim.default_state()  # Newton layout [N, 36], [N, 35]
        # peak sole force [N, 2] of the previous control step: a foot is armed for a touchdown after a step in air
        self._prev_foot_peak = torch.full((num_worlds, 2), float("inf"), device=self.device)
        self._motion = None
        self._ref_root_pos: torch.Tensor | None = None  # [T, 3]
        self._ref_time = torch.zeros(num_worlds, device=self.device)  # seconds into the clip per world
        self._has_ref = torch.zeros(num_worlds, dtype=torch.bool, device=self.device)
        # per-world constants of the dynamics (set_world_params); None: the config's model in every world
        self.world_params: WorldParams | None = None
        b = self.cfg.bcg
        # Branch pool, built once: pool_size // B chunks of B worlds (newton: one simulator per chunk; native:
        # one simulator stepping every active bundle in one call).
        self.pool: list = []  # chunk simulators of the configured backend
        self._branch_sim = None
        self.bundler: Bundler | None = None
        if b.enabled:
            self.pool, self._branch_sim = make_branch_pool(self.cfg)
            self.bundler = Bundler(
                b,
                self._step_chunk,
                quat_slices=(_BODY_QUAT, None, _BODY_QUAT, None),
                step_batch=self._step_batch if self._branch_sim is not None else None,
                substeps=self.cfg.substeps,
            )

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> SimState:
        return from_newton(self.joint_q, self.joint_qd, self.root_com_b)

    def bcg_stats(self) -> BCGStats:
        return self.bundler.stats if self.bundler is not None else BCGStats()

    def new_rollout(self) -> None:
        """Detach the state from the graph, recycle tape buffers and restart BCG statistics. Call after
        backward (or when starting a new horizon)."""
        self.joint_q, self.joint_qd = self.joint_q.detach(), self.joint_qd.detach()
        self.sim.new_rollout()
        for chunk in self.pool:
            chunk.new_rollout()
        if self.bundler is not None:
            self.bundler.clear()
            self.bundler.reset_stats()

    def _ids(self, env_ids) -> torch.Tensor:
        if env_ids is None:
            return torch.arange(self.num_worlds, device=self.device)
        ids = torch.as_tensor(env_ids, dtype=torch.long, device=self.device).reshape(-1)
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.num_worlds):
            raise IndexError(f"env_ids out of range [0, {self.num_worlds})")
        return ids

    def reset(self, env_ids=None, *, motion=None, frames=None, state: SimState | None = None) -> None:
        """Reset worlds `env_ids` (default all) to `state`, to reference `motion` at `frames` ([n] ints;
        default 0), or to the default standing pose. Other worlds are untouched. With a motion, later steps
        check the pelvis against the clip (termination.max_tracking_error); the env tracks one clip at a time.
        Both `motion` and `state`: start from `state` (e.g. a perturbed clip state) while tracking the clip."""
        ids = self._ids(env_ids)
        n = ids.numel()
        if motion is not None:
            if frames is None:
                frames = torch.zeros(n, dtype=torch.long)
            frames = torch.as_tensor(frames).reshape(-1)
            if frames.numel() != n:
                raise ValueError(f"reset: {frames.numel()} frames for {n} worlds")
            if state is None:
                state = motion_state(motion, frames)
            if self._motion is not motion:
                self._motion = motion
                self._ref_root_pos = torch.as_tensor(motion.root_pos_w, dtype=torch.float32, device=self.device)
                self._has_ref[:] = False
            self._ref_time[ids] = frames.to(self.device, torch.float32) / float(motion.fps)
            self._has_ref[ids] = True
        else:
            self._has_ref[ids] = False
        if state is None:
            q, qd = self.sim.default_state()
            q, qd = q[ids], qd[ids]
        else:
            if state.num_worlds != n:
                raise ValueError(f"reset: state has {state.num_worlds} worlds, env_ids {n}")
            state = SimState(*(t.to(self.device, torch.float32) for t in state.detach().as_tuple()))
            q, qd = to_newton(state, self.root_com_b)
        self.joint_q = self.joint_q.index_put((ids,), q.detach())
        self.joint_qd = self.joint_qd.index_put((ids,), qd.detach())
        # right after a reset the feet count as loaded: a touchdown needs a step in the air first
        self._prev_foot_peak[ids] = float("inf")
        if self.bundler is not None:
            self.bundler.cancel(ids.tolist())

    def set_world_params(self, env_ids, params: WorldParams) -> None:
        """Worlds `env_ids` ([n], None: all) run with these per-world constants of the dynamics (friction, PD
        gains, pelvis / torso mass and COM; `params` of n worlds) from their next step on; the others keep theirs.
        Native backend only: the newton backend raises ConfigError for anything but the nominal values. A BCG
        branch runs with its world's constants."""
        ids = self._ids(env_ids)
        if params.num_worlds != ids.numel():
            raise ValueError(f"set_world_params: params of {params.num_worlds} worlds for {ids.numel()} env_ids")
        if self.cfg.backend != "native":
            if not params.is_nominal():
                raise ConfigError(
                    f"sim config: backend {self.cfg.backend!r} cannot run per-world physical "
                    "parameters (friction, PD gains, link mass/COM); use backend native"
                )
            return  # nominal: the model every world runs anyway
        self.sim.world_arrays(params)  # ConfigError for constants the native step cannot run (kd < dt kp)
        if self.world_params is None:
            self.world_params = WorldParams.nominal(self.num_worlds)
        self.world_params.put(ids.cpu(), params)

    def _params(self, rows=None) -> dict:
        """The step's `params` keyword for worlds `rows` ([M] indices into this env's worlds; None: all)."""
        if self.world_params is None:
            return {}
        return {"params": self.world_params if rows is None else self.world_params.take(torch.as_tensor(rows).cpu())}

    # ------------------------------------------------------------------ step
    def _step_chunk(self, chunk: int, target, q, qd):
        o = self.pool[chunk].step(target, q, qd)
        return o.joint_q, o.joint_qd, o.body_q, o.body_qd

    def _step_batch(self, target, q, qd, substeps=None, worlds=None):
        o = self._branch_sim.step(target, q, qd, substeps=substeps, **self._params(worlds))
        return o.joint_q, o.joint_qd, o.body_q, o.body_qd

    def _start_bundles(
        self,
        touchdown: torch.Tensor,
        onset: torch.Tensor | None,
        target: torch.Tensor,
        q_in: torch.Tensor,
        qd_in: torch.Tensor,
    ) -> None:
        """Start a bundle for each admitted touchdown (touchdown [N, 2]) from its world's state before the
        impact: the step's start (q_in [N, 36], qd_in [N, 35]), or with bcg.start "contact" the last substep
        state before the foot's contact onset (onset [N, 2], StepOutput.foot_onset), which the branch simulator
        recomputes differentiably for those worlds in one call (j substeps, j = onset - 1)."""
        hits = [(w, f) for w, f in touchdown.nonzero().tolist() if self.bundler.admit(w, f)]
        if not hits:
            return
        skips = [0] * len(hits)
        if self.cfg.bcg.start == "contact":
            skips = [max(int(onset[w, f]) - 1, 0) for w, f in hits]
        q0, qd0 = [q_in[w] for w, _ in hits], [qd_in[w] for w, _ in hits]
        part = [k for k, j in enumerate(skips) if j > 0]
        if part:
            ws = torch.as_tensor([hits[k][0] for k in part])
            o = self._branch_sim.step(
                target[ws], q_in[ws], qd_in[ws], substeps=torch.as_tensor([skips[k] for k in part]), **self._params(ws)
            )
            for i, k in enumerate(part):
                q0[k], qd0[k] = o.joint_q[i], o.joint_qd[i]
        for (w, f), q, qd, j in zip(hits, q0, qd0, skips):
            self.bundler.start(w, f, q, qd, skip=j)

    def action_for_target(self, target: torch.Tensor) -> torch.Tensor:
        """The actions [N, 29] whose PD targets are `target` [N, 29] rad (the inverse of `step`'s mapping)."""
        return (target - self.default_joint_pos) / self.cfg.actuation.action_scale

    def step(self, actions: torch.Tensor) -> EnvStep:
        """Apply actions [N, 29] for one control period (cfg.substeps substeps)."""
        if tuple(actions.shape) != (self.num_worlds, NUM_JOINTS):
            raise ValueError(f"actions must be [{self.num_worlds}, {NUM_JOINTS}], got {tuple(actions.shape)}")
        target = self.default_joint_pos + self.cfg.actuation.action_scale * actions
        q_in, qd_in = self.joint_q, self.joint_qd
        o = self.sim.step(target, q_in, qd_in, **self._params())
        outs = (o.joint_q, o.joint_qd, o.body_q, o.body_qd)

        # Contact onset after flight: the previous step's peak must be <= rearm_force, so a foot that bounces
        # or chatters on stiff contact (end-of-step force dipping below the trigger) is not re-bundled.
        touchdown = (o.foot_force_peak > self.cfg.bcg.trigger_force) & (
            self._prev_foot_peak <= self.cfg.bcg.rearm_force
        )
        self._prev_foot_peak = o.foot_force_peak
        bundled = torch.zeros(self.num_worlds, dtype=torch.bool, device=self.device)
        if self.bundler is not None:
            self._start_bundles(touchdown, o.foot_onset, target, q_in, qd_in)
            outs, merged = self.bundler.step_and_merge(target, outs)
            bundled[merged] = True
        self.joint_q, self.joint_qd, body_q, body_qd = outs

        state = from_newton(self.joint_q, self.joint_qd, self.root_com_b)
        with torch.no_grad():
            finite = torch.isfinite(self.joint_q).all(-1) & torch.isfinite(self.joint_qd).all(-1)
            fell = state.root_pos_w[:, 2] < self.cfg.termination.min_root_height
            self._ref_time += self.cfg.control_dt
            tracking_failed = torch.zeros_like(fell)
            if self._ref_root_pos is not None and self._has_ref.any():
                T = self._ref_root_pos.shape[0]
                frame = torch.clamp(torch.round(self._ref_time * float(self._motion.fps)).long(), 0, T - 1)
                err = (state.root_pos_w - self._ref_root_pos[frame]).norm(dim=-1)
                tracking_failed = self._has_ref & (err > self.cfg.termination.max_tracking_error)
        return EnvStep(
            state=state,
            body_pos_w=body_q[..., 0:3],
            body_quat_w=xyzw_to_wxyz(body_q[..., 3:7]),
            body_lin_vel_w=body_qd[..., 0:3],
            body_ang_vel_w=body_qd[..., 3:6],
            foot_force=o.foot_force,
            foot_force_peak=o.foot_force_peak,
            foot_penetration=o.foot_penetration,
            terminated=fell | tracking_failed | ~finite,
            fell=fell,
            tracking_failed=tracking_failed,
            touchdown=touchdown,
            bundled=bundled,
        )
