"""Typed training configuration: config/train/default.yaml, overridden by a preset config/train/NAME.yaml.

A preset holds any subset of default.yaml's keys (nested sections merge key by key), and may build on another
preset (`base: cpu`: that preset's keys first, its own over them); unknown keys and wrong
types are `ConfigError`s naming the file and key (bcg_sim.config.from_dict). `parse_budget` reads the
`budget` string: "200it" (iterations), "2M" / "500k" / "4096" (env samples), "30min" / "90s" / "1h" (wall clock).
"""

from __future__ import annotations

import copy
import re
from dataclasses import asdict, dataclass, field
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints

from bcg_sim.config import ConfigError, checker, config_dir, from_dict, load_yaml
from bcg_sim.policy.contract import ROOT_SOURCES, RootSource

AlgoName = Literal["shac", "shac-bcg", "ppo"]  # bcg_train.algorithm.ALGORITHMS: the class of each
RewardKind = Literal["add", "tracking"]  # bcg_train.rewards.REWARDS: the class of each
ALGOS = get_args(AlgoName)
REWARD_KINDS = get_args(RewardKind)
FEATURE_GROUPS = ("root_pos", "root_ori", "joint_pos", "body_pos", "root_vel", "joint_vel")


@dataclass
class TerminationConfig:
    """When a training episode ends early (bcg_train.task.Task.advance); 0 switches a rule off. Besides these,
    a pelvis below the sim's termination.min_root_height or a non-finite state always ends it."""

    root_height: float = 0.25  # [m] |pelvis height - reference pelvis height|
    root_tilt: float = 0.8  # [rad] angle between the pelvis' and the reference's up axes
    end_effector_height: float = 0.25  # [m] |height - reference height| of any ankle or wrist
    root_distance: float = 0.0  # [m] 3-D pelvis distance from the reference (0: off; the actor cannot see it)


@dataclass
class StartConfig:
    """Where episodes start: frames over the clip, weighted by where the policy fails (bins of `bin_s`)."""

    sampling: Literal["uniform", "adaptive"] = "adaptive"
    bin_s: float = 1.0  # [s] width of a start bin
    uniform_floor: float = 0.3  # share of starts drawn uniformly over the bins (the rest by failure rate)
    first_frame: float = 0.1  # share of starts at frame 0 (where bcg-eval starts)
    failure_momentum: float = 0.05  # per-iteration exponential average of the failures counted in each bin


START_SAMPLINGS = get_args(get_type_hints(StartConfig)["sampling"])  # the Literal's values


@dataclass
class RandomizeConfig:
    """Robustness inside the differentiable simulator (noise is not differentiated; the state still is)."""

    reset_joint_noise: float = 0.05  # [rad] std of noise on a reset's joint angles (clamped to the ranges)
    reset_root_vel_noise: float = 0.1  # [m/s] std of noise on a reset's root linear velocity
    reset_root_ang_vel_noise: float = 0.1  # [rad/s] std of noise on a reset's root angular velocity
    push_interval_s: list[float] = field(default_factory=lambda: [1.0, 3.0])  # [s] uniform gap between pushes
    push_lin_vel: float = 0.3  # [m/s] a push adds a uniform +-this to the root's horizontal velocity (0: off)
    obs_joint_pos: float = 0.01  # [rad] std of encoder noise on the observed joint angles
    obs_joint_vel: float = 0.3  # [rad/s] ... joint velocities
    obs_ang_vel: float = 0.1  # [rad/s] ... gyroscope
    obs_gravity: float = 0.02  # std of noise on the observed projected gravity (unit vector)
    obs_root_offset: float = 0.01  # [m] std of noise on the observed offset from the clip (ref_root_offset_xy)
    # [m per sqrt(m)] the pelvis position estimate's random-walk drift per axis, per square root of the horizontal
    # path walked: leg odometry in MuJoCo (bcg_sim.policy.odometry) drifts ~7 cm per sqrt(m) of path in norm
    obs_root_drift: float = 0.05
    action_delay_prob: float = 0.0  # share of episodes whose actions reach the motors one control step late
    # Per-world physics (bcg_sim.diffsim.world_params), drawn uniformly at every episode start; native backend
    # only. [min, max] scales ([1, 1]: off), offsets +-[x, y, z] ([0, 0, 0]: off).
    friction_scale: list[float] = field(default_factory=lambda: [1.0, 1.0])  # x contact.friction_mu, per world
    kp_scale: list[float] = field(default_factory=lambda: [1.0, 1.0])  # x PD stiffness, per joint and world
    kd_scale: list[float] = field(default_factory=lambda: [1.0, 1.0])  # x PD damping, per joint and world
    pelvis_mass_scale: list[float] = field(default_factory=lambda: [1.0, 1.0])  # x pelvis mass and inertia
    torso_mass_scale: list[float] = field(default_factory=lambda: [1.0, 1.0])  # x torso_link mass and inertia
    torso_com_offset: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])  # [m] +- torso COM, torso frame
    friction_slope_scale: list[float] = field(default_factory=lambda: [1.0, 1.0])  # x contact's kf, per world
    # the per-world physics ranges and action_delay_prob grow linearly from none to the above over the first this
    # many iterations (0: in full from the first): a skill first learned on the nominal robot, then made robust
    ramp_iterations: int = 0

    def physics_keys_on(self) -> list[str]:
        """The per-world physics keys whose range is not the identity (none: every world runs the sim config)."""
        on = [k for k in PHYSICS_SCALE_KEYS if list(getattr(self, k)) != [1.0, 1.0]]
        return on + (["torso_com_offset"] if any(x != 0 for x in self.torso_com_offset) else [])


