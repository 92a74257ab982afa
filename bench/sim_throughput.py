"""Simulator throughput: bcg_sim vs stock Newton Featherstone on the same G1, and BCG on/off overhead.

    python bench/sim_throughput.py                 # N = 1, 16, 64; results table on stdout
    python bench/sim_throughput.py --worlds 1 16 --control-steps 1

An *env-step* is one world advanced by one solver substep (dt = sim_dt, 0.5 ms); control steps/s = env-steps/s
/ substeps (40 at 50 Hz). Both simulators run the same G1 (bcg_sim.g1 via diffsim.model.newton_builder),
Featherstone with use_tile_gemm=True, dt 0.5 ms, kappa from config/sim.yaml:

- bcg_sim: `Simulator.step` from torch tensors: analytic sphere-ground contact + effort-limited PD kernels,
  per-substep tapes; fwd+bwd includes the backward's per-substep forward recompute (docs/sim.md).
- stock: Newton's CollisionPipeline (collide every substep) + SolverFeatherstone's own contact and joint drive
  (same gains, no effort limit), states preallocated, one wp.Tape over the whole run for fwd+bwd.
"""

from __future__ import annotations

import argparse
import dataclasses as dc
import time

import newton
import numpy as np
import torch
import warp as wp

from bcg_sim import g1
from bcg_sim.diffsim import G1DiffEnv, Simulator, load_sim_config
from bcg_sim.diffsim.model import newton_builder, pd_gains

REPEATS = 3  # timed runs per measurement; the best is reported (the machine is shared)


def best_time(fn) -> float:
    """Shortest wall time [s] of REPEATS calls of fn."""
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_bcg(cfg, n: int, control_steps: int, backward: bool) -> float:
    """env-steps/s of bcg_sim's Simulator."""
    sim = Simulator(cfg, n)
    q0, qd0 = sim.default_state()
    tgt = torch.as_tensor(sim.m.default_joint_q[7:], dtype=torch.float32).expand(n, -1).clone()

    def run():
        sim.new_rollout()
        q, qd = q0.clone(), qd0.clone()
        t = tgt.clone().requires_grad_(backward)
        with torch.set_grad_enabled(backward):
            for _ in range(control_steps):
                o = sim.step(t, q, qd)
                q, qd = o.joint_q, o.joint_qd
            if backward:
                (q.sum() + qd.sum()).backward()

    run()  # warm-up (kernel load, buffer allocation)
    return n * control_steps * cfg.substeps / best_time(run)


def stock_model(cfg, n: int):
    one = newton_builder(cfg.variant, armature_min=cfg.actuation.min_armature)
    c = cfg.contact
    for i in range(one.shape_count):
        one.shape_material_ke[i], one.shape_material_kd[i] = c.ke, c.kd
        one.shape_material_kf[i], one.shape_material_mu[i] = c.kf, c.friction_mu
    for j, (kp, kd) in enumerate(zip(*pd_gains(cfg))):
        one.joint_target_ke[6 + j] = kp
        one.joint_target_kd[6 + j] = kd
    b = newton.ModelBuilder()
    b.replicate(one, n, separate_worlds=True)
    ground = newton.ModelBuilder.ShapeConfig(ke=c.ke, kd=c.kd, kf=c.kf, mu=c.friction_mu)
    b.add_ground_plane(cfg=ground)
    return b.finalize(device=cfg.device, requires_grad=True)


def bench_stock(cfg, n: int, substeps: int, backward: bool) -> float:
    """env-steps/s of stock Newton Featherstone with its collision pipeline."""
    model = stock_model(cfg, n)
    solver = newton.solvers.SolverFeatherstone(model, use_tile_gemm=True, angular_damping=cfg.solver.angular_damping)
    pipeline = newton.CollisionPipeline(model)
    states = [model.state(requires_grad=backward) for _ in range(substeps + 1)]
    contacts = [pipeline.contacts() for _ in range(substeps)] if backward else [pipeline.contacts()] * substeps
    control = model.control()
    default = np.tile(np.asarray(g1.default_joint_pos(cfg.variant), np.float32), n)
    tq = control.joint_target_q.numpy().reshape(n, -1)
    tq[:, -29:] = default.reshape(n, 29)
    control.joint_target_q.assign(tq.reshape(-1))
    q0 = model.joint_q.numpy()

    def run():
        states[0].joint_q.assign(q0)
        states[0].joint_qd.zero_()
        newton.eval_fk(model, states[0].joint_q, states[0].joint_qd, states[0])
        tape = wp.Tape() if backward else None
        for i in range(substeps):
            s_in = states[i] if backward else states[i % 2]
            s_out = states[i + 1] if backward else states[(i + 1) % 2]
            pipeline.collide(s_in, contacts[i])  # collision detection stays outside the tape
            if tape is not None:
                with tape:
                    solver.step(s_in, s_out, control, contacts[i], cfg.sim_dt)
            else:
                solver.step(s_in, s_out, control, contacts[i], cfg.sim_dt)
        if tape is not None:
            last = states[substeps]
            last.joint_q.grad.fill_(1.0)
            last.joint_qd.grad.fill_(1.0)
            tape.backward()
            tape.zero()
        wp.synchronize()

    run()
    return n * substeps / best_time(run)


