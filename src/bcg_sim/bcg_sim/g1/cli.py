"""`bcg-model`: export the G1 description as MJCF/URDF, or print a summary of it.

  bcg-model export --variant 29dof --format mjcf -o g1.xml [--no-floor]
  bcg-model info [--variant 23dof]
"""

from __future__ import annotations

import argparse
import sys

from bcg_sim.g1 import description as d
from bcg_sim.g1.joints import MOTORS, VARIANTS, joints
from bcg_sim.g1.mjcf import write_mjcf
from bcg_sim.g1.urdf import write_urdf

FORMATS = ("mjcf", "urdf")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bcg-model", description="The project's G1 model: export and inspect.")
    sub = p.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write the model as MJCF (MuJoCo/Newton) or URDF (rviz)")
    ex.add_argument("--variant", choices=sorted(VARIANTS), default="29dof")
    ex.add_argument("--format", choices=FORMATS, default="mjcf")
    ex.add_argument("-o", "--output", required=True, help="output file")
    ex.add_argument("--no-floor", action="store_true", help="MJCF only: omit the floor plane and light")
    info = sub.add_parser("info", help="print bodies, joints, limits and total mass")
    info.add_argument("--variant", choices=sorted(VARIANTS), default="29dof")
    return p


def _export(args: argparse.Namespace) -> int:
    if args.format == "urdf" and args.no_floor:
        raise SystemExit("bcg-model: error: --no-floor applies to --format mjcf only")
    if args.format == "mjcf":
        path = write_mjcf(args.output, args.variant, floor=not args.no_floor)
    else:
        path = write_urdf(args.output, args.variant)
    print(f"wrote {args.format} ({args.variant}) to {path}")
    return 0


def _info(args: argparse.Namespace) -> int:
    v = args.variant
    js = joints(v)
    print(f"G1 {v}: {len(d.BODY_NAMES)} bodies, {len(js)} actuated joints, total mass {d.total_mass(v):.3f} kg, "
          f"standing pelvis height {d.standing_height(v):.4f} m")
    print("\nbodies (depth-first):")
    for b in d.BODIES:
        j = d.body_joint(b, v)
        how = "free" if b.parent is None else (j.mjcf_name if j is not None else "welded")
        print(f"  {b.name:28s} {b.inertial.mass:7.4f} kg  parent={b.parent or '-':26s} {how}")
    print("\njoints (motor order): range [rad], effort [N m], velocity [rad/s], armature [kg m^2], kp, kd, default")
    for j in js:
        m = MOTORS[j.motor]
        print(f"  {j.mjcf_name:28s} [{j.lower:+.4f}, {j.upper:+.4f}]  {m.effort_limit:5.1f}  {m.velocity_limit:4.1f}"
              f"  {m.armature:.6f}  {m.kp:7.2f}  {m.kd:5.2f}  {j.default:+.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _export(args) if args.command == "export" else _info(args)
    except OSError as e:
        print(f"bcg-model: error: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