PHYSICS_SCALE_KEYS = (
    "friction_scale",
    "kp_scale",
    "kd_scale",
    "pelvis_mass_scale",
    "torso_mass_scale",
    "friction_slope_scale",
)
# observation features (bcg_sim.policy layout names) that carry sensor noise -> the task.randomize key of its std
SENSOR_NOISE_KEYS = {
    "joint_pos_rel": "obs_joint_pos",
    "joint_vel": "obs_joint_vel",
    "base_ang_vel_b": "obs_ang_vel",
    "projected_gravity_b": "obs_gravity",
    "ref_root_offset_xy": "obs_root_offset",
}


@dataclass
class TaskConfig:
    motion: str = "run"
    motion_start: float = 0.0  # [s] the task uses the clip from here (0: its first frame)
    motion_end: float | None = None  # [s] ... up to here (None: its last frame)
    episode_steps: int = 500
    start_margin: int = 16
    # the actor observes its offset from the clip (ref_root_offset_xy, from leg odometry on the robot), so it can
    # steer back to the clip's path instead of only copying its velocities
    observe_root_offset: bool = False
    # what the observed pelvis position gets wrong in training: "odometry" = leg odometry's own error on the
    # simulated soles (bcg_sim.policy.odometry's rule) plus randomize.obs_root_drift's walk; "random_walk" = the
    # walk alone on the simulator's pelvis
    root_estimate: Literal["odometry", "random_walk"] = "odometry"
    # where that position comes from on the robot, written into the contract (observation.root_source):
    # "leg_odometry" alone, or "pose" = a pose source off the soles (lidar odometry) carried by leg odometry
    # between its poses (bcg_sim.policy.pose); its error in training is root_estimate "random_walk"'s
    root_source: RootSource = "leg_odometry"
    obs_norm_clip: float = 5.0
    obs_norm_epsilon: float = 1e-4
    termination: TerminationConfig = field(default_factory=TerminationConfig)
    start: StartConfig = field(default_factory=StartConfig)
    randomize: RandomizeConfig = field(default_factory=RandomizeConfig)


@dataclass
class RewardConfig:
    kind: RewardKind = "add"
    tracking_weights: dict[str, float] = field(default_factory=dict)
    tracking_scales: dict[str, float] = field(default_factory=dict)
    alive_bonus: float = 0.0
    action_rate: float = 0.0  # r -= this x mean over joints of (a_t - a_{t-1})^2, raw actions (bcg_train.task)


@dataclass
class ADDConfig:
    """ADD discriminator and reward (bcg_train.rewards.ADDReward; the module docstring explains the choices)."""

    hidden: list[int] = field(default_factory=lambda: [256, 128])
    reward_form: Literal["rational", "softplus"] = "rational"
    reward_knee: float = 2.0  # rational: r = knee / (knee - log D), so r = 1/2 where -log D = knee
    reward_floor: float = 1e-4  # softplus: r = -log(max(1 - D, floor))
    optimizer: Literal["sgd", "adam"] = "sgd"
    lr: float = 2.5e-4
    momentum: float = 0.9  # sgd only
    weight_decay: float = 1e-4
    grad_penalty: float = 2.0
    logit_reg: float = 0.01
    replay_size: int = 200_000
    batch_size: int = 128  # current negatives per discriminator step (plus as many from the replay)
    epochs: int = 2  # passes over the current negatives per iteration
    delta_norm_min: float = 1e-4
    root_xy: bool = False  # the root's world x y in delta (off: hidden, as the actor cannot observe it)


