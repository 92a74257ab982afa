"""Typed configuration of bcg-eval and bcg-experiment (config/eval.yaml, sections `eval` and `experiment`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bcg_sim.config import ConfigError, checker, load_config
from bcg_sim.policy.contract import ROOT_SOURCES

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
    root_source: str = ""  # "" = the policy contract's observation.root_source, else one of ROOT_SOURCES
    pose_period_s: float = 0.1  # [s] the simulated pose source (a policy with root_source "pose")
    pose_latency_s: float = 0.06  # [s]
    pose_noise_m: float = 0.02  # [m] std per axis
    pose_drift: float = 0.01  # [m per sqrt(m) of path] per axis
    pose_timeout_s: float = 0.5  # [s]
    contact_height: float = 0.02  # [m]
    diffsim_seconds: float = 2.0  # [s]
    strip_frames: int = 6
    strip_width: int = 320
    strip_height: int = 360
    ros_preroll_s: float = 3.0  # [s]
    ros_move_to_default_s: float = 0.5  # [s]
    ros_remote_press_s: float = 0.05  # [s]

    def validate(self, where: str = CONFIG_FILE) -> "EvalConfig":
        need = checker(where)
        need(self.runs >= 1, "eval.runs", f"must be >= 1, got {self.runs}")
        need(
            0 < self.physics_dt <= 0.002,
            "eval.physics_dt",  # the G1 drivers run their PD at >= 500 Hz
            f"must be in (0, 0.002] s (PD at >= 500 Hz), got {self.physics_dt}",
        )
        for name in (
            "seconds",
            "init_joint_noise",
            "init_root_vel_noise",
            "noise_q_std",
            "noise_dq_std",
            "noise_gyro_std",
            "action_latency_s",
            "pose_latency_s",
            "pose_noise_m",
            "pose_drift",
            "diffsim_seconds",
            "ros_preroll_s",
            "ros_move_to_default_s",
            "ros_remote_press_s",
        ):
            need(getattr(self, name) >= 0, f"eval.{name}", f"must be >= 0, got {getattr(self, name)}")
        need(
            self.root_source in ("", *ROOT_SOURCES),
            "eval.root_source",
            f"must be empty (the contract's) or one of {ROOT_SOURCES}, got {self.root_source!r}",
        )
        need(self.pose_period_s > 0, "eval.pose_period_s", f"must be > 0 s, got {self.pose_period_s}")
        need(
            self.pose_timeout_s > self.pose_period_s + self.pose_latency_s,
            "eval.pose_timeout_s",
            f"must exceed pose_period_s + pose_latency_s ({self.pose_period_s + self.pose_latency_s:g} s), got "
            f"{self.pose_timeout_s}",
        )
        need(self.fall_height > 0, "eval.fall_height", f"must be > 0 m, got {self.fall_height}")
        need(self.contact_height > 0, "eval.contact_height", f"must be > 0 m, got {self.contact_height}")
        need(self.strip_frames >= 1, "eval.strip_frames", f"must be >= 1, got {self.strip_frames}")
        need(
            min(self.strip_width, self.strip_height) >= 16,
            "eval.strip_width",
            f"strip_width and strip_height must be >= 16 px, got {self.strip_width} x {self.strip_height}",
        )
        return self

    def with_sensor_noise(self, noise) -> "EvalConfig":
        """This config with sensor noise std (encoders [rad], joint velocities [rad/s], gyroscope [rad/s]), the
        triple of `bcg-eval --noise` and of bcg-train's eval.mujoco_noise."""
        q, dq, gyro = noise
        return replace(self, noise_q_std=q, noise_dq_std=dq, noise_gyro_std=gyro)


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

        need = checker(where)
        need(bool(self.train_command), "experiment.train_command", "must not be empty")
        need(bool(self.resume_command), "experiment.resume_command", "must not be empty")
        need(min(self.kappas, default=1) > 0, "experiment.kappas", f"must be > 0 kN/m, got {self.kappas}")
        need(self.compare_kappa > 0, "experiment.compare_kappa", f"must be > 0 kN/m, got {self.compare_kappa}")
        need(self.jobs >= 1, "experiment.jobs", f"must be >= 1, got {self.jobs}")
        try:
            parse_budget(self.budget)
        except ConfigError as exc:
            raise ConfigError(f"{where}: experiment.{exc}") from None
        return self


def load_eval_config(path: str = CONFIG_FILE) -> EvalConfig:
    return load_config(EvalConfig, path, "eval").validate(path)


def load_experiment_config(path: str = CONFIG_FILE) -> ExperimentConfig:
    return load_config(ExperimentConfig, path, "experiment").validate(path)