def bench_bcg_overhead(cfg, n: int, control_steps: int) -> dict:
    """fwd+bwd env-steps/s of the env with BCG off and on, worlds dropped from 1-8 cm so feet touch down."""
    out = {}
    for enabled in (False, True):
        c = dc.replace(cfg, bcg=dc.replace(cfg.bcg, enabled=enabled))
        env = G1DiffEnv(c, n)
        heights = torch.linspace(0.01, 0.08, n)

        def run():
            env.new_rollout()
            s = env.state
            s.root_pos_w[:, 2] = torch.as_tensor(g1.default_qpos(c.variant)[2], dtype=torch.float32) + heights
            env.reset(state=s)
            acts = torch.zeros(n, 29, requires_grad=True)
            loss = 0.0
            for _ in range(control_steps):
                o = env.step(acts)
                loss = loss + o.state.root_pos_w.sum()
            loss.backward()

        run()
        out[enabled] = (n * control_steps * c.substeps / best_time(run), env.bcg_stats())
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--control-steps", type=int, default=1, help="control steps per timed run (x substeps)")
    ap.add_argument("--kappa", type=float, default=None, help="contact stiffness [kN/m] (default: config)")
    ap.add_argument("--bcg-worlds", type=int, default=16)
    ap.add_argument("--bcg-steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (Warp CPU kernels are serial)")
    ap.add_argument("--repeats", type=int, default=REPEATS, help="timed runs per figure; the best is kept")
    ap.add_argument("--device", default=None, help="cpu or cuda:0 (default: config/sim.yaml's device)")
    ap.add_argument("--shac", action="store_true", help="only the SHAC-shaped iteration table")
    ap.add_argument("--shac-worlds", type=int, default=64)
    ap.add_argument("--shac-horizon", type=int, default=16)
    ap.add_argument("--shac-repeats", type=int, default=2, help="timed iterations per cell (best kept)")
    ap.add_argument(
        "--overhead-pairs",
        type=int,
        default=0,
        metavar="N",
        help="with --shac: only the native BCG overhead, as N alternating off/on pairs in one process and "
        "N in two (median and range; this machine's timings wander, interleaving shares that out)",
    )
    ap.add_argument(
        "--compare-config",
        default=None,
        metavar="YAML",
        help="with --shac: only the native cells (BCG off and on, one thread per process) of config/sim.yaml "
        "and of this sim config, in one process and in two, interleaved --overhead-pairs times (default 1)",
    )
    ap.add_argument(
        "--dr-pairs",
        type=int,
        default=0,
        metavar="N",
        help="with --shac: only the cost of per-world physics randomization (native, BCG on, "
        "one process), N interleaved off/on pairs, the proposed on-ranges of docs/training.md",
    )
    ap.add_argument("--shac-cell", nargs=8, default=None, help=argparse.SUPPRESS)  # internal: one cell, JSON out
    args = ap.parse_args(argv)
    if args.shac_cell:
        import json

        b, bcg, n, h, th, rep, config, dr = args.shac_cell
        torch.set_num_threads(1)  # one core per process: torch's intra-op threads only contend with the simulator
        print(
            json.dumps(shac_iteration_cell(b, bool(int(bcg)), int(n), int(h), int(th), int(rep), config, bool(int(dr))))
        )
        return
    if args.shac and args.dr_pairs > 0:
        dr_pairs(args.shac_worlds, args.shac_horizon, args.shac_repeats, args.dr_pairs)
        return
    if args.shac and args.compare_config:
        compare_configs(
            args.compare_config, args.shac_worlds, args.shac_horizon, args.shac_repeats, max(1, args.overhead_pairs)
        )
        return
    if args.shac and args.overhead_pairs > 0:
        overhead_pairs(args.shac_worlds, args.shac_horizon, args.shac_repeats, args.overhead_pairs)
        return
    if args.shac:
        shac_table(args.shac_worlds, args.shac_horizon, args.shac_repeats)
        return
    globals()["REPEATS"] = args.repeats
    torch.set_num_threads(args.threads)
    cfg = load_sim_config().with_backend("newton")  # this table compares Newton paths; --shac adds the native one
    if args.device is not None:
        cfg = dc.replace(cfg, device=args.device).validate()
    if args.kappa is not None:
        cfg = cfg.with_kappa(args.kappa)
    S = cfg.substeps * args.control_steps
    print(
        f"G1, dt {cfg.sim_dt * 1e3:g} ms, {S} substeps per timed run, kappa {cfg.contact.kappa:g} kN/m, "
        f"device {cfg.device}; env-steps/s (one world, one substep)"
    )
    print(f"{'N':>4} | {'bcg fwd':>9} {'stock fwd':>9} {'ratio':>6} | {'bcg f+b':>9} {'stock f+b':>9} {'ratio':>6}")
    for n in args.worlds:
        bf = bench_bcg(cfg, n, args.control_steps, backward=False)
        sf = bench_stock(cfg, n, S, backward=False)
        bb = bench_bcg(cfg, n, args.control_steps, backward=True)
        sb = bench_stock(cfg, n, S, backward=True)
        print(f"{n:>4} | {bf:>9.0f} {sf:>9.0f} {bf / sf:>6.2f} | {bb:>9.0f} {sb:>9.0f} {bb / sb:>6.2f}", flush=True)

    k300 = cfg.with_kappa(300.0)
    res = bench_bcg_overhead(k300, args.bcg_worlds, args.bcg_steps)
    off, (on, st) = res[False][0], res[True]
    b = k300.bcg
    print(
        f"\nBCG overhead, kappa 300, N={args.bcg_worlds}, {args.bcg_steps} control steps fwd+bwd, worlds dropped "
        f"1-8 cm; B={b.branches} H={b.horizon} pool={b.pool_size}"
    )
    print(f"  off {off:.0f} env-steps/s, on {on:.0f} env-steps/s -> {off / on:.2f}x time")
    print(
        f"  triggers {st.triggers}, bundles {st.bundles_completed}, overflow {st.overflow}, busy {st.busy}, "
        f"pool use mean {st.pool_use_mean:.1f} / max {st.pool_slots_used_max} slots, "
        f"branch spread {st.branch_spread_pos * 1e3:.2f} mm / {st.branch_spread_vel:.3f} m/s"
    )
    shac_table(args.shac_worlds, args.shac_horizon, args.shac_repeats)


