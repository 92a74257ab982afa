"""SHAC: Short-Horizon Actor-Critic through the differentiable G1 simulator (optionally with BCG).

One iteration, top to bottom:
1. Rollout of h control steps of N worlds through `G1DiffEnv` (episodes continue across iterations; finished
   worlds are reset to random clip frames mid-rollout). Each step: normalized observation -> actor (+ small
   reparameterized noise) -> contract action -> env.step -> reward on reference features (differentiable).
2. Actor loss = -(sum_t gamma^t r_t + gamma^h V'(s_h)) / (N h), with V' the target critic, cut at episode ends
   (terminated: no bootstrap; time-out: bootstrap), plus shac.obs_smoothness x the actor's sensitivity to sensor
   noise (`obs_sensitivity`; off by default). One backward through the whole rollout, then
   env.new_rollout(). Guard: a non-finite loss/gradient or a pre-clip gradient norm above `max_grad_norm`
   skips the update (counted); `max_consecutive_skips` in a row stop the run.
3. Critic: TD(lambda) targets from the recorded rewards and target-critic values, `critic_iters` epochs over
   `critic_minibatches` minibatches; target critic soft update (tau).
4. Discriminator (ADD) update on this rollout's deltas + replay.
Per-world policy-gradient variance (BCG paper Fig. 3): every `gradvar_every` iterations, zero-valued
per-world copies of a last-layer subset are added to the actor output, so one backward gives every world's
gradient of its own loss; their trace(Cov)/P across worlds is logged as `gradvar`, and the std of that figure
over `gradvar_bootstrap` resamples of the worlds as `gradvar_std` (Fig. 3's band).

Shapes: N worlds on this process, h = shac.horizon; observation [N, n_obs] (the policy contract's), privileged
critic inputs [N, PRIVILEGED_DIM] (task.privileged), action [N, 29] in motor order, reward and value [N].
"""

from __future__ import annotations

import math

import numpy as np
import torch

from bcg_sim.config import ConfigError
from bcg_sim.diffsim.gradvar import bootstrap_variance_std, gradient_variance
from bcg_train.algorithm import NUM_ACTIONS, reduce_iteration_log
from bcg_train.config import TrainConfig, derive_seed
from bcg_train.dist import Comm
from bcg_train.task import PRIVILEGED_DIM, RunningNorm, Task, e_track_cm, features


def hidden_layers(n_in: int, hidden: list[int], layer_norm: bool) -> torch.nn.Sequential:
    """Linear -> (LayerNorm) -> ELU for each width in `hidden`. LayerNorm keeps the pre-activations of a
    network fed by states far from the data it was fitted on in range (DiffRL uses it in actor and critic)."""
    layers: list[torch.nn.Module] = []
    for a, b in zip([n_in, *hidden[:-1]], hidden):
        layers += [torch.nn.Linear(a, b), *([torch.nn.LayerNorm(b)] if layer_norm else []), torch.nn.ELU()]
    return torch.nn.Sequential(*layers)


def critic_network(n_in: int, hidden: list[int], layer_norm: bool) -> torch.nn.Sequential:
    """Critic input [B, n_in] -> value [B, 1]."""
    return torch.nn.Sequential(
        *hidden_layers(n_in, hidden, layer_norm), torch.nn.Linear(hidden[-1] if hidden else n_in, 1)
    )


class Actor(torch.nn.Module):
    """Normalized observation [B, n_obs] -> raw action [B, 29] (the exported network)."""

    def __init__(self, n_obs: int, hidden: list[int], layer_norm: bool = True):
        super().__init__()
        self.body = hidden_layers(n_obs, hidden, layer_norm)
        self.head = torch.nn.Linear(hidden[-1] if hidden else n_obs, NUM_ACTIONS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))

    def probed(self, x: torch.Tensor, probe_w: torch.Tensor, probe_b: torch.Tensor) -> torch.Tensor:
        """forward(x) plus per-world last-layer offsets: rows [:r] get probe_w [N, r, H] @ h, all get probe_b
        [N, 29]. With zero probes the value is forward(x); d loss / d probe_i is world i's gradient."""
        h = self.body(x)
        y = self.head(h) + probe_b
        r = probe_w.shape[1]
        return torch.cat([y[:, :r] + torch.einsum("nrh,nh->nr", probe_w, h), y[:, r:]], dim=-1)


