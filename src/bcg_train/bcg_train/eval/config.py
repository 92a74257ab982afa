"""Typed configuration of bcg-eval and bcg-experiment (config/eval.yaml, sections `eval` and `experiment`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bcg_sim.config import ConfigError, load_config

CONFIG_FILE = "eval.yaml"


@dataclass
class EvalConfig:
    runs: int = 5
    base_seed: int = 0
    seconds: float = 0.0  # [s]; 0 = the reference clip's duration
    physics_dt: float = 0.001  # [s]
    fall_height: float = 0.3  # [m]
    init_joint_noise: float = 0.02  # [rad] std
    init_root_vel_noise: float = 0.05  # [m/s] std
    noise_q_std: float = 0.0  # [rad]
    noise_dq_std: float = 0.0  # [rad/s]
    noise_gyro_std: float = 0.0  # [rad/s]
    action_latency_s: float = 0.0  # [s]
    contact_height: float = 0.02  # [m]
    diffsim_seconds: float = 2.0  # [s]
    strip_frames: int = 6
    strip_width: int = 320
    strip_height: int = 360
    ros_preroll_s: float = 3.0  # [s]
    ros_move_to_default_s: float = 0.5  # [s]
    ros_remote_press_s: float = 0.05  # [s]

    def validate(self, where: str = CONFIG_FILE) -> "EvalConfig":
        if self.runs < 1:
            raise ConfigError(f"{where}: eval.runs must be >= 1, got {self.runs}")
        if not 0 < self.physics_dt <= 0.002:  # the G1 drivers run their PD at >= 500 Hz
            raise ConfigError(f"{where}: eval.physics_dt must be in (0, 0.002] s (PD at >= 500 Hz), "
                              f"got {self.physics_dt}")
        for name in ("seconds", "init_joint_noise", "init_root_vel_noise", "noise_q_std", "noise_dq_std",
                     "noise_gyro_std", "action_latency_s", "diffsim_seconds", "ros_preroll_s",
                     "ros_move_to_default_s", "ros_remote_press_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{where}: eval.{name} must be >= 0, got {getattr(self, name)}")
        if self.fall_height <= 0 or self.contact_height <= 0:
            raise ConfigError(f"{where}: eval.fall_height and eval.contact_height must be > 0")
        if self.strip_frames < 1 or self.strip_width < 16 or self.strip_height < 16:
            raise ConfigError(f"{where}: eval.strip_frames >= 1 and strip_width/height >= 16 px")
        return self


@dataclass
class ExperimentConfig:
    motions: list[str] = field(default_factory=lambda: ["run", "jump", "fight", "dance"])
    kappas: list[float] = field(default_factory=lambda: [5.0, 20.0, 300.0])
    algos: list[str] = field(default_factory=lambda: ["shac-bcg", "shac", "ppo"])
    seeds: list[int] = field(default_factory=lambda: [0])
    budget: str = "400it"  # bcg-train --budget of one cell: 400it | 2M (iterations or samples)
    preset: str = "cpu"  # bcg-train --preset
    reward: str = "tracking"  # bcg-train --reward
    jobs: int = 1  # cells run at once (each trains in its own process, one core each)
    compare_kappa: float = 300.0
    train_command: list[str] = field(default_factory=list)
    resume_command: list[str] = field(default_factory=list)  # continues an interrupted cell's training

    def validate(self, where: str = CONFIG_FILE) -> "ExperimentConfig":
        from bcg_train.config import parse_budget

        if not self.train_command or not self.resume_command:
            raise ConfigError(f"{where}: experiment.train_command and resume_command must not be empty")
        if any(k <= 0 for k in self.kappas) or self.compare_kappa <= 0:
            raise ConfigError(f"{where}: experiment.kappas and compare_kappa must be > 0 kN/m")
        if self.jobs < 1:
            raise ConfigError(f"{where}: experiment.jobs must be >= 1, got {self.jobs}")
        try:
            parse_budget(self.budget)
        except ConfigError as exc:
            raise ConfigError(f"{where}: experiment.{exc}") from None
        return self


def load_eval_config(path: str = CONFIG_FILE) -> EvalConfig:
    return load_config(EvalConfig, path, "eval").validate(path)


def load_experiment_config(path: str = CONFIG_FILE) -> ExperimentConfig:
    return load_config(ExperimentConfig, path, "experiment").validate(path)
