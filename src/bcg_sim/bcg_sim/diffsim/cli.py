"""`bcg-sim`: command-line tools of the differentiable simulator.

    bcg-sim parity [--seconds 1] [--kappa 100] [--amplitude 0.05]   # bcg_sim vs MuJoCo, same G1 and PD targets
    bcg-sim track [--clips run jump] [--seconds 0.5]                # open-loop PD replay of clips, both backends
    bcg-sim warmup                                                  # compile the Warp kernels and the native library

parity: the project's G1 starts in its default standing pose in bcg_sim (the configured backend, kappa contact
law, at sim_dt) and in MuJoCo (`bcg_sim.g1.load_mujoco`, its own soft contact, at the fixed reference dt
--mujoco-dt, default 0.5 ms, explicit PD), with the same effort-limited PD law, gains (default: the bring-up stand
gains) and armature, and follows the same PD-target sequence (default pose plus a sum of
sines on every joint) for `--seconds`. Reported per control step: body-position divergence (mean and max over
the 30 bodies of |p_bcg - p_mujoco| [m]) and each simulator's deepest sole-sphere penetration [m].
"""

from __future__ import annotations

import argparse
import dataclasses as dc
import json
import math
import sys
import time

import numpy as np

from bcg_sim.config import ConfigError

# MuJoCo is the reference: it steps at this fixed dt whatever bcg_sim's substep, so figures of different
# bcg_sim settings compare against the same physics.
MUJOCO_DT = 0.0005  # [s]


def pd_targets(default: np.ndarray, steps: int, control_dt: float, amplitude: float) -> np.ndarray:
    """[steps, 29] targets: default + amplitude * sin(2 pi f_j t + phi_j), f_j in 0.5..2 Hz (deterministic)."""
    j = np.arange(default.shape[0])
    f = 0.5 + 1.5 * ((j * 0.618) % 1.0)
    phi = 2 * math.pi * ((j * 0.382) % 1.0)
    t = np.arange(steps)[:, None] * control_dt
    return default[None] + amplitude * np.sin(2 * math.pi * f[None] * t + phi[None]) * (t > 0)


def run_parity(cfg, seconds: float, amplitude: float, mujoco_dt: float = MUJOCO_DT) -> dict:
    import mujoco
    import torch

    from bcg_sim import g1
    from bcg_sim.diffsim import make_simulator
    from bcg_sim.diffsim.model import pd_gains

    sim = make_simulator(cfg, 1)
    m = g1.load_mujoco(cfg.variant, floor=True)
    d = mujoco.MjData(m)
    mj_substeps = int(round(cfg.control_dt / mujoco_dt))
    if mj_substeps < 1 or abs(mj_substeps * mujoco_dt - cfg.control_dt) > 1e-9:
        raise ValueError(f"--mujoco-dt {mujoco_dt} s does not divide the control period {cfg.control_dt} s")
    m.opt.timestep = mujoco_dt
    motors = [g1.MOTORS[j.motor] for j in g1.joints(cfg.variant)]
    kp, kd = (np.asarray(g, dtype=np.float64) for g in pd_gains(cfg))
    effort = np.array([mo.effort_limit for mo in motors], dtype=np.float64)
    m.dof_armature[6:] = np.maximum([mo.armature for mo in motors], cfg.actuation.min_armature)
    m.actuator_ctrlrange[:] = np.stack([-effort, effort], 1)
    d.qpos[:] = g1.default_qpos(cfg.variant)
    mujoco.mj_forward(m, d)
    foot_geoms = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, n) for n in g1.foot_sphere_names()]
    body_ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in sim.m.body_names]

    steps = int(round(seconds * cfg.control_hz))
    targets = pd_targets(np.asarray(g1.default_joint_pos(cfg.variant)), steps, cfg.control_dt, amplitude)
    q, qd = sim.default_state()
    rows = []
    with torch.no_grad():
        for k in range(steps):
            tgt = targets[k]
            o = sim.step(torch.as_tensor(tgt, dtype=torch.float32)[None], q, qd)
            q, qd = o.joint_q, o.joint_qd
            pen_mj = 0.0
            for _ in range(mj_substeps):
                d.ctrl[:] = np.clip(kp * (tgt - d.qpos[7:]) - kd * d.qvel[6:], -effort, effort)
                mujoco.mj_step(m, d)
                z = d.geom_xpos[foot_geoms, 2] - m.geom_size[foot_geoms, 0]
                pen_mj = max(pen_mj, float(max(0.0, -z.min())))  # deepest over the step's substeps
            p_bcg = o.body_q[0, :, :3].numpy().astype(np.float64)
            p_mj = d.xpos[body_ids]
            dist = np.linalg.norm(p_bcg - p_mj, axis=1)
            rows.append(
                dict(
                    t=(k + 1) * cfg.control_dt,
                    body_dist_mean=float(dist.mean()),
                    body_dist_max=float(dist.max()),
                    pen_bcg=float(o.foot_penetration.max()),
                    pen_mujoco=pen_mj,
                    root_z_bcg=float(p_bcg[0, 2]),
                    root_z_mujoco=float(p_mj[0, 2]),
                )
            )
    return dict(
        seconds=seconds,
        kappa=cfg.contact.kappa,
        amplitude=amplitude,
        gains=cfg.actuation.gains,
        kp_scale=cfg.actuation.kp_scale,
        kd_scale=cfg.actuation.kd_scale,
        sim_dt=cfg.sim_dt,
        backend=cfg.backend,
        mujoco_dt=mujoco_dt,
        final_body_dist_mean=rows[-1]["body_dist_mean"],
        final_body_dist_max=rows[-1]["body_dist_max"],
        mean_body_dist_mean=float(np.mean([r["body_dist_mean"] for r in rows])),
        mean_foot_penetration_bcg=float(np.mean([r["pen_bcg"] for r in rows])),
        mean_foot_penetration_mujoco=float(np.mean([r["pen_mujoco"] for r in rows])),
        rows=rows,
    )


