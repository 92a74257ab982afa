"""PPO baseline: rsl_rl's PPO (rsl-rl-lib) on the same task, reward and observation as SHAC.

The simulator runs forward only (`torch.no_grad`: no tapes are recorded, PPO pays no gradient cost). The
actor sees the same normalized `build_observation` vector (bcg_train's RunningNorm, exported in the contract;
rsl_rl's own normalizer is off), the critic additionally the privileged inputs. One iteration = rsl_rl's
rollout of `ppo.steps_per_env` steps, returns (GAE) and update; the ADD discriminator learns from the same
rollout. The exported network is the actor's mean (its MLP).
"""

from __future__ import annotations

import contextlib
import copy
import io
import math

import torch
from rsl_rl.algorithms import PPO as RslPPO
from rsl_rl.env import VecEnv
from rsl_rl.modules import MLP
from tensordict import TensorDict

from bcg_train.algorithm import NUM_ACTIONS, reduce_iteration_log
from bcg_train.config import TrainConfig
from bcg_train.dist import Comm
from bcg_train.task import PRIVILEGED_DIM, RunningNorm, Task, e_track_cm, features

ACTIVATION = "elu"


class TaskVecEnv(VecEnv):
    """rsl_rl's VecEnv over a bcg_train Task (forward-only stepping)."""

    def __init__(self, task: Task, norm: RunningNorm, priv_norm: RunningNorm, reward, comm: Comm):
        self.task, self.norm, self.priv_norm, self.reward, self.comm = task, norm, priv_norm, reward, comm
        self.num_envs = task.n
        self.num_actions = NUM_ACTIONS
        self.max_episode_length = task.cfg.task.episode_steps
        self.episode_length_buf = task.steps
        self.device = task.device
        self.cfg = {}
        self.log = self._empty_log()

    @staticmethod
    def _empty_log() -> dict:
        return {"reward": 0.0, "e_track_cm": 0.0, "falls": 0, "episodes": 0, "episode_len_sum": 0, "steps": 0}

    def _obs(self) -> TensorDict:
        t = self.task
        state = t.env.state
        raw = t.observation(state, t.frame, t.last_action)
        priv = t.privileged(state, t.frame)
        self.norm.update(self.comm.gather(raw))
        self.priv_norm.update(self.comm.gather(priv))
        x = self.norm(raw)
        return TensorDict(
            {"actor": self.norm(raw + t.sensor_noise(raw)), "critic": torch.cat([x, self.priv_norm(priv)], -1)},
            batch_size=[t.n],
        )

    @torch.no_grad()
    def get_observations(self) -> TensorDict:
        return self._obs()

    @torch.no_grad()
    def step(self, actions: torch.Tensor):
        t = self.task
        out = t.env.step(t.env_action(t.delay(actions)))
        ref_f = features(t.ref_kinematics(t.frame + 1))
        sim_f = features(t.sim_kinematics(out))
        r = self.reward(sim_f, ref_f) + t.cfg.reward.alive_bonus - t.action_rate_cost(actions)
        self.reward.observe(sim_f, ref_f)
        t.last_action = actions.clone()
        terminated, timeout = t.advance(out)
        done = terminated | timeout
        lg = self.log
        lg["reward"] += float(r.mean())
        lg["e_track_cm"] += float(e_track_cm(sim_f, ref_f).mean())
        lg["falls"] += int(out.fell.sum())
        lg["episodes"] += int(done.sum())
        lg["episode_len_sum"] += int(t.steps[done].sum())
        lg["steps"] += 1
        r = torch.nan_to_num(r, nan=0.0)  # a diverged world ends its episode (terminated) with no reward
        if bool(done.any()):
            t.reset(done.nonzero().squeeze(-1))
        return self._obs(), r, done.long(), {"time_outs": timeout, "log": {}}


