"""What the training loop (bcg_train.runner) asks of a learning algorithm, and the algorithms by config name.

The loop builds the simulator, the task and the reward, constructs the class that `ALGORITHMS[cfg.algo]` names
with `from_config`, and calls `iteration()` until the budget is spent or `stop_reason()` gives a reason; it saves
`state_dict()` in checkpoints and exports `policy_network()` with `norm`'s statistics. It never names an
algorithm: a new one is a class with the methods of `Algorithm` and one entry in `ALGORITHMS`.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from bcg_sim.g1 import JOINTS_29

if TYPE_CHECKING:
    from bcg_train.config import TrainConfig
    from bcg_train.dist import Comm
    from bcg_train.rewards import Reward
    from bcg_train.task import RunningNorm, Task

NUM_ACTIONS = len(JOINTS_29)  # the policy's output: one position target per G1 joint


class Algorithm(Protocol):
    """One learner over a bcg_train Task. `iteration()` returns the metrics.csv numbers of one iteration (means
    over processes, plus `samples`: env control steps of all processes; see `reduce_iteration_log`)."""

    norm: RunningNorm  # the actor's observation statistics (exported into the policy contract)

    @classmethod
    def from_config(
        cls, cfg: TrainConfig, task: Task, reward: Reward, comm: Comm, total_iters: int | None
    ) -> Algorithm:
        """Build from the run's config; `total_iters` is the iteration budget (None: a wall-clock budget)."""
        ...

    @staticmethod
    def rollout_steps(cfg: TrainConfig) -> int:
        """Control steps each world runs per iteration."""
        ...

    @staticmethod
    def network_from_state(cfg: TrainConfig, n_obs: int, state: dict) -> torch.nn.Module:
        """The exported network (normalized observation -> raw action) of a `state_dict()`, without a simulator."""
        ...

    def iteration(self) -> dict: ...

    def stop_reason(self) -> str | None:
        """Why training must stop now (e.g. a guard that tripped), or None to go on."""
        ...

    def policy_network(self) -> torch.nn.Module: ...

    def modules(self) -> list[torch.nn.Module]:
        """Every module whose parameters and buffers a checkpoint holds (checked finite before writing one)."""
        ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, d: dict) -> None: ...


@dataclass(frozen=True)
class Registered:
    """An entry of ALGORITHMS: the class ("module:Class", imported on first use) and the simulator it needs."""

    target: str
    bcg: bool = False  # the simulator's bundled contact gradients (config/sim.yaml bcg) on
    differentiable: bool = True  # False: the simulator only runs forward (no tapes)

    def load(self) -> type[Algorithm]:
        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)


ALGORITHMS: dict[str, Registered] = {  # keys: bcg_train.config.ALGOS (TrainConfig.algo's Literal)
    "shac": Registered("bcg_train.shac:SHAC"),
    "shac-bcg": Registered("bcg_train.shac:SHAC", bcg=True),
    "ppo": Registered("bcg_train.ppo:PPO", differentiable=False),
}


def algorithm_class(name: str) -> type[Algorithm]:
    return ALGORITHMS[name].load()


def all_finite(modules: list[torch.nn.Module]) -> bool:
    """Whether every parameter and buffer of `modules` is finite."""
    return all(bool(torch.isfinite(t).all()) for m in modules for t in [*m.parameters(), *m.buffers()])


def reduce_iteration_log(
    comm: Comm,
    means: dict,
    counts: dict[str, int],
    episodes: int,
    episode_len_sum: int,
    samples: int,
    skipped_total: int,
) -> dict:
    """One iteration's metrics over all processes: `means` averaged, `counts` summed (a key in both keeps its
    place in `means`' order), episodes and the mean episode length, `samples` (per process) times the number of
    processes and `skipped_total` as given. The order of the keys is metrics.csv's column order."""
    out = comm.mean({k: v for k, v in means.items() if not isinstance(v, str)})
    out["episodes"] = comm.sum_int(episodes)
    out["episode_len"] = comm.sum_int(episode_len_sum) / out["episodes"] if out["episodes"] else math.nan
    for k, v in counts.items():
        out[k] = comm.sum_int(v)
    out["samples"] = samples * comm.world_size
    out["skipped_total"] = skipped_total
    return out