# ------------------------------------------------------------------------------------ SHAC-shaped iteration

SHAC_MOTION = "run"  # built-in clip the rollouts track
# The proposed on-ranges of task.randomize's per-world physics (docs/training.md): what --dr-pairs times
DR_ON = {
    "friction_scale": (0.5, 1.5),
    "kp_scale": (0.85, 1.15),
    "kd_scale": (0.85, 1.15),
    "pelvis_mass_scale": (0.85, 1.15),
    "torso_mass_scale": (0.85, 1.15),
    "torso_com_offset": (0.025, 0.05, 0.05),
}


def draw_dr(n: int, gen: torch.Generator):
    """WorldParams of n worlds uniform in DR_ON (the draw bcg_train.task.Task.draw_world_params makes)."""
    from bcg_sim.diffsim import WorldParams

    return WorldParams.draw(n, gen, **DR_ON)


def shac_iteration_cell(
    backend: str, bcg: bool, n: int, horizon: int, threads: int, repeats: int, config: str = "sim", dr: bool = False
) -> dict:
    """Seconds of one SHAC-shaped iteration: reset N worlds to random frames of the clip, roll out `horizon`
    control steps of an MLP policy (obs: joint pos/vel, root orientation and angular velocity), a tracking cost
    on joint positions and body heights, backward through every step (and BCG bundles), one Adam step.
    Runs in its own process (main --shac-cell) so that its peak RSS is its own. dr: every reset draws new per-world
    physics (DR_ON), as the task does at every episode start."""
    import resource

    from bcg_sim import motion as motion_lib

    cfg = load_sim_config(config).with_kappa(300.0)
    cfg = cfg.with_backend(backend)
    # pool sized for the batch (B x N / 2 branch worlds) so that touchdowns are bundled, not counted as overflow
    cfg = dc.replace(
        cfg,
        bcg=dc.replace(cfg.bcg, enabled=bcg, pool_size=cfg.bcg.branches * n // 2),
        actuation=dc.replace(cfg.actuation, gains="policy"),
        solver=dc.replace(cfg.solver, threads=threads),
    ).validate()
    clip = motion_lib.load(SHAC_MOTION)
    env = G1DiffEnv(cfg, n)
    ref_q = torch.as_tensor(clip.joint_pos, dtype=torch.float32)
    ref_z = torch.as_tensor(clip.root_pos_w[:, 2], dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    dr_gen = torch.Generator().manual_seed(1)  # its own stream: the same start frames with and without
    torch.manual_seed(0)  # the same policy in every cell: the same touchdowns and bundles
    policy = torch.nn.Sequential(
        torch.nn.Linear(29 * 2 + 7, 256),
        torch.nn.ELU(),
        torch.nn.Linear(256, 128),
        torch.nn.ELU(),
        torch.nn.Linear(128, 29),
    )
    opt = torch.optim.Adam(policy.parameters(), lr=1e-4)
    last_frame = clip.num_frames - 1 - int(horizon * cfg.control_dt * clip.fps) - 1

    def iteration(h: int):
        env.new_rollout()
        frames = torch.randint(0, last_frame, (n,), generator=gen)
        env.reset(motion=clip, frames=frames)
        if dr:
            env.set_world_params(None, draw_dr(n, dr_gen))
        s = env.state
        loss = 0.0
        for t in range(h):
            obs = torch.cat([s.joint_pos, s.joint_vel, s.root_quat_w, s.root_ang_vel_w], -1)
            out = env.step(policy(obs))
            s = out.state
            f = torch.clamp(frames + round((t + 1) * cfg.control_dt * clip.fps), max=clip.num_frames - 1)
            loss = loss + ((s.joint_pos - ref_q[f]) ** 2).sum(-1).mean() + ((s.root_pos_w[:, 2] - ref_z[f]) ** 2).mean()
        opt.zero_grad()
        (loss / h).backward()
        opt.step()

    iteration(1)  # warm-up: kernels, buffers, the native library
    times, cpu_times = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        iteration(horizon)
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)  # this process's CPU: blind to other jobs and hypervisor steal
    st = env.bcg_stats()
    return dict(
        backend=backend,
        bcg=bcg,
        worlds=n,
        horizon=horizon,
        threads=threads,
        seconds=min(times),
        cpu_seconds=min(cpu_times),
        samples_per_s=n * horizon / min(times),
        peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        bundles=st.bundles_completed,
        overflow=st.overflow,
        substeps=cfg.substeps,
        sim_dt=cfg.sim_dt,
        config=config,
        dr=dr,
        branches=cfg.bcg.branches,
        bcg_horizon=cfg.bcg.horizon,
        bcg_start=cfg.bcg.start,
    )


def run_cells(cells: list[tuple], n: int, horizon: int, repeats: int) -> list[dict]:
    """Run each (backend, bcg, threads, worlds[, config]) cell in a subprocess; cells of one inner list run at
    once."""
    import json
    import subprocess
    import sys

    results = []
    for group in cells:
        procs = []
        for backend, bcg, threads, worlds, *rest in group:  # rest: [config name[, per-world physics on]]
            cmd = [
                sys.executable,
                __file__,
                "--shac-cell",
                backend,
                str(int(bcg)),
                str(worlds or n),
                str(horizon),
                str(threads),
                str(repeats),
                rest[0] if rest else "sim",
                str(int(len(rest) > 1 and rest[1])),
            ]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
        outs = []
        for p in procs:
            out, _ = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"sim_throughput: cell {cmd[2:]} failed (exit {p.returncode})")
            outs.append(json.loads(out.strip().splitlines()[-1]))
        results.append(outs)
    return results