ADD_REWARD_FORMS = get_args(get_type_hints(ADDConfig)["reward_form"])  # the Literal's values
ADD_OPTIMIZERS = get_args(get_type_hints(ADDConfig)["optimizer"])


@dataclass
class SHACConfig:
    horizon: int = 16
    gamma: float = 0.99
    lam: float = 0.95
    critic_iters: int = 16
    critic_minibatches: int = 4
    target_tau: float = 0.995
    betas: list[float] = field(default_factory=lambda: [0.7, 0.95])
    actor_lr: float = 2e-3
    critic_lr: float = 5e-4
    lr_decay: Literal["linear", "constant"] = "linear"
    grad_clip: float = 1.0
    actor_hidden: list[int] = field(default_factory=lambda: [256, 128])
    critic_hidden: list[int] = field(default_factory=lambda: [256, 128])
    layer_norm: bool = True  # LayerNorm after each hidden layer of actor and critic (DiffRL)
    action_noise_std: float = 0.1
    # actor loss += this x mean over the rollout's observations and joints of (pi(o + n) - pi(o))^2, n the task's
    # sensor noise: a policy whose actions do not follow the sensors' noise (CAPS' spatial smoothness term)
    obs_smoothness: float = 0.0
    # the sensor-noise keys (task.randomize, SENSOR_NOISE_KEYS' values) whose noise the term adds
    obs_smoothness_keys: list[str] = field(default_factory=lambda: list(SENSOR_NOISE_KEYS.values()))
    max_grad_norm: float = 1e6
    max_consecutive_skips: int = 5
    gradvar_every: int = 5
    gradvar_rows: int = 4
    gradvar_bootstrap: int = 4000


LR_DECAYS = get_args(get_type_hints(SHACConfig)["lr_decay"])


@dataclass
class PPOConfig:
    steps_per_env: int = 24
    epochs: int = 5
    minibatches: int = 4
    clip: float = 0.2
    lr: float = 1e-3
    entropy_coef: float = 0.005
    value_loss_coef: float = 1.0
    desired_kl: float = 0.01
    init_noise_std: float = 0.5
    hidden: list[int] = field(default_factory=lambda: [256, 128])
    gamma: float = 0.99
    lam: float = 0.95
    max_grad_norm: float = 1.0


@dataclass
class TrainEvalConfig:
    """Evaluation during training (bcg_train.eval.diffsim_eval), the exported policy in bcg_sim: the headline
    is bcg-eval's protocol (the whole clip from its first frame, bcg-eval's start noise, `clip_runs` seeds);
    beside it `starts` windows of `seconds` spread over the clip, started exactly in the reference state."""

    every: int = 10
    clip_runs: int = 4
    clip_seconds: float = 0.0  # [s] cap on the whole-clip runs (0: the whole clip)
    starts: int = 8
    seconds: float = 2.0
    mujoco_runs: int = 0  # whole-clip runs in MuJoCo (project G1) per evaluation, the mj_* columns (0: none)
    mujoco_base_seed: int = 100  # their seeds base + i: start states apart from bcg-eval's (seeds 0..)
    # sensor noise std on those runs: encoders [rad], joint velocities [rad/s], gyroscope [rad/s] (bcg-eval --noise)
    mujoco_noise: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    best_by: Literal["bcg_sim", "mujoco"] = "bcg_sim"  # which whole-clip headline picks policy_best


