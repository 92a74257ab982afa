"""`bcg-gradvar`: variance of per-world policy gradients with and without Bundled Contact Gradients.

    bcg-gradvar [--motion run] [--worlds 16] [--horizon 16] [--kappas 50 100 300] [--out runs/gradvar]

A fixed linear policy (seeded; a = tanh(W obs + b), obs = joint offsets from the default pose, scaled joint
velocities, root orientation and angular velocity) drives N worlds started at evenly spaced frames of a reference
clip. Each world owns an identical copy of (W, b), so one backward gives every world's own gradient of its
tracking cost over a SHAC-length horizon (mean over steps of |joint_pos - ref|^2 + 10 |root_pos - ref|^2).
For kappa in --kappas and BCG off/on the variance across worlds, trace(Cov)/#params, is reported with a
+-1 std band from a bootstrap over worlds; also relative to |mean gradient|^2, and the ratio var(on)/var(off)
with a paired bootstrap (the same resampled worlds for both, since off and on start from the same states).
Writes gradvar.csv and gradvar.png.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses as dc
from pathlib import Path

import numpy as np
import torch

OBS_DIM = 29 + 29 + 4 + 3
ROOT_WEIGHT = 10.0  # cost weight of the pelvis position error [1/m^2] relative to joint errors [1/rad^2]
POLICY_INIT_STD = 0.05  # std of the fixed policy's weights


def observation(state, default_joint_pos: torch.Tensor) -> torch.Tensor:
    """[N, 65]: joint offsets [rad], 0.1 x joint velocities, root quaternion (w x y z), root angular velocity."""
    return torch.cat(
        [state.joint_pos - default_joint_pos, 0.1 * state.joint_vel, state.root_quat_w, state.root_ang_vel_w], dim=-1
    )


def start_states(motion, frames: np.ndarray, joint_noise: float, seed: int):
    """SimState of `motion` at `frames` with every joint offset by U(-joint_noise, joint_noise) [rad] (seeded,
    so BCG off and on start from the same states)."""
    from bcg_sim.diffsim import motion_state

    state = motion_state(motion, torch.as_tensor(frames))
    if joint_noise > 0:
        g = torch.Generator().manual_seed(seed + 1)
        noise = (2 * torch.rand(state.joint_pos.shape, generator=g) - 1) * joint_noise
        state = dc.replace(state, joint_pos=state.joint_pos + noise)
    return state


def per_world_gradients(
    env, motion, frames: np.ndarray, horizon: int, seed: int, progress=None, joint_noise: float = 0.0
) -> tuple[np.ndarray, float, int]:
    """([N, P] gradient of each world's cost w.r.t. its own copy of the policy parameters, mean cost,
    number of touchdowns by the BCG rule -- counted with BCG off too)."""
    n = env.num_worlds
    g = torch.Generator().manual_seed(seed)
    W0 = POLICY_INIT_STD * torch.randn(29, OBS_DIM, generator=g)
    b0 = torch.zeros(29)
    W = W0.expand(n, -1, -1).clone().requires_grad_(True)
    b = b0.expand(n, -1).clone().requires_grad_(True)
    env.new_rollout()
    env.reset(motion=motion, frames=torch.as_tensor(frames), state=start_states(motion, frames, joint_noise, seed))
    ref_jp = torch.as_tensor(motion.joint_pos, dtype=torch.float32)
    ref_rp = torch.as_tensor(motion.root_pos_w, dtype=torch.float32)
    frames_t = torch.as_tensor(frames)
    state = env.state
    cost = torch.zeros(n)
    touchdowns = 0
    step_frames = motion.fps / env.cfg.control_hz
    for t in range(horizon):
        obs = observation(state, env.default_joint_pos)
        a = torch.tanh(torch.einsum("nij,nj->ni", W, obs) + b)
        out = env.step(a)
        state = out.state
        touchdowns += int(out.touchdown.sum())
        f = torch.clamp(torch.round(frames_t + (t + 1) * step_frames).long(), max=motion.num_frames - 1)
        cost = (
            cost
            + ((state.joint_pos - ref_jp[f]) ** 2).sum(-1)
            + ROOT_WEIGHT * ((state.root_pos_w - ref_rp[f]) ** 2).sum(-1)
        )
        if progress is not None:
            progress.update(1)
    cost = cost / horizon
    cost.sum().backward()  # world i's cost depends only on world i's parameter copy
    grads = torch.cat([W.grad.reshape(n, -1), b.grad], dim=1)
    return grads.numpy().astype(np.float64), float(cost.detach().mean()), touchdowns


_MIN_MEAN_SQ = 1e-30  # floor of |mean gradient|^2 in the relative variance (a zero mean has no ratio)


def gradient_variance(grads: np.ndarray) -> float:
    """trace(Cov)/P of [N, P] per-world gradients: the spread across worlds per parameter."""
    return ((grads - grads.mean(0)) ** 2).sum(1).mean() / grads.shape[1]


def _bootstrap_counts(n: int, boot: int, rng: np.random.Generator) -> np.ndarray:
    """[boot, n] count vectors of `boot` resamples (with replacement) of n worlds: one rng.integers(0, n, n) each."""
    return np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(boot)]).astype(float)


def _resampled_moments(grads: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gradient_variance [boot], mean gradient [boot, P]) of the resamples given by count vectors w [boot, N].
    A resample's variance is (sum_i w_i |g_i|^2 / N - |sum_i w_i g_i / N|^2)/P, so all resamples are two matrix
    products instead of `boot` copies of the gradients."""
    n, p = grads.shape
    mean = w @ grads / n  # [boot, P]
    return (w @ (grads**2).sum(1) / n - (mean**2).sum(1)) / p, mean


