"""`bcg-motion`: inspect, convert and render G1 motion clips.

    bcg-motion list
    bcg-motion info run
    bcg-motion convert dance1_subject2.csv dance.npz --fps 50
    bcg-motion render run -o run.png [--frames 6] [--ghost jump] [--width 320 --height 400]
    bcg-motion render run -o run.mp4
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from bcg_sim.motion import formats, kinematics, library, ops, render
from bcg_sim.motion.config import motions_config
from bcg_sim.motion.motion import Motion


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (formats.MotionFormatError, FileNotFoundError, KeyError, ValueError) as exc:
        print(f"bcg-motion: error: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bcg-motion", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    clip_help = f"built-in clip ({', '.join(library.BUILTIN)}) or a .csv/.npz/.pkl file"

    s = sub.add_parser("list", help="list the built-in clips")
    s.set_defaults(func=_list)

    s = sub.add_parser("info", help="duration, rate, speeds, contacts, flight time")
    s.add_argument("clip", help=clip_help)
    s.add_argument("--fps", type=float, help="resample first")
    s.set_defaults(func=_info)

    s = sub.add_parser("convert", help="convert between formats (by extension), optionally resample")
    s.add_argument("input", help=clip_help)
    s.add_argument("output", help="output .csv/.npz/.pkl")
    s.add_argument("--fps", type=float, help="resample to this rate")
    s.add_argument("--align-ground", action="store_true", help="shift so the lowest contact sole is at z = 0")
    s.set_defaults(func=_convert)

    r = motions_config().render
    s = sub.add_parser("render", help="PNG strip of N frames, or an MP4 video (camera tracks the pelvis)")
    s.add_argument("clip", help=clip_help)
    s.add_argument("-o", "--output", required=True, help="out.png (strip) or out.mp4 (video)")
    s.add_argument("--ghost", help="second clip drawn translucent (e.g. the reference of a rollout)")
    s.add_argument("--frames", type=int, default=r.frames, help=f"frames in a PNG strip (default {r.frames})")
    s.add_argument("--width", type=int, default=r.width, help=f"pixels per frame (default {r.width})")
    s.add_argument("--height", type=int, default=r.height, help=f"pixels (default {r.height})")
    s.add_argument("--fps", type=float, default=r.mp4_fps, help=f"video frame rate (default {r.mp4_fps:g})")
    s.set_defaults(func=_render)
    return p


def _list(args: argparse.Namespace) -> int:
    for name in library.BUILTIN:
        print(name)
    return 0


def _info(args: argparse.Namespace) -> int:
    m = library.load(args.clip, fps=args.fps)
    for key, value in summary(m).items():
        print(f"{key:<22} {value}")
    return 0


def summary(m: Motion) -> dict[str, str]:
    """Human-readable facts about a completed clip (used by `info`)."""
    speed = np.linalg.norm(m.root_lin_vel_w[:, :2], axis=1)  # horizontal pelvis speed
    c = m.foot_contact
    flight = ~c.any(axis=1)
    return {
        "name": m.name,
        "source": m.source,
        "duration": f"{m.duration:.3f} s",
        "fps": f"{m.fps:g}",
        "frames": str(m.num_frames),
        "root speed mean/peak": f"{speed.mean():.2f} / {speed.max():.2f} m/s",
        "root height min/max": f"{m.root_pos_w[:, 2].min():.3f} / {m.root_pos_w[:, 2].max():.3f} m",
        "contact left/right": f"{c[:, 0].mean():.0%} / {c[:, 1].mean():.0%} of frames",
        "double support": f"{c.all(axis=1).mean():.0%} of frames",
        "flight time": f"{flight.sum() / m.fps:.2f} s ({flight.mean():.0%} of frames)",
        "lowest sole": f"{kinematics.foot_heights(m).min() * 1000:.1f} mm",
    }


def _convert(args: argparse.Namespace) -> int:
    m = library.load(args.input, fps=args.fps)
    if args.align_ground:
        m = ops.align_ground(m)
    if Path(args.output).suffix.lower() == ".csv" and not np.isclose(m.fps, formats.CSV_FPS):
        print(f"bcg-motion: note: CSV files carry no rate; {args.output} holds {m.fps:g} fps data "
              f"(readers assume {formats.CSV_FPS:g})", file=sys.stderr)
    library.save(m, args.output)
    print(f"{args.output}: {m.num_frames} frames at {m.fps:g} fps ({m.duration:.2f} s)")
    return 0


def _render(args: argparse.Namespace) -> int:
    m = library.load(args.clip)
    ghost = library.load(args.ghost) if args.ghost else None
    out = Path(args.output)
    suffix = out.suffix.lower()
    if suffix in render.VIDEO_SUFFIXES:
        n = render.render_video(m, out, args.width, args.height, ghost=ghost, fps=args.fps)
        print(f"{out}: {n} frames at {args.fps:g} fps")
    elif suffix in render.IMAGE_SUFFIXES:
        render.save_image(render.render_strip(m, args.frames, args.width, args.height, ghost=ghost), out)
        print(f"{out}: {args.frames} frames of {m.name} over {m.duration:.2f} s")
    else:
        raise ValueError(f"{out}: unknown output type {suffix!r}; use .png or .mp4")
    return 0


if __name__ == "__main__":
    sys.exit(main())