class PPO:
    """One rsl_rl PPO iteration per `iteration()` (a bcg_train.algorithm.Algorithm)."""

    @classmethod
    def from_config(cls, cfg: TrainConfig, task: Task, reward, comm: Comm, total_iters: int | None) -> PPO:
        return cls(cfg, task, reward, comm, cfg.seed)  # rsl_rl's adaptive schedule sets the learning rate

    @staticmethod
    def rollout_steps(cfg: TrainConfig) -> int:
        return cfg.ppo.steps_per_env

    @staticmethod
    def network_from_state(cfg: TrainConfig, n_obs: int, state: dict) -> torch.nn.Module:
        """The exported network (actor mean MLP) of a PPO checkpoint, without a simulator."""
        net = MLP(n_obs, NUM_ACTIONS, list(cfg.ppo.hidden), ACTIVATION)
        net.load_state_dict(state["policy_mlp"])
        return net

    def __init__(self, cfg: TrainConfig, task: Task, reward, comm: Comm, seed: int):
        self.cfg, self.ppo, self.task, self.reward, self.comm = cfg, cfg.ppo, task, reward, comm
        torch.manual_seed(seed)
        self.norm = RunningNorm(task.contract.n_obs, cfg.task.obs_norm_clip, cfg.task.obs_norm_epsilon).to(task.device)
        self.priv_norm = RunningNorm(PRIVILEGED_DIM, cfg.task.obs_norm_clip, cfg.task.obs_norm_epsilon).to(task.device)
        self.venv = TaskVecEnv(task, self.norm, self.priv_norm, reward, comm)
        p = self.ppo
        model = {
            "class_name": "MLPModel",
            "hidden_dims": list(p.hidden),
            "activation": ACTIVATION,
            "obs_normalization": False,
        }
        train_cfg = {
            "algorithm": {
                "class_name": "PPO",
                "num_learning_epochs": p.epochs,
                "num_mini_batches": p.minibatches,
                "clip_param": p.clip,
                "gamma": p.gamma,
                "lam": p.lam,
                "value_loss_coef": p.value_loss_coef,
                "entropy_coef": p.entropy_coef,
                "learning_rate": p.lr,
                "max_grad_norm": p.max_grad_norm,
                "schedule": "adaptive",
                "desired_kl": p.desired_kl,
            },
            "actor": {
                **model,
                "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": p.init_noise_std},
            },
            "critic": dict(model),
            "obs_groups": {"actor": ["actor"], "critic": ["critic"]},
            "num_steps_per_env": p.steps_per_env,
            "multi_gpu": {"global_rank": comm.rank, "world_size": comm.world_size} if comm.active else None,
        }
        self.obs = self.venv.get_observations()
        with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints both models
            self.alg = RslPPO.construct_algorithm(self.obs, self.venv, train_cfg, str(task.device))
        if comm.active:
            self.alg.broadcast_parameters()
        self.alg.train_mode()
        self.iter = 0

    def iteration(self) -> dict:
        v = self.venv
        v.log = v._empty_log()
        with torch.inference_mode():
            for _ in range(self.ppo.steps_per_env):
                actions = self.alg.act(self.obs)
                self.obs, r, dones, extras = v.step(actions)
                self.alg.process_env_step(self.obs, r, dones, extras)
            self.alg.compute_returns(self.obs)
        losses = self.alg.update()
        discriminator_log = self.reward.update()
        self.iter += 1
        lg = v.log
        steps = max(lg["steps"], 1)
        means = {
            "actor_loss": float(losses.get("surrogate", math.nan)),
            "critic_loss": float(losses.get("value", math.nan)),
            "grad_norm": math.nan,
            "gradvar": math.nan,
            "gradvar_std": math.nan,
            "lr_actor": float(self.alg.learning_rate),
            "reward": lg["reward"] / steps,
            "e_track_cm": lg["e_track_cm"] / steps,
            "action_std": float(self.alg.get_policy().output_std.detach().mean()),
            **discriminator_log,
            "skipped": 0,
        }
        return reduce_iteration_log(
            self.comm,
            means,
            {"falls": lg["falls"]},
            lg["episodes"],
            lg["episode_len_sum"],
            self.task.n * self.ppo.steps_per_env,
            skipped_total=0,
        )

    def stop_reason(self) -> str | None:
        return None  # no gradient through the simulator to guard; rsl_rl clips its own

    def policy_network(self) -> torch.nn.Module:
        return copy.deepcopy(self.alg.get_policy().mlp)

    def modules(self) -> list[torch.nn.Module]:
        return [self.alg.actor, self.alg.critic, self.norm, self.priv_norm, *self.reward.modules()]

    def state_dict(self) -> dict:
        return {
            "ppo": self.alg.save(),
            "norm": self.norm.state_dict(),
            "priv_norm": self.priv_norm.state_dict(),
            "reward": self.reward.state_dict(),
            "iter": self.iter,
            "lr": self.alg.learning_rate,
            "obs": self.obs.to_dict(),
            "policy_mlp": self.alg.get_policy().mlp.state_dict(),
        }

    def load_state_dict(self, d: dict) -> None:
        self.alg.load(d["ppo"], None, strict=True)
        self.alg.learning_rate = d["lr"]
        self.norm.load_state_dict(d["norm"])
        self.priv_norm.load_state_dict(d["priv_norm"])
        self.reward.load_state_dict(d["reward"])
        self.iter = d["iter"]
        self.obs = TensorDict(d["obs"], batch_size=[self.task.n])