def _median_range(ratios: list[float]) -> str:
    """Median and range of on/off ratios, e.g. "1.23x (1.10-1.40x)"."""
    x = np.array(ratios)
    return f"{np.median(x):.2f}x ({x.min():.2f}-{x.max():.2f}x)"


def overhead_pairs(n: int, horizon: int, repeats: int, pairs: int) -> None:
    """Native BCG overhead (time on / off) from `pairs` alternating off/on cells, one process and two."""
    b = load_sim_config().bcg
    print(
        f"\nnative BCG overhead, N={n} x {horizon}, kappa 300, B {b.branches} x H {b.horizon}, start {b.start}, "
        f"{pairs} alternating off/on pairs per layout",
        flush=True,
    )
    for procs in (1, 2):
        worlds = n // procs if procs == 2 else None
        ratios, cpu_ratios = [], []
        for k in range(pairs):
            res = run_cells([[("native", bcg, 1, worlds)] * procs for bcg in (False, True)], n, horizon, repeats)
            off, on = (max(g["seconds"] for g in group) for group in res)
            cpu_off, cpu_on = (max(g["cpu_seconds"] for g in group) for group in res)
            ratios.append(on / off)
            cpu_ratios.append(cpu_on / cpu_off)
            halves = ""
            if procs > 1:  # the slower half sets the pace: show how the halves' work and bundles differ
                halves = "; halves on " + " / ".join(f"{g['seconds']:.2f} s ({g['bundles']} bundles)" for g in res[1])
            print(
                f"  {procs} process{'es' if procs > 1 else ''}, pair {k + 1}: off {off:.2f} s, on {on:.2f} s, "
                f"{on / off:.2f}x (CPU {cpu_off:.2f} / {cpu_on:.2f} s, {cpu_on / cpu_off:.2f}x){halves}",
                flush=True,
            )
        r = np.array(ratios)
        print(
            f"{procs} process{'es' if procs > 1 else ''}: overhead median {np.median(r):.2f}x (range "
            f"{r.min():.2f}-{r.max():.2f}x over {pairs} pairs); CPU time median {_median_range(cpu_ratios)}",
            flush=True,
        )


