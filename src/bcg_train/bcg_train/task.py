"""The motion-tracking task, defined once: starts, episodes, observation, reference features, robustness.

- Starts: every world starts at a frame of one clip in its reference state plus noise (task.randomize). Frames
  are drawn per start bin (task.start.bin_s): a share uniformly, a share at frame 0 (where bcg-eval starts),
  the rest in proportion to each bin's failure hazard (terminations per control step spent in it, averaged
  over iterations) -- so training visits the stretches of the clip where the policy falls.
- Episodes end on a termination (below) or after `task.episode_steps` control steps or at the clip's last
  frame (time-outs, which the critic bootstraps).
- Termination (task.termination): the pelvis height or up axis, or an ankle's or wrist's height, too far from
  the reference; the pelvis below the sim's min_root_height; a non-finite state. Horizontal drift does not end
  an episode (the actor cannot observe it; BeyondMimic's rule).
- Robustness: reset noise, velocity pushes every push_interval_s, observation noise on what the robot's
  sensors measure (encoders, gyroscope, gravity), one control period of action latency in a share of the
  episodes, and per-world physics drawn at every episode start (friction, PD gains per joint, pelvis / torso
  mass and torso COM: `draw_world_params`, native backend); all in task.randomize, written into the run's
  config.yaml.
- Actor observation: exactly `bcg_sim.policy.build_observation` (batched torch), differentiable w.r.t. the
  simulated state, normalized by `RunningNorm` whose mean/std go into the exported contract. Where the contract
  observes the offset from the clip, the pelvis position it sees is what the robot's leg odometry would
  estimate from the simulated soles, plus a random walk that grows with the path (task.randomize.obs_root_drift).
- Critic-only inputs (`privileged`, [N, PRIVILEGED_DIM]): pelvis height, its velocity and its offset from the
  reference in the pelvis frame -- what the termination and the tracking reward depend on.
- `features(kin)`: the ONE reference-feature function (root position/orientation, joint positions, body positions
  relative to the root, root and joint velocities) used by the rewards, the E_track metric and the logs.
- Actions: the contract's `action_to_target` gives PD targets; `env_action` re-expresses them in the env's units.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import torch

from bcg_sim.config import ConfigError
from bcg_sim.g1 import FOOT_BODIES, foot_sphere_positions, joint_limits
from bcg_sim.policy import ReferenceWindow, RobotState, build_observation
from bcg_sim.policy.odometry import support as odometry_support
from bcg_sim.quat import rotate as quat_rotate
from bcg_sim.quat import rotate_inv as quat_rotate_inv
from bcg_sim.quat import to_matrix as quat_to_matrix
from bcg_sim.quat import to_rot6d as quat_to_rot6d
from bcg_train.config import FEATURE_GROUPS, PHYSICS_SCALE_KEYS, SENSOR_NOISE_KEYS, TrainConfig

CM_PER_M = 100.0
PRIVILEGED_DIM = 7  # Task.privileged
END_EFFECTORS = ("left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link")


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
        self.var.copy_((self.var * self.count + v * n + delta**2 * self.count * n / tot) / tot)
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
            raise TaskError(
                f"motion {motion.name!r}: {motion.fps} fps, the task needs the control rate "
                f"{env.cfg.control_hz} (load it with fps=control_hz)"
            )
        if list(motion.body_names) != list(env.body_names):
            raise TaskError(f"motion {motion.name!r}: body list differs from the simulator's G1")
        self.num_frames = motion.num_frames
        need = horizon + cfg.task.start_margin + 2
        if self.num_frames < need:
            raise TaskError(
                f"motion {motion.name!r} has {self.num_frames} frames at {motion.fps:g} Hz, shorter "
                f"than horizon {horizon} + task.start_margin {cfg.task.start_margin} + 2"
            )

        def t(a):
            return torch.as_tensor(a, dtype=torch.float32, device=self.device)

        self.ref = Kinematics(
            t(motion.root_pos_w),
            t(motion.root_quat_w),
            t(motion.root_lin_vel_w),
            t(motion.root_ang_vel_w),
            t(motion.joint_pos),
            t(motion.joint_vel),
            t(motion.body_pos_w),
        )
        self.k = contract.observation.ref_horizon
        self.default_joint_pos = torch.as_tensor(contract.default_joint_pos, dtype=torch.float32, device=self.device)
        self.frame = torch.zeros(self.n, dtype=torch.long, device=self.device)  # current clip frame per world
        self.steps = torch.zeros(self.n, dtype=torch.long, device=self.device)  # control steps into the episode
        self.last_action = torch.zeros(self.n, 29, device=self.device)  # raw policy output of the previous step
        # [29] rad: reset noise stays inside the joint ranges
        self._joint_lower, self._joint_upper = (torch.tensor(a, dtype=torch.float32) for a in joint_limits())
        self._ee = torch.tensor([list(env.body_names).index(b) for b in END_EFFECTORS], device=self.device)
        # start bins over the frames a reset may draw, [0, max_start)
        self.max_start = self.num_frames - 1 - cfg.task.start_margin
        self.bin_frames = max(1, round(cfg.task.start.bin_s * env.cfg.control_hz))
        n_bins = -(-self.max_start // self.bin_frames)
        self.hazard = torch.zeros(n_bins, dtype=torch.float64)  # averaged terminations per control step in a bin
        self._bin_fails = torch.zeros(n_bins, dtype=torch.float64)  # this iteration's counts
        self._bin_visits = torch.zeros(n_bins, dtype=torch.float64)
        self.push_timer = torch.zeros(self.n, dtype=torch.long)  # control steps until the next push
        self.delayed = torch.zeros(self.n, dtype=torch.bool, device=self.device)  # this episode's actions act late
        # the pelvis estimate the actor observes (ref_root_offset_xy): leg odometry's rule on the simulated soles
        self._observes_root = "ref_root_offset_xy" in contract.slices()
        self._odometry_error = torch.zeros(self.n, 2, device=self.device)  # [N, 2] m, of the odometry rule
        self._walk = torch.zeros(self.n, 2, device=self.device)  # [N, 2] m, obs_root_drift's random walk
        self._last_root_xy = torch.zeros(self.n, 2, device=self.device)  # [N, 2] m, the pelvis at the last step
        self._fresh = torch.ones(self.n, dtype=torch.bool, device=self.device)  # no estimate step since a reset
        self._feet = torch.tensor([list(env.body_names).index(b) for b in FOOT_BODIES], device=self.device)
        self._spheres = torch.as_tensor(foot_sphere_positions(), dtype=torch.float32, device=self.device)  # [S, 3]
        self._anchor = torch.zeros(self.n, 2 * len(self._spheres), 2, device=self.device)  # [N, 2S, 2] m, sole points
        self._control_hz = env.cfg.control_hz
        rz = cfg.task.randomize
        self.obs_noise_std = self.noise_std(SENSOR_NOISE_KEYS.values())  # [n_obs]
        self.physics_keys = rz.physics_keys_on()  # per-world physics drawn at each start (none: the sim config's)
        self.begin_iteration(0)  # sets randomize_share, of the physics ranges and the delay share
        if self.physics_keys:
            key = f"task.randomize.{self.physics_keys[0]}"
            if env.cfg.backend != "native":
                raise ConfigError(
                    f"train config: {key}: per-world physics randomization needs the native backend; "
                    f"backend {env.cfg.backend!r} cannot run it"
                )
            from bcg_sim.diffsim.native import check_gain_range

            check_gain_range(env.cfg, rz.kp_scale[1], rz.kd_scale[0], "train config: task.randomize.kp_scale/kd_scale")
            ratio = env.cfg.contact.friction_slope_ratio * rz.friction_slope_scale[1]
            if ratio > 1.0:  # kf > kd leaves kf - kd explicit on the sole's light tangential mass: unstable
                raise ConfigError(
                    f"train config: task.randomize.friction_slope_scale: max {rz.friction_slope_scale[1]:g} x "
                    f"contact.friction_slope_ratio {env.cfg.contact.friction_slope_ratio:g} = {ratio:g} > 1 "
                    "(the friction slope may not exceed the normal damping kd)"
                )

    # ------------------------------------------------------------------ episodes
    def reset(self, ids: torch.Tensor | None = None) -> None:
        """Reset worlds `ids` (default all) to the reference at sampled frames (task.start), plus the reset noise
        of task.randomize on joint angles (clipped to the joint limits) and root velocities."""
        ids = torch.arange(self.n, device=self.device) if ids is None else ids.reshape(-1)
        frames = self.sample_frames(ids.numel()).to(self.device)
        self.env.reset(ids, motion=self.motion, frames=frames, state=self._noisy_start(frames))
        self.frame[ids] = frames
        self.steps[ids] = 0
        self.last_action = self.last_action.index_put((ids,), torch.zeros(ids.numel(), 29, device=self.device))
        self.push_timer[ids.cpu()] = self._push_gap(ids.numel())
        self._odometry_error = self._odometry_error.index_put((ids,), torch.zeros(ids.numel(), 2, device=self.device))
        self._walk = self._walk.index_put((ids,), torch.zeros(ids.numel(), 2, device=self.device))
        self._fresh = self._fresh.index_put((ids,), torch.ones(ids.numel(), dtype=torch.bool, device=self.device))
        delay_prob = self.randomize_share * self.cfg.task.randomize.action_delay_prob
        delayed = torch.rand(ids.numel(), generator=self.gen) < delay_prob
        self.delayed = self.delayed.index_put((ids,), delayed.to(self.device))
        if self.physics_keys:  # drawn last and only when on: a run without it keeps its random stream
            self.env.set_world_params(ids, self.draw_world_params(ids.numel()))

    def draw_world_params(self, n: int):
        """Per-world physics of n new episodes (bcg_sim.diffsim.WorldParams.draw) in task.randomize's ranges,
        shrunk towards the nominal robot by `randomize_share` (the ramp), from the task's generator."""
        from bcg_sim.diffsim.world_params import WorldParams

        rz, s = self.cfg.task.randomize, self.randomize_share
        ranges = {k: [1.0 + s * (x - 1.0) for x in getattr(rz, k)] for k in PHYSICS_SCALE_KEYS}
        ranges["torso_com_offset"] = [s * x for x in rz.torso_com_offset]
        return WorldParams.draw(n, self.gen, **ranges)

    def begin_iteration(self, iteration: int) -> None:
        """Set the randomization ramp (task.randomize.ramp_iterations) for the episodes that start in iteration
        `iteration` (0-based)."""
        ramp = self.cfg.task.randomize.ramp_iterations
        self.randomize_share = min(1.0, iteration / ramp) if ramp else 1.0

    def start_weights(self) -> torch.Tensor:
        """Probability of each start bin [n_bins] (frame-0 starts aside): uniform_floor spread evenly, the rest
        by the failure hazard of the bin and, at half weight, of the bin after it (a fall is best practised
        from shortly before it)."""
        st = self.cfg.task.start
        n_bins = self.hazard.numel()
        uniform = torch.full((n_bins,), 1.0 / n_bins, dtype=torch.float64)
        if st.sampling == "uniform":
            return uniform
        h = self.hazard.clone()
        h[:-1] += 0.5 * self.hazard[1:]
        if float(h.sum()) <= 0:
            return uniform
        return st.uniform_floor * uniform + (1 - st.uniform_floor) * h / h.sum()

    def sample_frames(self, n: int) -> torch.Tensor:
        """n start frames [n] in [0, max_start): bins by `start_weights`, uniform inside a bin; a share at 0."""
        bins = torch.multinomial(self.start_weights(), n, replacement=True, generator=self.gen)
        lo = bins * self.bin_frames
        width = (torch.clamp(lo + self.bin_frames, max=self.max_start) - lo).to(torch.float64)
        frames = lo + (torch.rand(n, generator=self.gen, dtype=torch.float64) * width).long()
        first = torch.rand(n, generator=self.gen) < self.cfg.task.start.first_frame
        return torch.where(first, torch.zeros_like(frames), frames)

    def _noisy_start(self, frames: torch.Tensor):
        """The reference SimState at `frames` [n] with task.randomize's reset noise; None when all are zero (the
        env then takes the reference state itself)."""
        from bcg_sim.diffsim import motion_state

        rz = self.cfg.task.randomize
        if rz.reset_joint_noise == 0 and rz.reset_root_vel_noise == 0 and rz.reset_root_ang_vel_noise == 0:
            return None
        s = motion_state(self.motion, frames.cpu())
        n = frames.numel()
        q = s.joint_pos + rz.reset_joint_noise * torch.randn(n, 29, generator=self.gen)
        s.joint_pos = q.clamp(self._joint_lower, self._joint_upper)
        s.root_lin_vel_w = s.root_lin_vel_w + rz.reset_root_vel_noise * torch.randn(n, 3, generator=self.gen)
        s.root_ang_vel_w = s.root_ang_vel_w + rz.reset_root_ang_vel_noise * torch.randn(n, 3, generator=self.gen)
        return s

    def _push_gap(self, n: int) -> torch.Tensor:
        lo, hi = self.cfg.task.randomize.push_interval_s
        return torch.round((lo + (hi - lo) * torch.rand(n, generator=self.gen)) * self._control_hz).long()

    def apply_pushes(self) -> int:
        """Push the worlds whose push timer ran out: their root's horizontal velocity changes by a uniform
        +-push_lin_vel (between rollouts, on the detached state). Returns how many were pushed."""
        v = self.cfg.task.randomize.push_lin_vel
        if v <= 0:
            return 0
        due = (self.push_timer <= 0).nonzero().squeeze(-1)
        if due.numel() == 0:
            return 0
        from bcg_sim.diffsim.state import from_newton, to_newton

        env = self.env
        ids = due.to(self.device)
        s = from_newton(env.joint_q[ids], env.joint_qd[ids], env.root_com_b)
        kick = (2 * torch.rand(due.numel(), 2, generator=self.gen) - 1) * v
        s.root_lin_vel_w = s.root_lin_vel_w + torch.cat([kick, torch.zeros(due.numel(), 1)], -1).to(self.device)
        _, qd = to_newton(s, env.root_com_b)
        env.joint_qd = env.joint_qd.index_put((ids,), qd.detach())
        self.push_timer[due] = self._push_gap(due.numel())
        return int(due.numel())

    def advance(self, out) -> tuple[torch.Tensor, torch.Tensor]:
        """After env.step: move the clip one frame on; (terminated [N], timed_out [N]) bool."""
        self.frame += 1
        self.steps += 1
        self.push_timer -= 1
        self._estimate(out)
        terminated = self.terminated(out)
        timeout = ~terminated & ((self.steps >= self.cfg.task.episode_steps) | (self.frame >= self.num_frames - 1))
        with torch.no_grad():
            b = torch.clamp(self.frame.cpu() // self.bin_frames, max=self.hazard.numel() - 1)
            self._bin_visits.index_add_(0, b, torch.ones(self.n, dtype=torch.float64))
            self._bin_fails.index_add_(0, b, terminated.cpu().to(torch.float64))
        return terminated, timeout

    @property
    def root_drift(self) -> torch.Tensor:
        """[N, 3] m, the pelvis estimate the actor observes minus the true pelvis (zero in z)."""
        return torch.cat([self._odometry_error + self._walk, torch.zeros(self.n, 1, device=self.device)], -1)

    @torch.no_grad()
    def _estimate(self, out) -> None:
        """Advance the pelvis estimate the actor observes by this step (`root_drift` = estimate - true pelvis):
        with task.root_estimate "odometry" the error of leg odometry (bcg_sim.policy.odometry: same support rule
        and anchor update) on the simulated soles -- zero while the supporting soles stay put, growing where they
        slide -- plus (either way) a random walk of
        obs_root_drift per axis per sqrt(m) of the pelvis' horizontal path for what the simulator does not show
        (encoder noise, the model's errors). A world's first step after a reset starts both at zero."""
        if not self._observes_root:  # no draws: the random stream of a run without it is unchanged
            return
        n, fresh = self.n, self._fresh[:, None]
        if self.cfg.task.root_estimate == "odometry":
            foot_q = out.body_quat_w[:, self._feet, None, :].expand(n, 2, len(self._spheres), 4)
            spheres = out.body_pos_w[:, self._feet, None, :] + quat_rotate(foot_q, self._spheres.expand(n, 2, -1, -1))
            spheres = spheres.reshape(n, -1, 3)  # [N, 2S, 3] world
            xy, s = spheres[..., :2], odometry_support(spheres[..., 2])[..., None]  # [N, 2S, 2], [N, 2S, 1]
            anchor = torch.where(fresh[..., None], xy, self._anchor)
            # LegOdometry's estimate minus the true pelvis: sum_s w_s (anchor_s - sphere_s), w = s / sum(s)
            self._odometry_error = ((s / s.sum(1, keepdim=True)) * (anchor - xy)).sum(1)
            self._anchor = s * anchor + (1 - s) * (xy + self._odometry_error[:, None, :])
        root_xy = out.state.root_pos_w[:, :2].detach()
        sigma = self.cfg.task.randomize.obs_root_drift
        if sigma > 0:
            path = torch.where(fresh, 0.0, (root_xy - self._last_root_xy).norm(dim=-1, keepdim=True))
            self._walk = self._walk + torch.randn(n, 2, generator=self.gen).to(self.device) * sigma * path.sqrt()
        self._last_root_xy = root_xy.clone()
        self._fresh = torch.zeros_like(self._fresh)

    @torch.no_grad()
    def terminated(self, out) -> torch.Tensor:
        """[N] bool: the episode ends here (task.termination; `self.frame` is the frame of out's state)."""
        te = self.cfg.task.termination
        s = out.state
        ref = self.ref_kinematics(self.frame)
        finite = torch.isfinite(s.joint_pos).all(-1) & torch.isfinite(s.root_pos_w).all(-1)
        end = out.fell | ~finite
        if te.root_height > 0:
            end |= (s.root_pos_w[:, 2] - ref.root_pos_w[:, 2]).abs() > te.root_height
        if te.root_tilt > 0:
            cos = (_up(s.root_quat_w) * _up(ref.root_quat_w)).sum(-1)
            end |= cos < math.cos(te.root_tilt)
        if te.end_effector_height > 0:
            dz = out.body_pos_w[:, self._ee, 2] - ref.body_pos_w[:, self._ee, 2]
            end |= (dz.abs() > te.end_effector_height).any(-1)
        if te.root_distance > 0:
            end |= (s.root_pos_w - ref.root_pos_w).norm(dim=-1) > te.root_distance
        return end | ~torch.isfinite(out.body_pos_w).all(-1).all(-1)

    def end_iteration(self) -> dict:
        """Fold this iteration's terminations per start bin into the failure hazard (task.start). Returns the
        log: the peak hazard [terminations per control step] and its bin's start [s] in the clip."""
        seen = self._bin_visits > 0
        m = self.cfg.task.start.failure_momentum
        rate = self._bin_fails[seen] / self._bin_visits[seen]
        self.hazard[seen] = (1 - m) * self.hazard[seen] + m * rate
        self._bin_fails.zero_()
        self._bin_visits.zero_()
        peak = int(torch.argmax(self.hazard))
        return {
            "hazard_peak": float(self.hazard[peak]),
            "hazard_peak_s": peak * self.bin_frames / self._control_hz,
            "randomize_share": self.randomize_share,
        }

    # ------------------------------------------------------------------ kinematics
    def ref_kinematics(self, frames: torch.Tensor) -> Kinematics:
        f = frames.clamp(0, self.num_frames - 1)
        return Kinematics(*(x[f] for x in self.ref))

    @staticmethod
    def sim_kinematics(out) -> Kinematics:
        s = out.state
        return Kinematics(
            s.root_pos_w, s.root_quat_w, s.root_lin_vel_w, s.root_ang_vel_w, s.joint_pos, s.joint_vel, out.body_pos_w
        )

    # ------------------------------------------------------------------ observation / action
    def reference_window(self, frames: torch.Tensor) -> ReferenceWindow:
        """The next K frames after `frames` [N] (as ReferenceTrack.window: past the end, the last frame held
        with zero velocities)."""
        f = frames[:, None] + torch.arange(1, self.k + 1, device=self.device)  # [N, K]
        past_end = (f >= self.num_frames - 1)[..., None]
        f = f.clamp(max=self.num_frames - 1)
        zero = torch.zeros((), device=self.device)
        return ReferenceWindow(
            self.ref.joint_pos[f],
            self.ref.root_quat_w[f],
            torch.where(past_end, zero, self.ref.root_lin_vel_w[f]),
            torch.where(past_end, zero, self.ref.root_ang_vel_w[f]),
            self.ref.root_pos_w[f],
        )

    def observation(self, state, frames: torch.Tensor, last_action: torch.Tensor) -> torch.Tensor:
        """Raw actor observation [N, n_obs] of a SimState (differentiable), by bcg_sim.policy.build_observation;
        exact (no sensor noise: `sensor_noise` draws it)."""
        robot = RobotState(
            state.joint_pos,
            state.joint_vel,
            state.root_quat_w,
            quat_rotate_inv(state.root_quat_w, state.root_ang_vel_w),
            state.root_pos_w + self.root_drift,
        )
        phase = (frames.to(torch.float32) / max(self.num_frames - 1, 1)).clamp(0, 1)[:, None]
        return build_observation(robot, self.reference_window(frames), last_action, phase, self.contract)

    def sensor_columns(self, key: str) -> torch.Tensor:
        """[n_obs] 1.0 on the observation columns whose noise the sensor-noise `key` (a config.SENSOR_NOISE_KEYS
        value) sets, 0.0 elsewhere."""
        return torch.cat(
            [
                torch.full((it.size,), float(SENSOR_NOISE_KEYS.get(it.name) == key))
                for it in self.contract.observation.layout
            ]
        ).to(self.device)

    def noise_std(self, keys: Iterable[str]) -> torch.Tensor:
        """[n_obs] std of each observation column's sensor noise: task.randomize's value for the columns of the
        sensor-noise `keys` (config.SENSOR_NOISE_KEYS' values), zero elsewhere."""
        rz = self.cfg.task.randomize
        std = torch.zeros(self.contract.n_obs, device=self.device)
        for key in set(keys):
            std += self.sensor_columns(key) * getattr(rz, key)
        return std

    def sensor_noise(
        self, obs: torch.Tensor, generator: torch.Generator | None = None, std: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Noise [N, n_obs] to add to a raw observation: Gaussian with task.randomize's stds on the features the
        robot's sensors measure (or with `std` [n_obs]), zero elsewhere (not differentiated); drawn from
        `generator` (default: the task's own stream)."""
        std = self.obs_noise_std if std is None else std
        if not bool((std > 0).any()):
            return torch.zeros_like(obs)
        gen = self.gen if generator is None else generator
        return (torch.randn(obs.shape, generator=gen).to(self.device) * std).detach()

    def privileged(self, state, frames: torch.Tensor) -> torch.Tensor:
        """Critic-only inputs [N, 7]: pelvis height [m], pelvis linear velocity [m/s] and the reference pelvis
        position minus the pelvis' [m], both in the pelvis frame (frames [N]: the state's clip frame)."""
        q = state.root_quat_w
        offset_w = self.ref.root_pos_w[frames.clamp(0, self.num_frames - 1)] - state.root_pos_w
        return torch.cat(
            [state.root_pos_w[:, 2:3], quat_rotate_inv(q, state.root_lin_vel_w), quat_rotate_inv(q, offset_w)], -1
        )

    def delay(self, action: torch.Tensor) -> torch.Tensor:
        """The raw action [N, 29] that reaches the motors this step: in worlds whose episode drew a delay
        (task.randomize.action_delay_prob) the previous step's (`last_action`, zero after a reset) -- one control
        period of latency, the most a robot's loop should add -- else `action` itself. Call before
        `last_action` is set to `action`."""
        return torch.where(self.delayed[:, None], self.last_action, action)

    def action_rate_cost(self, action: torch.Tensor) -> torch.Tensor:
        """[N] reward.action_rate x the mean over joints of (action - last_action)^2, raw actions [N, 29]: what
        each step's reward loses to a jumpy policy (differentiable in both actions). Call before `last_action`
        is set to `action`."""
        w = self.cfg.reward.action_rate
        if w == 0:
            return torch.zeros(self.n, device=self.device)
        return w * (action - self.last_action).square().mean(-1)

    def env_action(self, action: torch.Tensor) -> torch.Tensor:
        """Env actions [N, 29] that make the PD targets of the contract's action_to_target(action)."""
        target = self.contract.action_to_target(action)
        return self.env.action_for_target(target)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        s = self.env.state
        return {
            "frame": self.frame.clone(),
            "steps": self.steps.clone(),
            "last_action": self.last_action.detach().clone(),
            "sim_state": [x.detach().clone() for x in s.as_tuple()],
            "gen": self.gen.get_state(),
            "joint_q": self.env.joint_q.detach().clone(),
            "joint_qd": self.env.joint_qd.detach().clone(),
            "hazard": self.hazard.clone(),
            "push_timer": self.push_timer.clone(),
            "delayed": self.delayed.clone(),
            "root_estimate": [x.clone() for x in (self._odometry_error, self._walk, self._anchor, self._last_root_xy)]
            + [self._fresh.clone()],
            "world_params": None
            if self.env.world_params is None
            else {k: v.clone() for k, v in self.env.world_params.as_dict().items()},
        }

    def load_state_dict(self, d: dict) -> None:
        from bcg_sim.diffsim import SimState

        self.frame.copy_(d["frame"])
        self.steps.copy_(d["steps"])
        self.hazard.copy_(d["hazard"])
        self.push_timer.copy_(d["push_timer"])
        self.delayed.copy_(d.get("delayed", torch.zeros_like(self.delayed)))  # absent before action delay existed
        if "root_drift" in d and "root_estimate" not in d:  # a checkpoint from when the drift was the walk alone
            self._walk = d["root_drift"][:, :2].to(self.device).clone()
        if "root_estimate" in d:  # absent before the estimate existed: it restarts as after a reset
            err, walk, anchor, last, fresh = (x.to(self.device).clone() for x in d["root_estimate"])
            self._odometry_error, self._walk, self._anchor, self._last_root_xy, self._fresh = (
                err,
                walk,
                anchor,
                last,
                fresh,
            )
        self.last_action = d["last_action"].to(self.device).clone()
        self.gen.set_state(d["gen"])
        # the env tracks the clip from these frames again; BCG's touchdown rule restarts (feet count as loaded)
        self.env.reset(None, motion=self.motion, frames=self.frame.cpu(), state=SimState(*d["sim_state"]))
        if d.get("world_params") is not None:  # each world's physics until its episode ends (absent: sim config's)
            from bcg_sim.diffsim.world_params import WorldParams

            self.env.set_world_params(None, WorldParams.from_dict(d["world_params"]))
        # the exact simulator coordinates (the SimState round trip changes the last bits)
        self.env.joint_q = d["joint_q"].to(self.device).clone()
        self.env.joint_qd = d["joint_qd"].to(self.device).clone()


def _up(q: torch.Tensor) -> torch.Tensor:
    """The body's z axis in the world frame [N, 3] of w x y z quaternions q [N, 4] (third column of R(q))."""
    return quat_to_matrix(q)[..., :, 2]
