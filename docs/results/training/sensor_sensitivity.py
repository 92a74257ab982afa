"""How much a trained policy's actions follow each sensor's noise alone: a run folder's final checkpoint drives 3
rollouts of the training task (no action noise); on their observations the mean over rows and joints of
(pi(o + n) - pi(o))^2 with n on one sensor's columns only, at the run's training stds and at bcg-eval's
`--noise 0.01 0.5 0.2` (encoders [rad], joint velocities [rad/s], gyro [rad/s]). The sum over the sensors is
what shac.obs_smoothness penalizes (metrics.csv `obs_sensitivity`).
Usage: sensor_sensitivity.py RUN..."""

import sys
from pathlib import Path

import torch

from bcg_train.dist import Comm
from bcg_train.runner import Trainer, check_run_folder

EVAL_STD = {"obs_joint_pos": 0.01, "obs_joint_vel": 0.5, "obs_ang_vel": 0.2}  # bcg-eval --noise 0.01 0.5 0.2
SENSORS = ("obs_joint_pos", "obs_joint_vel", "obs_ang_vel", "obs_gravity")


def rollout_observations(algo, rollouts: int = 3) -> torch.Tensor:
    """[rollouts * horizon * N, n_obs] raw observations along the actor's mean actions."""
    task, env, obs = algo.task, algo.env, []
    with torch.no_grad():
        for _ in range(rollouts):
            env.new_rollout()
            for _ in range(algo.shac.horizon):
                o = task.observation(env.state, task.frame, task.last_action)
                obs.append(o)
                action = algo.actor(algo.norm(o))
                out = env.step(task.env_action(action))
                task.last_action = action
                terminated, timeout = task.advance(out)
                done = terminated | timeout
                if bool(done.any()):
                    task.reset(done.nonzero().squeeze(-1))
    return torch.cat(obs)


def main() -> None:
    for run in map(Path, sys.argv[1:]):
        cfg, _ = check_run_folder(run)
        trainer = Trainer(cfg, run, Comm(), 1, resume=True)
        trainer.build()
        trainer.load_checkpoint()
        algo = trainer.algo
        obs = rollout_observations(algo)
        algo.smooth_gen.manual_seed(0)
        cells = []
        for key in SENSORS:
            train_std = algo.task.noise_std([key])  # [n_obs]: the run's std on this sensor's columns, 0 elsewhere
            eval_std = algo.task.sensor_columns(key) * EVAL_STD.get(key, 0.0)
            for level, std in (("train", train_std), ("eval", eval_std)):
                with torch.no_grad():
                    cells.append(f"{key[4:]}@{level} {float(algo.obs_sensitivity(obs, std)):.5f}")
        print(run.name, " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