def _parity(args) -> int:
    from bcg_sim.diffsim import load_sim_config

    cfg = load_sim_config(args.config)
    if args.backend is not None:
        cfg = cfg.with_backend(args.backend)
    if args.kappa is not None:
        cfg = cfg.with_kappa(args.kappa)
    act = dc.replace(cfg.actuation, gains=args.gains, kp_scale=args.kp_scale, kd_scale=args.kd_scale)
    cfg = dc.replace(cfg, actuation=act).validate()
    # A cold Warp kernel cache / native build compiles for minutes with nothing else to show: say so up front.
    print(
        f"bcg-sim parity: simulating {args.seconds:g} s in bcg_sim ({cfg.backend}) and MuJoCo (first run on a "
        "machine compiles the simulator, 1-3 min; `bcg-sim warmup` does that once) ...",
        file=sys.stderr,
        flush=True,
    )
    t0 = time.perf_counter()
    r = run_parity(cfg, args.seconds, args.amplitude, args.mujoco_dt)
    print(f"bcg-sim parity: done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    print(
        f"bcg_sim ({cfg.backend}) vs MuJoCo (dt {args.mujoco_dt * 1e3:g} ms): G1, {args.seconds:g} s, "
        f"dt {cfg.sim_dt * 1e3:g} ms, kappa {cfg.contact.kappa:g} kN/m, "
        f"{args.gains} PD gains x{args.kp_scale:g}/x{args.kd_scale:g}, target amplitude {args.amplitude:g} rad"
    )
    print(
        f"{'t [s]':>6} {'body |dp| mean':>15} {'max':>8} {'pen bcg [mm]':>13} {'pen mj [mm]':>12} "
        f"{'z bcg':>7} {'z mj':>7}"
    )
    every = max(1, len(r["rows"]) // 10)
    for row in r["rows"][every - 1 :: every]:
        print(
            f"{row['t']:>6.2f} {row['body_dist_mean']:>15.4f} {row['body_dist_max']:>8.4f} "
            f"{row['pen_bcg'] * 1e3:>13.2f} "
            f"{row['pen_mujoco'] * 1e3:>12.2f} {row['root_z_bcg']:>7.3f} {row['root_z_mujoco']:>7.3f}"
        )
    print(
        f"final body-position divergence: mean {r['final_body_dist_mean'] * 1e3:.1f} mm, max "
        f"{r['final_body_dist_max'] * 1e3:.1f} mm; mean foot penetration: bcg_sim "
        f"{r['mean_foot_penetration_bcg'] * 1e3:.2f} mm, MuJoCo {r['mean_foot_penetration_mujoco'] * 1e3:.2f} mm"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1)
        print(f"wrote {args.json}")
    return 0


def run_track(cfg, clip, seconds: float, worlds: int) -> dict:
    """Open-loop PD replay of a reference clip (a `bcg_sim.motion.Motion`): `worlds` starts spread over the clip's
    first half, each reset to
    the clip's state and driven by PD targets = the clip's joint positions one control step ahead. Returns the
    mean per-body position error [m] against the clip's own body positions (MuJoCo FK of its frames) over the
    replay (with its standard error over the starts and each start's own mean), and the fraction of worlds that
    fell (pelvis below termination.min_root_height at any step). Measures how closely the simulator follows a
    motion it is asked to track with no policy (physics fidelity under PD, not a controller)."""
    import torch

    from bcg_sim.diffsim import G1DiffEnv
    from bcg_sim.motion.kinematics import forward_kinematics

    steps = int(round(seconds * cfg.control_hz))
    stride = clip.fps * cfg.control_dt  # clip frames per control step
    last = clip.num_frames - 1 - int(np.ceil(steps * stride))
    if last < 0:
        raise ConfigError(f"track: clip {clip.name!r} is shorter than {seconds} s")
    frames = np.linspace(0, min(last, clip.num_frames // 2), worlds).round().astype(int)
    qpos = np.concatenate([clip.root_pos_w, clip.root_quat_w, clip.joint_pos], axis=1)
    ref_body, _ = forward_kinematics(qpos)
    env = G1DiffEnv(dc.replace(cfg, bcg=dc.replace(cfg.bcg, enabled=False)), worlds)
    env.reset(motion=clip, frames=torch.as_tensor(frames))
    scale = cfg.actuation.action_scale
    errs, fell = [], np.zeros(worlds, dtype=bool)
    with torch.no_grad():
        for k in range(steps):
            f = np.minimum(frames + int(round((k + 1) * stride)), clip.num_frames - 1)
            target = torch.as_tensor(clip.joint_pos[f], dtype=torch.float32)
            out = env.step((target - env.default_joint_pos) / scale)  # action whose PD target is the clip's pose
            fell |= out.fell.numpy()
            errs.append(np.linalg.norm(out.body_pos_w.numpy() - ref_body[f], axis=-1).mean(axis=-1))  # [worlds]
    per_world = np.mean(errs, axis=0)  # [worlds] time-averaged mean per-body error [m]
    return dict(
        clip=clip.name,
        backend=cfg.backend,
        sim_dt=cfg.sim_dt,
        kappa=cfg.contact.kappa,
        seconds=seconds,
        worlds=worlds,
        body_error_mean=float(per_world.mean()),
        body_error_se=_standard_error(per_world),
        body_error_final=float(np.mean(errs[-1])),
        body_error_per_world=per_world.tolist(),
        fell=float(fell.mean()),
    )


def _standard_error(x: np.ndarray) -> float:
    """Standard error of the mean over starts (0 for a single start)."""
    return float(np.std(x, ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0


def _track(args) -> int:
    from bcg_sim import motion as motion_lib
    from bcg_sim.diffsim import load_sim_config
    from bcg_sim.motion.formats import MotionFormatError

    if args.worlds < 1 or args.seconds <= 0:
        raise ConfigError(f"track: --worlds must be >= 1 and --seconds > 0, got {args.worlds} and {args.seconds}")
    base = load_sim_config(args.config)
    if args.kappa is not None:
        base = base.with_kappa(args.kappa)
    base = dc.replace(base, actuation=dc.replace(base.actuation, gains=args.gains)).validate()
    try:
        clips = [motion_lib.load(name) for name in args.clips]
    except MotionFormatError as exc:  # unknown clip or a bad motion file: before any simulation
        raise ConfigError(f"track: {exc}") from None
    print(
        f"open-loop PD replay, {args.seconds:g} s, {args.worlds} starts per clip, kappa {base.contact.kappa:g} kN/m, "
        f"{args.gains} gains: mean per-body position error vs the clip [mm] +- standard error over the starts, "
        "fraction fallen"
    )
    print(f"{'clip':>7} " + " ".join(f"{b:>24}" for b in args.backends))
    rows = []
    for clip in clips:
        cells = [run_track(base.with_backend(b), clip, args.seconds, args.worlds) for b in args.backends]
        print(
            f"{clip.name:>7} "
            + " ".join(
                f"{1e3 * r['body_error_mean']:8.1f} +- {1e3 * r['body_error_se']:4.1f} {r['fell']:5.2f}" for r in cells
            ),
            flush=True,
        )
        rows += cells
        for r in cells[:-1]:  # paired over the same starts: each backend against the last one named
            _print_paired(r, cells[-1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
        print(f"wrote {args.json}")
    return 0


def _print_paired(a: dict, b: dict) -> None:
    """The difference of two backends' errors on the same starts: mean and its standard error [mm]."""
    d = 1e3 * (np.asarray(a["body_error_per_world"]) - np.asarray(b["body_error_per_world"]))
    print(
        f"{'':>7}   {a['backend']} - {b['backend']}: {d.mean():+.2f} +- {_standard_error(d):.2f} mm "
        f"({100 * d.mean() / (1e3 * b['body_error_mean']):+.2f} %; {b['backend']}'s own standard error "
        f"{1e3 * b['body_error_se']:.2f} mm)"
    )


def _warmup(args) -> int:
    from bcg_sim.warmup import main as warm

    warm(["--config", args.config])
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bcg-sim", description="bcg_sim differentiable simulator tools")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("parity", help="bcg_sim vs MuJoCo on the same G1, initial state and PD targets")
    p.add_argument("--config", default="sim")
    p.add_argument(
        "--backend",
        choices=("native", "newton"),
        default=None,
        help="simulator backend (default: the config's); newton runs its own 0.5 ms explicit scheme",
    )
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--kappa", type=float, default=None, help="contact stiffness [kN/m] (default: config)")
    p.add_argument("--amplitude", type=float, default=0.05, help="PD target sine amplitude [rad]")
    p.add_argument(
        "--gains",
        choices=("stand", "policy"),
        default="stand",
        help="stand: bcg_sim.g1.stand_gains() (holds the pose); policy: the motors' gains (it falls)",
    )
    p.add_argument("--kp-scale", type=float, default=1.0, help="x kp")
    p.add_argument("--kd-scale", type=float, default=1.0, help="x kd")
    p.add_argument("--json", default=None, help="write all rows to this JSON file")
    p.add_argument(
        "--mujoco-dt", type=float, default=MUJOCO_DT, help="MuJoCo reference timestep [s] (default %(default)s)"
    )
    p.set_defaults(func=_parity)
    t = sub.add_parser("track", help="open-loop PD replay of reference clips on each backend: body error vs the clip")
    t.add_argument("--config", default="sim")
    t.add_argument("--clips", nargs="+", default=["run", "jump", "fight", "dance"])
    t.add_argument("--backends", nargs="+", choices=("native", "newton"), default=["native", "newton"])
    t.add_argument("--seconds", type=float, default=0.5, help="replay length [s] (default %(default)s)")
    t.add_argument("--worlds", type=int, default=4, help="start frames per clip (default %(default)s)")
    t.add_argument("--kappa", type=float, default=None, help="contact stiffness [kN/m] (default: config)")
    t.add_argument("--gains", choices=("stand", "policy"), default="policy", help="PD gains (default %(default)s)")
    t.add_argument("--json", default=None, help="write every clip x backend result (per-start errors too) here")
    t.set_defaults(func=_track)
    w = sub.add_parser("warmup", help="compile and cache the Warp kernels and the native backend")
    w.add_argument("--config", default="sim")
    w.set_defaults(func=_warmup)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:  # a bad config file or value: one line, exit 2
        print(f"bcg-sim: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