@dataclass
class TrainConfig:
    algo: AlgoName = "shac-bcg"
    budget: str = "200it"
    seed: int = 0
    device: str = "cpu"
    kappa: float = 300.0
    num_envs: int = 64
    checkpoint_every: int = 10
    task: TaskConfig = field(default_factory=TaskConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    add: ADDConfig = field(default_factory=ADDConfig)
    shac: SHACConfig = field(default_factory=SHACConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    eval: TrainEvalConfig = field(default_factory=TrainEvalConfig)
    # keys of config/sim.yaml this run changes (nested, merged key by key), e.g. the 5 ms step: {sim_dt: 0.005,
    # solver: {implicit_contact_spring: true, implicit_spring_theta: 0.5}}; kappa and device above win over it
    sim: dict[str, Any] = field(default_factory=dict)

    def sim_config(self):
        """config/sim.yaml with this run's `sim` keys merged over it, kappa and device set (a SimConfig)."""
        from bcg_sim.diffsim.config import SimConfig

        data = _merge(load_yaml("sim"), self.sim)
        sim = from_dict(SimConfig, data, where="sim (train config over config/sim.yaml)")
        return dc_replace(sim.with_kappa(self.kappa), device=self.device).validate()

    def validate(self, where: str = "train config") -> TrainConfig:
        need = checker(where)
        need(self.algo in ALGOS, "algo", f"must be one of {ALGOS}, got {self.algo!r}")
        need(
            self.reward.kind in REWARD_KINDS, "reward.kind", f"must be one of {REWARD_KINDS}, got {self.reward.kind!r}"
        )
        for key in ("tracking_weights", "tracking_scales"):
            groups = getattr(self.reward, key)
            need(
                set(groups) == set(FEATURE_GROUPS),
                f"reward.{key}",
                f"needs exactly the groups {FEATURE_GROUPS}, got {sorted(groups)}",
            )
        need(all(s > 0 for s in self.reward.tracking_scales.values()), "reward.tracking_scales", "must be > 0")
        need(self.reward.action_rate >= 0, "reward.action_rate", f"must be >= 0, got {self.reward.action_rate}")
        kinds = get_args(get_type_hints(TaskConfig)["root_estimate"])
        need(
            self.task.root_estimate in kinds,
            "task.root_estimate",
            f"must be one of {kinds}, got {self.task.root_estimate!r}",
        )
        need(
            self.task.root_source in ROOT_SOURCES,
            "task.root_source",
            f"must be one of {ROOT_SOURCES}, got {self.task.root_source!r}",
        )
        need(
            self.task.root_source == "leg_odometry" or self.task.root_estimate == "random_walk",
            "task.root_source",
            "pose: its error in training is root_estimate random_walk's (a pose source does not slide with the "
            f"soles), got root_estimate {self.task.root_estimate!r}",
        )
        need(self.task.randomize.obs_root_drift >= 0, "task.randomize.obs_root_drift", "must be >= 0")
        need(self.num_envs >= 1, "num_envs", f"must be >= 1, got {self.num_envs}")
        need(self.kappa > 0, "kappa", f"must be > 0 kN/m, got {self.kappa}")
        need(self.checkpoint_every >= 1, "checkpoint_every", "must be >= 1")
        need(self.task.motion_start >= 0, "task.motion_start", f"must be >= 0 s, got {self.task.motion_start}")
        need(
            self.task.motion_end is None or self.task.motion_end > self.task.motion_start,
            "task.motion_end",
            f"must be after task.motion_start ({self.task.motion_start:g} s) or null (the clip's end), got "
            f"{self.task.motion_end}",
        )
        need(self.task.episode_steps >= 1, "task.episode_steps", "must be >= 1")
        need(self.task.start_margin >= 0, "task.start_margin", "must be >= 0")
        rz = self.task.randomize
        need(
            min(
                rz.reset_joint_noise,
                rz.reset_root_vel_noise,
                rz.reset_root_ang_vel_noise,
                rz.push_lin_vel,
                *(getattr(rz, key) for key in SENSOR_NOISE_KEYS.values()),
            )
            >= 0,
            "task.randomize",
            "noise levels must be >= 0",
        )
        need(0 <= rz.action_delay_prob <= 1, "task.randomize.action_delay_prob", "must be in [0, 1]")
        need(rz.ramp_iterations >= 0, "task.randomize.ramp_iterations", f"must be >= 0, got {rz.ramp_iterations}")
        for key in PHYSICS_SCALE_KEYS:
            r = getattr(rz, key)
            need(
                len(r) == 2 and 0 < r[0] <= r[1],
                f"task.randomize.{key}",
                f"must be [min, max] with 0 < min <= max ([1, 1]: off), got {r}",
            )
        need(
            len(rz.torso_com_offset) == 3 and min(rz.torso_com_offset) >= 0,
            "task.randomize.torso_com_offset",
            f"must be +-[x, y, z] m, each >= 0 ([0, 0, 0]: off), got {rz.torso_com_offset}",
        )
        need(
            len(rz.push_interval_s) == 2 and 0 < rz.push_interval_s[0] <= rz.push_interval_s[1],
            "task.randomize.push_interval_s",
            f"must be [min, max] with 0 < min <= max, got {rz.push_interval_s}",
        )
        st = self.task.start
        need(
            st.sampling in START_SAMPLINGS,
            "task.start.sampling",
            f"must be one of {START_SAMPLINGS}, got {st.sampling!r}",
        )
        need(
            st.bin_s > 0 and 0 <= st.uniform_floor <= 1 and 0 <= st.first_frame <= 1 and 0 < st.failure_momentum <= 1,
            "task.start",
            "need bin_s > 0, uniform_floor and first_frame in [0, 1], failure_momentum in (0, 1]",
        )
        te = self.task.termination
        need(
            min(te.root_height, te.root_tilt, te.end_effector_height, te.root_distance) >= 0,
            "task.termination",
            "thresholds must be >= 0 (0: off)",
        )
        need(self.shac.horizon >= 1, "shac.horizon", f"must be >= 1, got {self.shac.horizon}")
        need(0 < self.shac.gamma <= 1, "shac.gamma", "must be in (0, 1]")
        need(0 <= self.shac.lam < 1, "shac.lam", "must be in [0, 1)")
        need(0 <= self.shac.target_tau <= 1, "shac.target_tau", "must be in [0, 1]")
        need(len(self.shac.betas) == 2, "shac.betas", "must be two numbers")
        need(
            self.shac.lr_decay in LR_DECAYS, "shac.lr_decay", f"must be one of {LR_DECAYS}, got {self.shac.lr_decay!r}"
        )
        need(
            self.shac.critic_minibatches >= 1 and self.shac.critic_iters >= 0,
            "shac.critic_minibatches",
            "critic_minibatches must be >= 1 and critic_iters >= 0",
        )
        need(
            self.shac.gradvar_every >= 0 and self.shac.gradvar_bootstrap >= 0,
            "shac.gradvar_every",
            "gradvar_every and gradvar_bootstrap must be >= 0 (0: off)",
        )
        need(self.shac.max_consecutive_skips >= 1, "shac.max_consecutive_skips", "must be >= 1")
        need(self.shac.obs_smoothness >= 0, "shac.obs_smoothness", f"must be >= 0, got {self.shac.obs_smoothness}")
        unknown = sorted(set(self.shac.obs_smoothness_keys) - set(SENSOR_NOISE_KEYS.values()))
        need(
            not unknown and len(self.shac.obs_smoothness_keys) > 0,
            "shac.obs_smoothness_keys",
            f"must be a non-empty list of {list(SENSOR_NOISE_KEYS.values())}, got {self.shac.obs_smoothness_keys}",
        )
        need(self.add.replay_size >= self.add.batch_size >= 1, "add.replay_size", "need replay_size >= batch_size >= 1")
        need(self.add.epochs >= 1, "add.epochs", f"must be >= 1, got {self.add.epochs}")
        need(
            self.add.reward_form in ADD_REWARD_FORMS,
            "add.reward_form",
            f"must be one of {ADD_REWARD_FORMS}, got {self.add.reward_form!r}",
        )
        need(
            self.add.optimizer in ADD_OPTIMIZERS,
            "add.optimizer",
            f"must be one of {ADD_OPTIMIZERS}, got {self.add.optimizer!r}",
        )
        need(self.add.reward_knee > 0, "add.reward_knee", f"must be > 0, got {self.add.reward_knee}")
        need(0 < self.add.reward_floor < 1, "add.reward_floor", "must be in (0, 1)")
        need(self.add.delta_norm_min > 0, "add.delta_norm_min", "must be > 0")
        need(self.ppo.steps_per_env >= 1 and self.ppo.minibatches >= 1, "ppo", "steps_per_env, minibatches >= 1")
        need(self.eval.every >= 0, "eval.every", f"must be >= 0 (0: never), got {self.eval.every}")
        need(self.eval.starts >= 1, "eval.starts", f"must be >= 1, got {self.eval.starts}")
        need(
            self.eval.clip_runs >= 1 and self.eval.clip_seconds >= 0,
            "eval.clip_runs",
            "clip_runs must be >= 1 and clip_seconds >= 0 (0: the whole clip)",
        )
        need(self.eval.seconds > 0, "eval.seconds", f"must be > 0 s, got {self.eval.seconds}")
        need(self.eval.mujoco_runs >= 0, "eval.mujoco_runs", f"must be >= 0 (0: none), got {self.eval.mujoco_runs}")
        need(
            len(self.eval.mujoco_noise) == 3 and min(self.eval.mujoco_noise) >= 0,
            "eval.mujoco_noise",
            f"must be 3 stds >= 0 (encoders rad, joint velocities rad/s, gyro rad/s), got {self.eval.mujoco_noise}",
        )
        need(
            self.eval.best_by != "mujoco" or self.eval.mujoco_runs >= 1,
            "eval.best_by",
            "mujoco needs eval.mujoco_runs >= 1",
        )
        budget = parse_budget(self.budget)
        need(
            not (self.algo != "ppo" and self.shac.lr_decay == "linear" and budget.kind == "seconds"),
            "budget",
            f"{self.budget!r} is wall clock, and shac.lr_decay linear would then decay differently on a faster "
            "machine: give iterations (e.g. 1500it) or samples (2M), or set shac.lr_decay constant",
        )
        self.sim_config()  # a bad `sim` key or value is a ConfigError now, not when the run starts
        return self


@dataclass(frozen=True)
class Budget:
    """When a run ends: `iterations`, env `samples` (world control steps, all processes) or `seconds`."""

    kind: str  # "iterations" | "samples" | "seconds"
    amount: float
    text: str

    def reached(self, iteration: int, samples: int, seconds: float) -> bool:
        value = {"iterations": iteration, "samples": samples, "seconds": seconds}[self.kind]
        return value >= self.amount


_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(it|k|m|min|s|h)?\s*$", re.IGNORECASE)
_UNITS = {
    "it": ("iterations", 1),
    "": ("samples", 1),
    "k": ("samples", 1e3),
    "m": ("samples", 1e6),
    "s": ("seconds", 1),
    "min": ("seconds", 60),
    "h": ("seconds", 3600),
}


def parse_budget(text: str) -> Budget:
    m = _BUDGET.match(str(text))
    if not m:
        raise ConfigError(
            f"budget {text!r}: expected e.g. 200it (iterations), 2M or 500k (env samples), "
            "30min, 90s or 1h (wall clock)"
        )
    kind, scale = _UNITS[(m.group(2) or "").lower()]  # "m" / "M": million samples; "min": minutes
    amount = float(m.group(1)) * scale
    if amount <= 0:
        raise ConfigError(f"budget {text!r}: must be > 0")
    return Budget(kind, amount, str(text).strip())


SEED_STREAMS = ("resets", "reward", "noise", "bcg", "gradvar", "smoothness")  # independent random streams of a run


def derive_seed(seed: int, stream: str, rank: int = 0) -> int:
    """A seed for one random stream of one process, from the run's seed (numpy SeedSequence mixing)."""
    import numpy as np

    return int(np.random.SeedSequence([seed, SEED_STREAMS.index(stream), rank]).generate_state(1)[0])


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def preset_path(name: str) -> Path:
    p = Path(name)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return p
    cand = config_dir() / "train" / f"{name}.yaml"
    if not cand.is_file():
        known = sorted(f.stem for f in (config_dir() / "train").glob("*.yaml"))
        raise ConfigError(f"preset {name!r} not found (known: {', '.join(known)})")
    return cand


def load_train_config(preset: str | None = None, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """default.yaml, then the preset (a name in config/train/ or a path), then `overrides` (a nested dict)."""
    base_path = config_dir() / "train" / "default.yaml"
    data = load_yaml(base_path)
    where = base_path.name
    if preset is not None and preset != "default":
        path = preset_path(preset)
        over = _preset_keys(path)
        data = _merge(data, over)
        where = path.name
    if overrides:
        data = _merge(data, overrides)
    return from_dict(TrainConfig, data, where=where).validate(where)


def _preset_keys(path: Path, chain: tuple[Path, ...] = ()) -> dict:
    """A preset's keys over those of the preset its `base:` names (and so on down the chain), so that a preset
    for one clip states only what it changes from the one it builds on."""
    over = load_yaml(path)
    base = over.pop("base", None)
    from_dict(TrainConfig, _merge(_defaults_dict(), over), where=path.name)  # a bad key is named with its own file
    if base is None:
        return over
    if not isinstance(base, str):
        raise ConfigError(f"{path.name}: base: must be a preset name, got {base!r}")
    chain = (*chain, path.resolve())
    under = preset_path(base)
    if under.resolve() in chain:
        raise ConfigError(f"{path.name}: base: {base!r} leads back to {under.name} (a loop)")
    return _merge(_preset_keys(under, chain), over)


def _defaults_dict() -> dict:
    return asdict(TrainConfig())


def config_to_dict(cfg: TrainConfig) -> dict:
    return asdict(cfg)


def config_from_dict(data: dict, where: str) -> TrainConfig:
    return from_dict(TrainConfig, data, where=where).validate(where)