def dr_pairs(n: int, horizon: int, repeats: int, pairs: int) -> None:
    """Cost of per-world physics randomization: SHAC cells (native, BCG on as the main job, one process, one
    thread) with it off and on (DR_ON, redrawn at every reset), `pairs` interleaved pairs; medians and ratio."""
    print(
        f"\nper-world physics randomization, SHAC-shaped iteration, native, BCG on, N={n} x {horizon}, kappa 300, "
        f"one process; {pairs} interleaved off/on pairs; on: {DR_ON}",
        flush=True,
    )
    sps: dict[bool, list] = {False: [], True: []}
    ratios, cpu_ratios = [], []
    for k in range(pairs):
        res = [run_cells([[("native", True, 1, None, "sim", dr)]], n, horizon, repeats)[0][0] for dr in (False, True)]
        for r in res:
            sps[r["dr"]].append(r["samples_per_s"])
        ratios.append(res[1]["seconds"] / res[0]["seconds"])
        cpu_ratios.append(res[1]["cpu_seconds"] / res[0]["cpu_seconds"])
        print(
            f"  pair {k + 1}: off {res[0]['samples_per_s']:.0f} samples/s ({res[0]['seconds']:.2f} s, CPU "
            f"{res[0]['cpu_seconds']:.2f} s, {res[0]['bundles']} bundles), "
            f"on {res[1]['samples_per_s']:.0f} samples/s "
            f"({res[1]['seconds']:.2f} s, CPU {res[1]['cpu_seconds']:.2f} s, {res[1]['bundles']} bundles): time "
            f"{ratios[-1]:.2f}x, CPU {cpu_ratios[-1]:.2f}x",
            flush=True,
        )
    print(
        f"randomization off {np.median(sps[False]):.0f} samples/s, "
        f"on {np.median(sps[True]):.0f} samples/s (medians); "
        f"time on/off median {_median_range(ratios)}, CPU time median {_median_range(cpu_ratios)}",
        flush=True,
    )