class SHAC:
    """SHAC (+BCG when the env has it enabled; a bcg_train.algorithm.Algorithm). `iteration()` runs one; see the
    module docstring."""

    @classmethod
    def from_config(cls, cfg: TrainConfig, task: Task, reward, comm: Comm, total_iters: int | None) -> SHAC:
        return cls(cfg, task, reward, comm, total_iters, cfg.seed)

    @staticmethod
    def rollout_steps(cfg: TrainConfig) -> int:
        return cfg.shac.horizon

    @staticmethod
    def network_from_state(cfg: TrainConfig, n_obs: int, state: dict) -> torch.nn.Module:
        actor = Actor(n_obs, cfg.shac.actor_hidden, cfg.shac.layer_norm)
        actor.load_state_dict(state["actor"])
        return actor

    def __init__(self, cfg: TrainConfig, task: Task, reward, comm: Comm, total_iters: int | None, seed: int):
        self.cfg, self.shac = cfg, cfg.shac
        self.task, self.env, self.reward, self.comm = task, task.env, reward, comm
        self.device = task.device
        self.n = task.n  # worlds on this process
        self.total_iters = total_iters if self.shac.lr_decay == "linear" else None
        torch.manual_seed(seed)  # same initial weights on every rank
        n_obs = task.contract.n_obs
        self.norm = RunningNorm(n_obs, cfg.task.obs_norm_clip, cfg.task.obs_norm_epsilon).to(self.device)
        # the critic's extra inputs get their own statistics: raw metres beside normalized observations would
        # leave dV/d(height) -- what pushes the pelvis back up through gamma^h V(s_h) -- small
        self.priv_norm = RunningNorm(PRIVILEGED_DIM, cfg.task.obs_norm_clip, cfg.task.obs_norm_epsilon).to(self.device)
        self.actor = Actor(n_obs, self.shac.actor_hidden, self.shac.layer_norm).to(self.device)
        self.critic = critic_network(n_obs + PRIVILEGED_DIM, self.shac.critic_hidden, self.shac.layer_norm).to(
            self.device
        )
        self.target_critic = critic_network(n_obs + PRIVILEGED_DIM, self.shac.critic_hidden, self.shac.layer_norm).to(
            self.device
        )
        self.target_critic.load_state_dict(self.critic.state_dict())
        for p in self.target_critic.parameters():
            p.requires_grad_(False)
        comm.broadcast_modules([self.actor, self.critic, self.target_critic])
        betas = tuple(self.shac.betas)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=self.shac.actor_lr, betas=betas)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=self.shac.critic_lr, betas=betas)
        self.noise_gen = torch.Generator().manual_seed(derive_seed(seed, "noise", comm.rank))
        # its own stream, so that measuring the actor's sensitivity leaves the rollout's noise as it was
        self.smooth_gen = torch.Generator().manual_seed(derive_seed(seed, "smoothness", comm.rank))
        self.smooth_std = task.noise_std(self.shac.obs_smoothness_keys)  # [n_obs] the term's noise
        if self.shac.obs_smoothness > 0 and not bool(self.smooth_std.any()):
            raise ConfigError(
                "train config: shac.obs_smoothness: needs sensor noise on an observation this contract has "
                f"(task.randomize: {', '.join(self.shac.obs_smoothness_keys)})"
            )
        self.seed = seed
        self.iter = 0
        self.update_norm = True  # False freezes the observation statistics (tests on a fixed batch)
        self.skipped_total = 0
        self.consecutive_skips = 0

    # ------------------------------------------------------------------ helpers
    def _lr_frac(self) -> float:
        """Learning-rate factor: 1 - done fraction of an iteration/sample budget (lr_decay linear), else 1."""
        if self.total_iters is None:
            return 1.0
        return max(0.0, 1.0 - self.iter / self.total_iters)

    def _critic_in(self, obs: torch.Tensor, priv: torch.Tensor) -> torch.Tensor:
        """Critic input [N, n_obs + PRIVILEGED_DIM]: the normalized observation [N, n_obs] (without sensor noise)
        and the normalized privileged state [N, PRIVILEGED_DIM], diverged worlds' rows zeroed."""
        return torch.cat([self.norm(_finite_rows(obs)), self.priv_norm(_finite_rows(priv))], dim=-1)

    def _noise(self, like: torch.Tensor) -> torch.Tensor:
        """Exploration noise shaped like `like`, N(0, action_noise_std^2), from this process's noise stream."""
        return self.shac.action_noise_std * torch.randn(like.shape, generator=self.noise_gen).to(self.device)

    def _probes(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Zero per-world probes (probe_w [N, r, H], probe_b [N, 29]; see `Actor.probed`) on the iterations that
        log gradvar, else None."""
        k = self.shac.gradvar_every
        if k <= 0 or self.iter % k:
            return None
        hidden = self.actor.head.in_features
        r = min(self.shac.gradvar_rows, NUM_ACTIONS)
        return (
            torch.zeros(self.n, r, hidden, device=self.device, requires_grad=True),
            torch.zeros(self.n, NUM_ACTIONS, device=self.device, requires_grad=True),
        )

    def obs_sensitivity(self, obs: torch.Tensor, std: torch.Tensor | None = None) -> torch.Tensor:
        """Mean over rows and joints of (pi(o + n) - pi(o))^2 [scalar, differentiable w.r.t. the actor] for raw
        observations obs [B, n_obs], n drawn with the task's sensor-noise stds of shac.obs_smoothness_keys (or
        `std` [n_obs]): how much the actions follow those sensors' noise. With shac.obs_smoothness > 0 the actor
        minimizes it beside the return."""
        noise = self.task.sensor_noise(obs, self.smooth_gen, self.smooth_std if std is None else std)
        clean = self.actor(self.norm(_finite_rows(obs)))
        return (self.actor(self.norm(_finite_rows(obs + noise))) - clean).square().mean()

    # ------------------------------------------------------------------ one iteration
    def rollout_loss(self, probes=None, update_norm: bool = True) -> tuple[torch.Tensor, dict, dict]:
        """Step 1: h differentiable control steps from the current env state. Returns (actor loss [scalar,
        differentiable w.r.t. the actor and the simulated states], critic records, log sums).

        The observation statistics are frozen during the rollout and updated from its observations at the end
        (`update_norm`), so every step of one rollout is scored by the same function (DiffRL). A world whose
        state turns non-finite is cut out of the loss and of the gradient (its episode ends), so it cannot
        poison the update of the other worlds."""
        sc, task, env = self.shac, self.task, self.env
        h, n, gamma = sc.horizon, self.n, sc.gamma
        alive_bonus = self.cfg.reward.alive_bonus
        state = env.state
        obs = task.observation(state, task.frame, task.last_action)
        priv = task.privileged(state, task.frame)
        critic_in = self._critic_in(obs, priv)
        loss = torch.zeros((), device=self.device)
        rew_acc = torch.zeros(n, device=self.device)  # [N] discounted reward since the rollout/episode start
        discount = torch.ones(n, device=self.device)  # [N] gamma^(t - start)
        rec = {"critic_in": [], "reward": [], "done": [], "next_value": []}  # per step, for the critic update
        seen_obs, seen_priv = [], []
        log = {
            "reward": 0.0,
            "e_track_cm": 0.0,
            "falls": 0,
            "terminations": 0,
            "episodes": 0,
            "episode_len_sum": 0,
            "touchdowns": 0,
            "bundled_steps": 0,
            "nonfinite": 0,
        }
        for t in range(h):
            seen_obs.append(obs.detach())
            seen_priv.append(priv.detach())
            actor_in = self.norm(_finite_rows(obs + task.sensor_noise(obs)))  # with sensor noise, as on the robot
            rec["critic_in"].append(critic_in.detach())
            mu = self.actor(actor_in) if probes is None else self.actor.probed(actor_in, *probes)  # mean [N, 29]
            if mu.requires_grad:
                mu.register_hook(_zero_nonfinite)  # a diverged world's gradient stops here
            action = mu + self._noise(mu)
            out = env.step(task.env_action(task.delay(action)))
            ref_f = features(task.ref_kinematics(task.frame + 1))
            sim_f = features(task.sim_kinematics(out))
            r = self.reward(sim_f, ref_f) + alive_bonus - task.action_rate_cost(action)  # [N]
            self.reward.observe(sim_f, ref_f)
            task.last_action = action
            terminated, timeout = task.advance(out)
            done = terminated | timeout
            next_obs = task.observation(out.state, task.frame, action)
            next_priv = task.privileged(out.state, task.frame)
            next_critic_in = self._critic_in(next_obs, next_priv)  # also s_{t+1}'s critic input unless reset
            next_v = self.target_critic(next_critic_in).squeeze(-1)
            next_v = torch.where(terminated, torch.zeros_like(next_v), next_v)  # no bootstrap past a fall
            bad = ~torch.isfinite(r) | ~torch.isfinite(next_v)
            r = torch.where(bad, torch.zeros_like(r), r)
            next_v = torch.where(bad, torch.zeros_like(next_v), next_v)
            rew_acc = rew_acc + discount * r
            ends = done | (t == h - 1)
            loss = loss - torch.where(ends, rew_acc + discount * gamma * next_v, torch.zeros_like(rew_acc)).sum()
            rec["reward"].append(r.detach())
            rec["done"].append(done)
            rec["next_value"].append(next_v.detach())
            with torch.no_grad():
                log["reward"] += float(r.mean()) / h
                log["e_track_cm"] += float(torch.nan_to_num(e_track_cm(sim_f, ref_f)).mean()) / h
                log["falls"] += int(out.fell.sum())
                log["terminations"] += int(terminated.sum())
                log["episodes"] += int(done.sum())
                log["episode_len_sum"] += int(task.steps[done].sum())
                log["touchdowns"] += int(out.touchdown.sum())
                log["bundled_steps"] += int(out.bundled.sum())
                log["nonfinite"] += int(bad.sum())
            discount = torch.where(done, torch.ones_like(discount), discount * gamma)
            rew_acc = torch.where(done, torch.zeros_like(rew_acc), rew_acc)
            if bool(done.any()):
                task.reset(done.nonzero().squeeze(-1))
                state = env.state
                obs = task.observation(state, task.frame, task.last_action)
                priv = task.privileged(state, task.frame)
                critic_in = self._critic_in(obs, priv)
            else:
                state, obs, priv, critic_in = out.state, next_obs, next_priv, next_critic_in
        loss = loss / (n * h)
        rollout_obs = torch.cat(seen_obs)  # [h N, n_obs]
        # scored with the statistics the rollout used, before they are updated
        if sc.obs_smoothness > 0:
            sensitivity = self.obs_sensitivity(rollout_obs)
            loss = loss + sc.obs_smoothness * sensitivity
        else:
            with torch.no_grad():
                sensitivity = self.obs_sensitivity(rollout_obs)
        log["obs_sensitivity"] = float(sensitivity.detach())
        if update_norm:
            self.norm.update(self.comm.gather(rollout_obs))
            self.priv_norm.update(self.comm.gather(torch.cat(seen_priv)))
        return loss, rec, log

    def iteration(self) -> dict:
        """Steps 1-4 of the module docstring; returns the metrics.csv row (`Algorithm.iteration`)."""
        sc, task, env, n = self.shac, self.task, self.env, self.n
        for opt, lr in ((self.actor_opt, sc.actor_lr), (self.critic_opt, sc.critic_lr)):
            for g in opt.param_groups:
                g["lr"] = lr * self._lr_frac()
        probes = self._probes()
        env.new_rollout()
        task.last_action = task.last_action.detach()
        loss, rec, log = self.rollout_loss(probes, self.update_norm)

        # 2. actor update (guarded)
        self.actor_opt.zero_grad(set_to_none=True)
        loss_ok = bool(torch.isfinite(loss))
        if loss_ok:
            loss.backward()
        bcg = env.bcg_stats().as_dict()
        env.new_rollout()
        task.last_action = task.last_action.detach()
        params = list(self.actor.parameters())
        self.comm.reduce_grads(params)
        grads = [p.grad for p in params if p.grad is not None]
        grad_norm = float(torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads]))) if grads else math.nan
        ok = (
            self.comm.sum_int(int(loss_ok and math.isfinite(grad_norm) and grad_norm <= sc.max_grad_norm))
            == self.comm.world_size
        )
        if ok:
            torch.nn.utils.clip_grad_norm_(params, sc.grad_clip)
            self.actor_opt.step()
            self.consecutive_skips = 0
        else:
            self.skipped_total += 1
            self.consecutive_skips += 1
        self.actor_opt.zero_grad(set_to_none=True)
        gradvar = gradvar_std = math.nan
        if probes is not None and ok:
            per_world = torch.cat([p.grad.reshape(n, -1) for p in probes], dim=1) * n  # each world's own loss
            grads = self.comm.gather(per_world).double().cpu().numpy()  # [N all ranks, P]
            gradvar = float(gradient_variance(grads))
            if sc.gradvar_bootstrap > 0:
                gradvar_std = bootstrap_variance_std(  # seeded by iteration: a resumed run logs the same figure
                    grads, sc.gradvar_bootstrap, np.random.default_rng(derive_seed(self.seed, "gradvar", self.iter))
                )

        # 3. critic on TD(lambda) targets
        critic_loss = self._update_critic(**rec) if ok else math.nan  # rec: rollout_loss's per-step records
        # 4. discriminator
        discriminator_log = self.reward.update()
        self.iter += 1
        episodes = log.pop("episodes")
        ep_len_sum = log.pop("episode_len_sum")
        means = {
            "actor_loss": float(loss.detach()),
            "critic_loss": critic_loss,
            "grad_norm": grad_norm,
            "gradvar": gradvar,
            "gradvar_std": gradvar_std,
            "lr_actor": sc.actor_lr * self._lr_frac(),
            **log,
            **discriminator_log,
            "skipped": int(not ok),
            "bcg_triggers": bcg["triggers"],
            "bcg_bundles": bcg["bundles_completed"],
            "bcg_overflow": bcg["overflow"],
            "bcg_pool_use": bcg["pool_use_mean"],
            "bcg_spread_pos": bcg["branch_spread_pos"],
        }
        counts = {k: log[k] for k in ("falls", "terminations", "nonfinite")}
        return reduce_iteration_log(self.comm, means, counts, episodes, ep_len_sum, n * sc.horizon, self.skipped_total)

    def stop_reason(self) -> str | None:
        if self.consecutive_skips < self.shac.max_consecutive_skips:
            return None
        return (
            f"{self.consecutive_skips} updates in a row skipped (non-finite or gradient norm above shac.max_grad_norm)"
        )

    def td_lambda_targets(self, r: torch.Tensor, done: torch.Tensor, next_v: torch.Tensor) -> torch.Tensor:
        """TD(lambda) returns [h, N] from rewards r [h, N], episode ends done [h, N] (bool) and target-critic
        values next_v [h, N] of the states after each step: G_t = r_t + gamma ((1 - lam) V_{t+1} + lam G_{t+1}),
        where an episode end at t uses V_{t+1} (0 if terminated) for G_{t+1}, and G_h = V(s_h)."""
        sc = self.shac
        g = next_v[-1]
        out = torch.empty_like(r)
        for t in reversed(range(r.shape[0])):
            g_next = torch.where(done[t], next_v[t], g) if t < r.shape[0] - 1 else next_v[t]
            g = r[t] + sc.gamma * ((1 - sc.lam) * next_v[t] + sc.lam * g_next)
            out[t] = g
        return out

    def _update_critic(self, critic_in: list, reward: list, done: list, next_value: list) -> float:
        """Step 3: fit the critic to TD(lambda) targets (lists of h per-step tensors [N, D] / [N]), then move the
        target critic towards it; returns the mean minibatch loss."""
        sc = self.shac
        x = torch.stack(critic_in).reshape(-1, critic_in[0].shape[-1])
        y = self.td_lambda_targets(torch.stack(reward), torch.stack(done), torch.stack(next_value)).reshape(-1)
        keep = torch.isfinite(y) & torch.isfinite(x).all(-1)
        x, y = x[keep], y[keep]
        total, count = 0.0, 0
        batch = max(1, x.shape[0] // sc.critic_minibatches)
        for _ in range(sc.critic_iters):
            perm = torch.randperm(x.shape[0], generator=self.noise_gen).to(self.device)
            for i in range(sc.critic_minibatches):
                idx = perm[i * batch : (i + 1) * batch]
                if idx.numel() == 0:
                    continue
                loss = ((self.critic(x[idx]).squeeze(-1) - y[idx]) ** 2).mean()
                self.critic_opt.zero_grad(set_to_none=True)
                loss.backward()
                self.comm.reduce_grads(self.critic.parameters())
                torch.nn.utils.clip_grad_norm_(self.critic.parameters(), sc.grad_clip)
                self.critic_opt.step()
                total += float(loss.detach())
                count += 1
        with torch.no_grad():  # target = tau target + (1 - tau) critic
            for tp, p in zip(self.target_critic.parameters(), self.critic.parameters()):
                tp.mul_(sc.target_tau).add_((1 - sc.target_tau) * p)
        return total / count if count else math.nan

    # ------------------------------------------------------------------ checkpoints / export
    def policy_network(self) -> torch.nn.Module:
        return self.actor

    def modules(self) -> list[torch.nn.Module]:
        return [self.actor, self.critic, self.target_critic, self.norm, self.priv_norm, *self.reward.modules()]

    # the parts a checkpoint keeps through their own state_dict / load_state_dict, each under its name
    _PARTS = ("actor", "critic", "target_critic", "norm", "priv_norm", "actor_opt", "critic_opt", "reward")

    def state_dict(self) -> dict:
        return {k: getattr(self, k).state_dict() for k in self._PARTS} | {
            "noise_gen": self.noise_gen.get_state(),
            "iter": self.iter,
            "skipped_total": self.skipped_total,
            "consecutive_skips": self.consecutive_skips,
        }

    def load_state_dict(self, d: dict) -> None:
        for k in self._PARTS:
            getattr(self, k).load_state_dict(d[k])
        self.noise_gen.set_state(d["noise_gen"])
        self.iter = d["iter"]
        self.skipped_total = d["skipped_total"]
        self.consecutive_skips = d["consecutive_skips"]


def _finite_rows(x: torch.Tensor) -> torch.Tensor:
    """x [N, D] with the rows of diverged worlds (any non-finite entry) replaced by zeros, so the networks see
    finite inputs (torch.where passes no gradient to the replaced rows)."""
    ok = torch.isfinite(x).all(-1, keepdim=True)
    return torch.where(ok, x, torch.zeros_like(x))


def _zero_nonfinite(grad: torch.Tensor) -> torch.Tensor:
    """Gradient hook: NaN/inf entries (a diverged world's) become 0."""
    return torch.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0)
