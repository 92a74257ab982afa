"""The motion-tracking task, defined once: reference-state init, episodes, observation, reference features.

- Reset: every world starts at a random frame of one clip (reference-state initialization), in its reference
  state; an episode ends on the env's termination (`EnvStep.terminated`: fall, pelvis too far from the clip,
  non-finite state), after `task.episode_steps` control steps, or at the clip's last frame (a time-out).
- Actor observation: exactly `bcg_sim.policy.build_observation` (batched torch), differentiable w.r.t. the
  simulated state, normalized by `RunningNorm` whose mean/std go into the exported contract.
- `features(kin)`: the ONE reference-feature function (root position/orientation, joint positions, body positions
  relative to the root, root and joint velocities) used by the rewards, the E_track metric and the logs.
- Actions: the contract's `action_to_target` gives PD targets; `env_action` re-expresses them in the env's units.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from bcg_sim.g1 import joint_limits
from bcg_sim.policy import ReferenceWindow, RobotState, build_observation
from bcg_sim.policy.observation import quat_rotate_inv, quat_to_rot6d

from bcg_train.config import FEATURE_GROUPS, TrainConfig

CM_PER_M = 100.0


class TaskError(ValueError):
    """The task cannot be built from this motion / configuration (bad input, reported in one line)."""


class Kinematics(NamedTuple):
    """Robot or reference kinematics of N worlds (world frame, w x y z quaternions, bcg body order)."""

    root_pos_w: torch.Tensor  # [N, 3] m
    root_quat_w: torch.Tensor  # [N, 4]
    root_lin_vel_w: torch.Tensor  # [N, 3] m/s (pelvis origin)
    root_ang_vel_w: torch.Tensor  # [N, 3] rad/s
    joint_pos: torch.Tensor  # [N, 29] rad
    joint_vel: torch.Tensor  # [N, 29] rad/s
    body_pos_w: torch.Tensor  # [N, B, 3] m, body origins


class Features(NamedTuple):
    """features(kin): groups [N, d_k] in FEATURE_GROUPS order, and the global body positions for E_track."""

    groups: dict[str, torch.Tensor]
    body_pos_w: torch.Tensor  # [N, B, 3]

    def flat(self) -> torch.Tensor:
        """[N, D] all groups concatenated in their order (FEATURE_GROUPS for `features`): the discriminator's
        differential vector layout."""
        return torch.cat(list(self.groups.values()), dim=-1)


def features(kin: Kinematics) -> Features:
    """Reference features of robot or reference kinematics. Relative body positions [N, (B-1)*3] and root
    velocities are in the root frame (heading-independent); root pose in the world frame (rot6d)."""
    q = kin.root_quat_w
    rel_w = kin.body_pos_w[:, 1:] - kin.root_pos_w[:, None]  # body 0 is the pelvis (zero offset)
    rel_b = quat_rotate_inv(q[:, None].expand(-1, rel_w.shape[1], -1), rel_w)
    groups = {
        "root_pos": kin.root_pos_w,
        "root_ori": quat_to_rot6d(q),
        "joint_pos": kin.joint_pos,
        "body_pos": rel_b.reshape(rel_b.shape[0], -1),
        "root_vel": torch.cat([quat_rotate_inv(q, kin.root_lin_vel_w), quat_rotate_inv(q, kin.root_ang_vel_w)], -1),
        "joint_vel": kin.joint_vel,
    }
    return Features({g: groups[g] for g in FEATURE_GROUPS}, kin.body_pos_w)  # the configured order


def e_track_cm(sim: Features, ref: Features) -> torch.Tensor:
    """Global per-body position error [N] in cm: mean over bodies of |p_sim - p_ref| (world frame)."""
    return CM_PER_M * (sim.body_pos_w - ref.body_pos_w).norm(dim=-1).mean(-1)


class RunningNorm(torch.nn.Module):
    """Running mean/variance of observations [D] (parallel Welford); normalize(x) = clip((x - mean)/std)."""

    def __init__(self, dim: int, clip: float, epsilon: float):
        super().__init__()
        self.clip, self.epsilon = clip, epsilon
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.detach().reshape(-1, x.shape[-1]).to(torch.float64)
        x = x[torch.isfinite(x).all(-1)]  # a diverged world's observation is no sample
        n = x.shape[0]
        if n == 0:
            return
        m, v = x.mean(0), x.var(0, unbiased=False)
        tot = self.count + n
        delta = m - self.mean
        self.mean += delta * n / tot
        self.var.copy_((self.var * self.count + v * n + delta ** 2 * self.count * n / tot) / tot)
        self.count.copy_(tot)

    @property
    def std(self) -> torch.Tensor:
        return torch.sqrt(torch.clamp(self.var, min=self.epsilon))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self.mean.to(x.dtype), self.std.to(x.dtype)
        return torch.clamp((x - mean) / std, -self.clip, self.clip)


class Task:
    """N worlds tracking one clip (`motion`, resampled to the control rate). See the module docstring."""

    def __init__(self, cfg: TrainConfig, env, motion, contract, generator: torch.Generator, horizon: int):
        self.cfg, self.env, self.motion, self.contract = cfg, env, motion, contract
        self.gen = generator
        self.device = env.device
        self.n = env.num_worlds
        if abs(motion.fps - env.cfg.control_hz) > 1e-6:
            raise TaskError(f"motion {motion.name!r}: {motion.fps} fps, the task needs the control rate "
                            f"{env.cfg.control_hz} (load it with fps=control_hz)")
        if list(motion.body_names) != list(env.body_names):
            raise TaskError(f"motion {motion.name!r}: body list differs from the simulator's G1")
        self.num_frames = motion.num_frames
        need = horizon + cfg.task.start_margin + 2
        if self.num_frames < need:
            raise TaskError(f"motion {motion.name!r} has {self.num_frames} frames at {motion.fps:g} Hz, shorter "
                            f"than horizon {horizon} + task.start_margin {cfg.task.start_margin} + 2")

        def t(a):
            return torch.as_tensor(a, dtype=torch.float32, device=self.device)

        self.ref = Kinematics(t(motion.root_pos_w), t(motion.root_quat_w), t(motion.root_lin_vel_w),
                              t(motion.root_ang_vel_w), t(motion.joint_pos), t(motion.joint_vel), t(motion.body_pos_w))
        self.k = contract.observation.ref_horizon
        self.default_joint_pos = torch.as_tensor(contract.default_joint_pos, dtype=torch.float32, device=self.device)
        self.frame = torch.zeros(self.n, dtype=torch.long, device=self.device)  # current clip frame per world
        self.steps = torch.zeros(self.n, dtype=torch.long, device=self.device)  # control steps into the episode
        self.last_action = torch.zeros(self.n, 29, device=self.device)  # raw policy output of the previous step
        # [29] rad: reset noise stays inside the joint ranges
        self._joint_lower, self._joint_upper = (torch.tensor(a, dtype=torch.float32) for a in joint_limits())

    # ------------------------------------------------------------------ episodes
    def reset(self, ids: torch.Tensor | None = None) -> None:
        """Reset worlds `ids` (default all) to the reference at random frames, plus the configured noise on joint
        angles (clipped to the joint limits) and root linear velocity -- the kind of start bcg-eval gives."""
        ids = torch.arange(self.n, device=self.device) if ids is None else ids.reshape(-1)
        hi = self.num_frames - 1 - self.cfg.task.start_margin
        frames = torch.randint(0, hi, (ids.numel(),), generator=self.gen).to(self.device)
        self.env.reset(ids, motion=self.motion, frames=frames, state=self._noisy_start(frames))
        self.frame[ids] = frames
        self.steps[ids] = 0
        self.last_action = self.last_action.index_put((ids,), torch.zeros(ids.numel(), 29, device=self.device))

    def _noisy_start(self, frames: torch.Tensor):
        """The reference SimState at `frames` [n] with task.reset_*_noise added; None when both are zero (the
        env then takes the reference state itself)."""
        from bcg_sim.diffsim import motion_state

        t = self.cfg.task
        if t.reset_joint_noise == 0 and t.reset_root_vel_noise == 0:
            return None
        s = motion_state(self.motion, frames.cpu())
        n = frames.numel()
        q = s.joint_pos + t.reset_joint_noise * torch.randn(n, 29, generator=self.gen)
        s.joint_pos = q.clamp(self._joint_lower, self._joint_upper)
        s.root_lin_vel_w = s.root_lin_vel_w + t.reset_root_vel_noise * torch.randn(n, 3, generator=self.gen)
        return s

    def advance(self, out) -> tuple[torch.Tensor, torch.Tensor]:
        """After env.step: move the clip one frame on; (terminated [N], timed_out [N]) bool."""
        self.frame += 1
        self.steps += 1
        terminated = out.terminated
        timeout = ~terminated & ((self.steps >= self.cfg.task.episode_steps) | (self.frame >= self.num_frames - 1))
        return terminated, timeout

    # ------------------------------------------------------------------ kinematics
    def ref_kinematics(self, frames: torch.Tensor) -> Kinematics:
        f = frames.clamp(0, self.num_frames - 1)
        return Kinematics(*(x[f] for x in self.ref))

    @staticmethod
    def sim_kinematics(out) -> Kinematics:
        s = out.state
        return Kinematics(s.root_pos_w, s.root_quat_w, s.root_lin_vel_w, s.root_ang_vel_w, s.joint_pos,
                          s.joint_vel, out.body_pos_w)

    # ------------------------------------------------------------------ observation / action
    def reference_window(self, frames: torch.Tensor) -> ReferenceWindow:
        """The next K frames after `frames` [N] (as ReferenceTrack.window: past the end, the last frame held
        with zero velocities)."""
        f = frames[:, None] + torch.arange(1, self.k + 1, device=self.device)  # [N, K]
        past_end = (f >= self.num_frames - 1)[..., None]
        f = f.clamp(max=self.num_frames - 1)
        zero = torch.zeros((), device=self.device)
        return ReferenceWindow(self.ref.joint_pos[f], self.ref.root_quat_w[f],
                               torch.where(past_end, zero, self.ref.root_lin_vel_w[f]),
                               torch.where(past_end, zero, self.ref.root_ang_vel_w[f]))

    def observation(self, state, frames: torch.Tensor, last_action: torch.Tensor) -> torch.Tensor:
        """Raw actor observation [N, n_obs] of a SimState (differentiable), by bcg_sim.policy.build_observation."""
        robot = RobotState(state.joint_pos, state.joint_vel, state.root_quat_w,
                           quat_rotate_inv(state.root_quat_w, state.root_ang_vel_w))
        phase = (frames.to(torch.float32) / max(self.num_frames - 1, 1)).clamp(0, 1)[:, None]
        return build_observation(robot, self.reference_window(frames), last_action, phase, self.contract)

    @staticmethod
    def privileged(state) -> torch.Tensor:
        """Critic-only inputs [N, 4]: pelvis height [m] and linear velocity in the pelvis frame [m/s]."""
        return torch.cat([state.root_pos_w[:, 2:3], quat_rotate_inv(state.root_quat_w, state.root_lin_vel_w)], -1)

    def env_action(self, action: torch.Tensor) -> torch.Tensor:
        """Env actions [N, 29] that make the PD targets of the contract's action_to_target(action)."""
        target = self.contract.action_to_target(action)
        return (target - self.env.default_joint_pos) / self.env.cfg.actuation.action_scale

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        s = self.env.state
        return {"frame": self.frame.clone(), "steps": self.steps.clone(), "last_action": self.last_action.detach().clone(),
                "sim_state": [x.detach().clone() for x in s.as_tuple()], "gen": self.gen.get_state(),
                "joint_q": self.env.joint_q.detach().clone(), "joint_qd": self.env.joint_qd.detach().clone()}

    def load_state_dict(self, d: dict) -> None:
        from bcg_sim.diffsim import SimState

        self.frame.copy_(d["frame"])
        self.steps.copy_(d["steps"])
        self.last_action = d["last_action"].to(self.device).clone()
        self.gen.set_state(d["gen"])
        # the env tracks the clip from these frames again; BCG's touchdown rule restarts (feet count as loaded)
        self.env.reset(None, motion=self.motion, frames=self.frame.cpu(), state=SimState(*d["sim_state"]))
        # the exact simulator coordinates (the SimState round trip changes the last bits)
        self.env.joint_q = d["joint_q"].to(self.device).clone()
        self.env.joint_qd = d["joint_qd"].to(self.device).clone()