def compare_configs(config: str, n: int, horizon: int, repeats: int, pairs: int) -> None:
    """Native SHAC cells (one thread per process), BCG off and on, of config/sim.yaml and of `config`, in one
    process (N worlds) and in two at once (N/2 each, both cores; the slower half sets the pace), interleaved
    `pairs` times (this machine's timings wander: interleaving shares that out); medians and their ratio."""
    print(
        f"\nSHAC-shaped iteration, native, N={n} x {horizon}, kappa 300, policy gains, one thread per process: "
        f"config/sim.yaml vs {config}, {pairs} interleaved round(s)",
        flush=True,
    )
    for procs in (1, 2):
        layout = "one process" if procs == 1 else f"{procs} processes of {n // procs} worlds"
        sps: dict[tuple, list] = {}
        for k in range(pairs):
            for bcg in (False, True):
                for c in ("sim", config):
                    group = run_cells([[("native", bcg, 1, n // procs, c)] * procs], n, horizon, repeats)[0]
                    seconds = max(g["seconds"] for g in group)
                    cpu = max(g["cpu_seconds"] for g in group)
                    sps.setdefault((c, bcg), []).append(n * horizon / seconds)
                    r = group[0]
                    print(
                        f"  {layout}, round {k + 1}: {c} (dt {r['sim_dt'] * 1e3:g} ms, {r['substeps']} substeps) "
                        f"BCG {'on ' if bcg else 'off'}: {seconds:.2f} s/iter, {n * horizon / seconds:.0f} "
                        f"samples/s, CPU {cpu:.2f} s, {sum(g['bundles'] for g in group)} bundles",
                        flush=True,
                    )
        for bcg in (False, True):
            a, b = np.median(sps[("sim", bcg)]), np.median(sps[(config, bcg)])
            print(
                f"{layout}, BCG {'on ' if bcg else 'off'}: config/sim.yaml {a:.0f} samples/s, {config} "
                f"{b:.0f} samples/s: {b / a:.2f}x",
                flush=True,
            )


def shac_table(n: int, horizon: int, repeats: int) -> None:
    print(
        f"\nSHAC-shaped iteration: N={n} worlds x {horizon} control steps, kappa 300, policy gains, MLP policy, "
        f"tracking cost on '{SHAC_MOTION}', fwd + backward + Adam; each cell its own process",
        flush=True,
    )
    b = load_sim_config().bcg
    print(
        f"BCG: B {b.branches} x H {b.horizon}, branches start at the {b.start} (native; newton: the step)", flush=True
    )
    cells = [
        [("newton", False, 1, None)],
        [("newton", True, 1, None)],
        [("native", False, 1, None)],
        [("native", True, 1, None)],
        [("native", True, 2, None)],
        [("native", False, 1, n // 2), ("native", False, 1, n // 2)],
        [("native", True, 1, n // 2), ("native", True, 1, n // 2)],
    ]
    res = run_cells(cells, n, horizon, repeats)
    base = {r[0]["bcg"]: r[0]["samples_per_s"] for r in res[:2]}
    print(
        f"{'backend':>8} {'BCG':>4} {'dt ms':>6} {'threads':>7} {'procs':>5} {'s/iter':>7} {'samples/s':>10} "
        f"{'x newton':>8} {'peak RSS GB':>11} {'bundles':>7}"
    )
    for group in res:
        r = group[0]
        sps = sum(g["samples_per_s"] for g in group) if len(group) > 1 else r["samples_per_s"]
        secs = max(g["seconds"] for g in group)
        print(
            f"{r['backend']:>8} {'on' if r['bcg'] else 'off':>4} {r['sim_dt'] * 1e3:>6g} {r['threads']:>7} "
            f"{len(group):>5} {secs:>7.2f} {sps:>10.0f} {sps / base[r['bcg']]:>8.1f} "
            f"{max(g['peak_rss_gb'] for g in group):>11.2f} {sum(g['bundles'] for g in group):>7}",
            flush=True,
        )
    nat = {(g[0]["bcg"], g[0]["threads"], len(g)): sum(x["samples_per_s"] for x in g) for g in res[2:]}
    print(
        f"native BCG overhead (time on / off): {nat[(False, 1, 1)] / nat[(True, 1, 1)]:.2f}x one process, "
        f"{nat[(False, 1, 2)] / nat[(True, 1, 2)]:.2f}x two; "
        f"1 -> 2 threads: {nat[(True, 2, 1)] / nat[(True, 1, 1)]:.2f}x; "
        f"1 -> 2 processes (N/2 each, at once): {nat[(False, 1, 2)] / nat[(False, 1, 1)]:.2f}x BCG off, "
        f"{nat[(True, 1, 2)] / nat[(True, 1, 1)]:.2f}x on"
    )
    # Both cores (two processes) against the newton backend in one process: Warp's CPU kernels are serial, so
    # one process is all of this machine the newton path uses.
    print(
        f"both cores vs newton: BCG off {nat[(False, 1, 2)] / base[False]:.1f}x, "
        f"on {nat[(True, 1, 2)] / base[True]:.1f}x"
    )


if __name__ == "__main__":
    main()
