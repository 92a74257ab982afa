"""`bcg-model`: export the G1 description as MJCF/URDF, or print a summary of it.

bcg-model export --variant 29dof -o g1.xml [--no-floor]     format from the extension (.xml MJCF, .urdf URDF)
bcg-model info [--variant 23dof]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bcg_sim.g1 import description as d
from bcg_sim.g1.joints import MOTORS, VARIANTS, joints
from bcg_sim.g1.mjcf import write_mjcf
from bcg_sim.g1.urdf import write_urdf

FORMATS = ("mjcf", "urdf")
EXTENSIONS = {".xml": "mjcf", ".mjcf": "mjcf", ".urdf": "urdf"}  # output extension -> format


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bcg-model", description="The project's G1 model: export and inspect.")
    sub = p.add_subparsers(dest="command", required=True)
    ex = sub.add_parser(
        "export",
        help="write the model as MJCF (MuJoCo/Newton) or URDF (rviz)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ex.add_argument("--variant", choices=sorted(VARIANTS), default="29dof", help="joint set")
    ex.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="model format (default: from the output's extension, .xml/.mjcf MJCF, .urdf URDF)",
    )
    ex.add_argument("-o", "--output", required=True, help="output file (.xml, .mjcf or .urdf)")
    ex.add_argument("--no-floor", action="store_true", help="MJCF only: omit the floor plane and light")
    info = sub.add_parser(
        "info",
        help="print bodies, joints, limits and total mass",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    info.add_argument("--variant", choices=sorted(VARIANTS), default="29dof", help="joint set")
    return p


class UsageError(ValueError):
    """Bad arguments: printed as one line, exit status 2."""


def export_format(output: str, fmt: str | None) -> str:
    """The format to write: --format if given (it must fit the extension), else the extension's."""
    ext = Path(output).suffix.lower()
    implied = EXTENSIONS.get(ext)
    if fmt is None:
        if implied is None:
            raise UsageError(
                f"{output}: cannot tell the format from extension {ext!r}; use {', '.join(EXTENSIONS)} or --format"
            )
        return implied
    if implied is not None and implied != fmt:
        raise UsageError(f"{output}: extension {ext} means {implied}, but --format {fmt} was given")
    return fmt


def _export(args: argparse.Namespace) -> int:
    args.format = export_format(args.output, args.format)
    if args.format == "urdf" and args.no_floor:
        raise UsageError("--no-floor applies to MJCF only")
    if args.format == "mjcf":
        path = write_mjcf(args.output, args.variant, floor=not args.no_floor)
    else:
        path = write_urdf(args.output, args.variant)
    print(f"wrote {args.format} ({args.variant}) to {path}")
    return 0


def _info(args: argparse.Namespace) -> int:
    v = args.variant
    js = joints(v)
    print(
        f"G1 {v}: {len(d.BODY_NAMES)} bodies, {len(js)} actuated joints, total mass {d.total_mass(v):.3f} kg, "
        f"standing pelvis height {d.standing_height(v):.4f} m"
    )
    print("\nbodies (depth-first):")
    for b in d.BODIES:
        j = d.body_joint(b, v)
        how = "free" if b.parent is None else (j.mjcf_name if j is not None else "welded")
        print(f"  {b.name:28s} {b.inertial.mass:7.4f} kg  parent={b.parent or '-':26s} {how}")
    print("\njoints (motor order): range [rad], effort [N m], velocity [rad/s], armature [kg m^2], kp, kd, default")
    for j in js:
        m = MOTORS[j.motor]
        print(
            f"  {j.mjcf_name:28s} [{j.lower:+.4f}, {j.upper:+.4f}]  {m.effort_limit:5.1f}  {m.velocity_limit:4.1f}"
            f"  {m.armature:.6f}  {m.kp:7.2f}  {m.kd:5.2f}  {j.default:+.3f}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _export(args) if args.command == "export" else _info(args)
    except UsageError as e:
        print(f"bcg-model: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"bcg-model: error: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
