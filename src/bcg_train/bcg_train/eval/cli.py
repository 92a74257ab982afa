"""bcg-eval: an exported policy on its own reference clip in MuJoCo (sim-to-sim), with metrics.

    bcg-eval POLICY_DIR [--mjcf FILE] [--runs 5] [--seconds S] [--out DIR] [--kappa K]
             [--noise Q DQ GYRO] [--latency S] [--root-source SRC] [--ros] [--no-render] [--no-delta-d] [--bcg]

Writes DIR/eval.json, DIR/eval.md (table), one PNG per metric over time and DIR/strip.png (policy with the
reference as a ghost). Falls n/N (pelvis < eval.fall_height), delta_d (bcg_sim minus MuJoCo mean foot
penetration, mm), E_track (global mean per-body position error, cm, mean ± std over runs), joint error,
survival time, foot slip, MuJoCo contact checks. Defaults: config/eval.yaml (section eval). Exit 2 on bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from bcg_sim.config import ConfigError
from bcg_sim.policy.contract import ROOT_SOURCES


def _parser(cfg) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bcg-eval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("policy", help="exported policy folder (policy.yaml + network + reference.npz)")
    ap.add_argument("--mjcf", default=None, help="any G1 MJCF (default: the project's G1 model)")
    ap.add_argument("--runs", type=int, default=cfg.runs, help=f"runs, seeds base_seed+i (default {cfg.runs})")
    ap.add_argument(
        "--seconds", type=float, default=cfg.seconds, help=f"seconds a run, 0: whole clip (default {cfg.seconds})"
    )
    ap.add_argument("--out", default="eval_out", help="output folder (default eval_out)")
    ap.add_argument(
        "--kappa",
        type=float,
        default=None,
        help="bcg_sim contact stiffness for delta_d [kN/m] (default: the policy's train_kappa, else config/sim.yaml's)",
    )
    ap.add_argument(
        "--noise",
        type=float,
        nargs=3,
        metavar=("Q", "DQ", "GYRO"),
        default=None,
        help=f"encoder/IMU noise std [rad, rad/s, rad/s] (default {cfg.noise_q_std} "
        f"{cfg.noise_dq_std} {cfg.noise_gyro_std})",
    )
    ap.add_argument(
        "--latency",
        type=float,
        default=cfg.action_latency_s,
        help=f"action latency [s] (default {cfg.action_latency_s})",
    )
    ap.add_argument(
        "--root-source",
        choices=ROOT_SOURCES,
        default=cfg.root_source or None,
        help="where an offset-observing policy's pelvis position comes from: leg odometry alone, or the simulated "
        "pose source (config/eval.yaml pose_*) carried by it (default: the policy contract's)",
    )
    ap.add_argument("--ros", action="store_true", help="run the ROS stack (bcg-sim2sim) and measure its bag")
    ap.add_argument("--no-render", action="store_true", help="skip the PNG strip")
    ap.add_argument("--no-delta-d", action="store_true", help="skip the bcg_sim rollout (delta_d)")
    ap.add_argument(
        "--bcg",
        action="store_true",
        help="that bcg_sim rollout with BCG on, as in training (bundle means replace the state after touchdowns)",
    )
    ap.add_argument("--config", default="eval.yaml", help="eval config file (default config/eval.yaml)")
    return ap


def main(argv: list[str] | None = None) -> int:
    from bcg_train.eval.config import load_eval_config

    argv = list(sys.argv[1:] if argv is None else argv)
    cfg_path = argv[argv.index("--config") + 1] if "--config" in argv[:-1] else "eval.yaml"
    try:
        cfg = load_eval_config(cfg_path)
    except ConfigError as exc:
        print(f"bcg-eval: {exc}", file=sys.stderr)
        return 2
    args = _parser(cfg).parse_args(argv)
    try:
        return _run(args, cfg)
    except (ConfigError, ValueError, OSError) as exc:  # EvalError, PolicyContractError, PolicyLoadError ...
        print(f"bcg-eval: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, cfg) -> int:
    from bcg_sim.policy import load_policy
    from bcg_train.eval.evaluate import evaluate
    from bcg_train.eval.mujoco_eval import EvalError

    if not Path(args.policy).is_dir():
        raise EvalError(f"policy folder {args.policy!r} does not exist")
    cfg = dataclasses.replace(
        cfg.with_sensor_noise(args.noise) if args.noise else cfg,
        runs=args.runs,
        seconds=args.seconds,
        action_latency_s=args.latency,
        root_source=args.root_source or "",
    ).validate("arguments")
    if args.bcg and args.no_delta_d:
        raise EvalError("--bcg sets how the bcg_sim rollout runs, and --no-delta-d skips that rollout")
    if args.ros and args.root_source:
        raise EvalError(
            "--ros runs the policy node, which reads the pelvis source from the policy's contract; "
            "--root-source is for the Python path only"
        )
    if args.ros and args.mjcf:
        raise EvalError("--ros runs the bridge's own model; --mjcf is for the Python path only")
    try:
        policy = load_policy(args.policy)
    except Exception as exc:  # PolicyContractError / PolicyLoadError / YAML errors: one line
        raise EvalError(str(exc).splitlines()[0]) from exc
    result = evaluate(
        policy, cfg, Path(args.out), args.mjcf, args.kappa, args.ros, not args.no_render, not args.no_delta_d, args.bcg
    )
    print((Path(args.out) / "eval.md").read_text(), end="")
    c = result["contacts"]
    if not c["checked"]:
        print(f"contacts: not checked on the ROS path; wrote {args.out}/eval.json")
        return 0
    print(
        f"contacts: max {c['max_contacts']} simultaneous, MuJoCo warnings {c['mujoco_warnings'] or 'none'}, "
        f"missed {c['missed_contacts']}; wrote {args.out}/eval.json"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