def bootstrap_variance_std(grads: np.ndarray, boot: int, rng: np.random.Generator) -> float:
    """Std of `gradient_variance` over `boot` resamples (with replacement) of the N worlds of [N, P] `grads`."""
    var, _ = _resampled_moments(grads, _bootstrap_counts(grads.shape[0], boot, rng))
    return float(var.std())


def variance_stats(grads: np.ndarray, boot: int, rng: np.random.Generator) -> dict:
    """trace(Cov)/P across worlds and its bootstrap std; the same relative to |mean|^2."""
    var = gradient_variance(grads)
    rel = var / max((grads.mean(0) ** 2).mean(), _MIN_MEAN_SQ)
    var_b, mean_b = _resampled_moments(grads, _bootstrap_counts(grads.shape[0], boot, rng))
    rel_b = var_b / np.maximum((mean_b**2).mean(1), _MIN_MEAN_SQ)
    return dict(
        var=var,
        var_std=var_b.std(),
        rel_var=rel,
        rel_var_std=rel_b.std(),
        grad_norm_mean=float(np.linalg.norm(grads, axis=1).mean()),
    )


def paired_ratio(g_off: np.ndarray, g_on: np.ndarray, boot: int, rng: np.random.Generator) -> tuple[float, float]:
    """var(on)/var(off) and its bootstrap std, resampling the same worlds for both: off and on start every world
    from the same state, so pairing removes the spread of the start states from the comparison."""

    def ratio(i):  # nan where BCG off has no spread at all (identical start states): no ratio to speak of
        v_off = gradient_variance(g_off[i])
        return gradient_variance(g_on[i]) / v_off if v_off > 0 else np.nan

    n = g_off.shape[0]
    samples = np.array([ratio(i) for i in rng.integers(0, n, (boot, n))])
    return float(ratio(np.arange(n))), float(np.nanstd(samples)) if np.isfinite(samples).any() else np.nan


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bcg-gradvar", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="sim")
    ap.add_argument("--motion", default="run", help="built-in clip name or motion file")
    ap.add_argument("--worlds", type=int, default=16)
    ap.add_argument("--horizon", type=int, default=16, help="control steps (SHAC uses 16)")
    ap.add_argument("--kappas", type=float, nargs="+", default=[50.0, 100.0, 300.0])
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--pool-size",
        type=int,
        default=None,
        help="BCG branch worlds (default: the config's; B x worlds never overflows)",
    )
    ap.add_argument("--sigma", type=float, default=None, help="BCG position radius [m] (default: config)")
    ap.add_argument("--sigma-v", type=float, default=None, help="BCG velocity radius [m/s] (default: config)")
    ap.add_argument(
        "--perturbation", choices=("base", "leg"), default=None, help="BCG perturbation mapping (default: config)"
    )
    ap.add_argument("--branches", type=int, default=None, help="BCG branches B per trigger (default: config)")
    ap.add_argument(
        "--bcg-horizon", type=int, default=None, help="BCG horizon H: steps before the branches merge (default: config)"
    )
    ap.add_argument(
        "--same-start",
        type=int,
        default=None,
        metavar="FRAME",
        help="start every world at this clip frame (with --joint-noise): the spread across worlds is "
        "then the dynamics' sensitivity, not the spread of start frames",
    )
    ap.add_argument(
        "--joint-noise", type=float, default=0.0, help="uniform start-state noise on every joint [rad] (default 0)"
    )
    ap.add_argument("--out", default="runs/gradvar")
    args = ap.parse_args(argv)

    from tqdm import tqdm

    import bcg_sim.motion
    from bcg_sim.config import ConfigError
    from bcg_sim.diffsim import G1DiffEnv, load_sim_config

    base = load_sim_config(args.config)
    overrides = {
        k: v
        for k, v in (
            ("pool_size", args.pool_size),
            ("sigma", args.sigma),
            ("sigma_v", args.sigma_v),
            ("perturbation", args.perturbation),
            ("branches", args.branches),
            ("horizon", args.bcg_horizon),
        )
        if v is not None
    }
    base = dc.replace(base, bcg=dc.replace(base.bcg, **overrides))
    try:
        base.validate()
    except ConfigError as exc:  # e.g. --branches 6 with a pool that is no multiple of 6
        ap.error(str(exc))
    motion = bcg_sim.motion.load(args.motion)
    last_start = motion.num_frames - 1 - int(np.ceil(args.horizon * motion.fps / base.control_hz))
    if last_start < 0:
        ap.error(f"motion {args.motion!r} ({motion.num_frames} frames) is shorter than the horizon")
    if args.same_start is not None and not 0 <= args.same_start <= last_start:
        ap.error(f"--same-start must lie in [0, {last_start}] for {args.motion!r} and this horizon")
    if args.joint_noise < 0:
        ap.error("--joint-noise must be >= 0")
    frames = (
        np.full(args.worlds, args.same_start)
        if args.same_start is not None
        else np.linspace(0, last_start, args.worlds).round().astype(int)
    )
    rng = np.random.default_rng(args.seed)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    progress = tqdm(total=2 * len(args.kappas) * args.horizon, unit="step", desc="gradvar")
    for kappa in args.kappas:
        for enabled in (False, True):
            cfg = dc.replace(base, bcg=dc.replace(base.bcg, enabled=enabled)).with_kappa(kappa)
            env = G1DiffEnv(cfg, args.worlds)
            progress.set_postfix(kappa=kappa, bcg=enabled)
            grads, cost, touchdowns = per_world_gradients(
                env, motion, frames, args.horizon, args.seed, progress, args.joint_noise
            )
            if not enabled:
                grads_off = grads
            finite = np.isfinite(grads).all(1)
            st = variance_stats(grads[finite], args.bootstrap, rng)
            both = finite & np.isfinite(grads_off).all(1)
            ratio, ratio_std = (
                paired_ratio(grads_off[both], grads[both], args.bootstrap, rng) if enabled else (1.0, 0.0)
            )
            bs = env.bcg_stats()
            row = dict(
                kappa=kappa,
                bcg=enabled,
                worlds=int(finite.sum()),
                horizon=args.horizon,
                cost=cost,
                **st,
                ratio_on_off=ratio,
                ratio_on_off_std=ratio_std,
                touchdowns=touchdowns,
                bundles=bs.bundles_completed,
                overflow=bs.overflow,
                branch_spread_pos=bs.branch_spread_pos,
            )
            rows.append(row)
            progress.write(
                f"kappa {kappa:>5g} BCG {'on ' if enabled else 'off'}: var {st['var']:.3e} "
                f"+- {st['var_std']:.1e}  rel {st['rel_var']:.3e} +- {st['rel_var_std']:.1e}  "
                f"|g| {st['grad_norm_mean']:.3e}  cost {cost:.3f}  touchdowns {touchdowns} "
                f"bundles {bs.bundles_completed} overflow {bs.overflow}"
                + (f"  var on/off {ratio:.3f} +- {ratio_std:.3f} (paired)" if enabled else "")
            )
    progress.close()
    csv_path = out_dir / "gradvar.csv"
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    png_path = out_dir / "gradvar.png"
    _plot(rows, png_path, args)
    print(f"wrote {csv_path} and {png_path}")
    return 0


def _plot(rows, path: Path, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, key, label in (
        (axes[0], "var", "gradient variance trace(Cov)/P"),
        (axes[1], "rel_var", "variance / |mean gradient|^2"),
    ):
        for enabled, color in ((False, "tab:red"), (True, "tab:blue")):
            r = [x for x in rows if x["bcg"] == enabled]
            k = np.array([x["kappa"] for x in r])
            v = np.array([x[key] for x in r])
            s = np.array([x[key + "_std"] for x in r])
            ax.plot(k, v, "o-", color=color, label="BCG on" if enabled else "BCG off")
            ax.fill_between(k, np.maximum(v - s, v * 1e-3), v + s, color=color, alpha=0.2)
        ax.set_xscale("log")
        # Log scale for the usual spread over decades; linear when a variance is exactly 0 (identical worlds).
        ax.set_yscale("log" if all(x[key] > 0 for x in rows) else "linear")
        ax.set_xlabel("contact stiffness kappa [kN/m]")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    _plot_ratio(axes[2], [x for x in rows if x["bcg"] and np.isfinite(x["ratio_on_off"])])
    fig.suptitle(
        f"per-world policy gradients, {args.motion}, N={args.worlds}, horizon {args.horizon} (band: +-1 bootstrap std)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _plot_ratio(ax, on_rows) -> None:
    """var(on)/var(off) per kappa with its paired-bootstrap std; 1 = BCG changes nothing."""
    if not on_rows:  # identical start states: BCG off has no spread, so there is no ratio
        ax.text(
            0.5, 0.5, "no on/off ratio:\nBCG off has zero variance", ha="center", va="center", transform=ax.transAxes
        )
        ax.set_axis_off()
        return
    k = np.array([x["kappa"] for x in on_rows])
    r = np.array([x["ratio_on_off"] for x in on_rows])
    s = np.array([x["ratio_on_off_std"] for x in on_rows])
    ax.errorbar(k, r, yerr=s, fmt="o-", color="tab:blue", capsize=4, label="BCG on / off (paired bootstrap)")
    ax.axhline(1.0, color="tab:red", lw=1, ls="--", label="no change")
    ax.set_xscale("log")
    ax.set_xlabel("contact stiffness kappa [kN/m]")
    ax.set_ylabel("variance ratio on / off")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


if __name__ == "__main__":
    raise SystemExit(main())
