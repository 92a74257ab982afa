"""`bcg-motion`: inspect, convert and render G1 motion clips.

    bcg-motion list
    bcg-motion info run
    bcg-motion info dance1_subject2.csv --start 30 --end 40      (a 10-s window)
    bcg-motion convert dance1_subject2.csv dance.npz --fps 50
    bcg-motion convert g1_moves_clip.csv clip.npz --input-fps 60     (or name the file clip_60hz.csv)
    bcg-motion convert dance1_subject2.csv dance_30_40.npz --fps 50 --start 30 --end 40   (a 10-s window)
    bcg-motion render run -o run.png [--frames 6] [--ghost jump] [--width 320 --height 400]
    bcg-motion render run -o run.mp4 [--start 1.0 --end 2.5]

CSV files store no rate: it is --input-fps, else a rate in the file name (*_60hz.csv, *60fps*), else 30 fps
(LAFAN1-G1), with a warning saying so. A clip that moves faster than the G1's motors at its rate warns too.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

from bcg_sim.motion import formats, kinematics, library, ops, render
from bcg_sim.motion.config import motions_config
from bcg_sim.motion.motion import Motion
from bcg_sim.policy.odometry import clip_error


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one line (`bcg-motion: warning: ...`), not Python's two-line format."""
    print(f"bcg-motion: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    warnings.showwarning = _warning_line
    try:
        return int(args.func(args) or 0)
    except (formats.MotionFormatError, FileNotFoundError, KeyError, ValueError) as exc:
        print(f"bcg-motion: error: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bcg-motion",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    sub = p.add_subparsers(dest="command", required=True)
    clip_help = f"built-in clip ({', '.join(library.BUILTIN)}) or a .csv/.npz/.pkl file"
    rate_help = "frame rate of a CSV input [Hz] (default: a rate in the file name, else 30)"

    s = sub.add_parser("list", help="list the built-in clips")
    s.set_defaults(func=_list)

    s = sub.add_parser(
        "info", help="duration, rate, speeds, contacts, flight time, hold-first-pose E_track, leg odometry's error"
    )
    s.add_argument("clip", help=clip_help)
    s.add_argument("--input-fps", type=float, default=None, help=rate_help)
    s.add_argument("--fps", type=float, help="resample first (default: keep the clip's rate)")
    s.add_argument("--start", type=float, default=0.0, help="the clip from this time [s] on (default 0)")
    s.add_argument("--end", type=float, default=None, help="the clip up to this time [s] (default: its end)")
    s.set_defaults(func=_info)

    s = sub.add_parser("convert", help="convert between formats (by extension), optionally resample")
    s.add_argument("input", help=clip_help)
    s.add_argument("output", help="output .csv/.npz/.pkl")
    s.add_argument("--input-fps", type=float, default=None, help=rate_help)
    s.add_argument("--fps", type=float, help="resample to this rate (default: keep the clip's rate)")
    s.add_argument(
        "--align-ground",
        action="store_true",
        help="shift vertically so the stance soles are at z = 0 (median over stance frames)",
    )
    s.add_argument(
        "--start",
        type=float,
        default=0.0,
        help="keep the clip from this time [s] on (default 0); world positions are kept, not re-based",
    )
    s.add_argument("--end", type=float, default=None, help="keep the clip up to this time [s] (default: its end)")
    s.set_defaults(func=_convert)

    r = motions_config().render
    s = sub.add_parser("render", help="PNG strip of N frames, or an MP4 video (camera tracks the pelvis)")
    s.add_argument("clip", help=clip_help)
    s.add_argument("-o", "--output", required=True, help="out.png (strip) or out.mp4 (video)")
    s.add_argument("--input-fps", type=float, default=None, help=rate_help)
    s.add_argument("--ghost", help="second clip drawn translucent (e.g. the reference of a rollout)")
    s.add_argument("--start", type=float, default=0.0, help="render from this clip time [s] (default 0)")
    s.add_argument("--end", type=float, default=None, help="render up to this clip time [s] (default: the end)")
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
    m = ops.window(library.load(args.clip, fps=args.fps, input_fps=args.input_fps), args.start, args.end)
    for key, value in summary(m).items():
        print(f"{key:<24} {value}")
    return 0


def summary(m: Motion) -> dict[str, str]:
    """Human-readable facts about a completed clip (used by `info`)."""
    odometry = clip_error(m.joint_pos, m.root_quat_w, m.root_pos_w)
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
        "hold-first-pose E_track": f"{ops.hold_error(m) * 100:.1f} cm (a robot frozen in the first frame)",
        "leg odometry off pelvis": f"{odometry.mean() * 100:.0f} / {odometry[-1] * 100:.0f} cm (mean / end: what "
        "--root-offset misses on a robot moving as the clip; sliding soles, flights)",
    }


def _convert(args: argparse.Namespace) -> int:
    m = ops.window(library.load(args.input, fps=args.fps, input_fps=args.input_fps), args.start, args.end)
    if args.align_ground:
        m = ops.align_ground(m)
    out_rate = formats.rate_in_name(args.output)
    if Path(args.output).suffix.lower() == ".csv" and out_rate is None and not np.isclose(m.fps, formats.CSV_FPS):
        print(
            f"bcg-motion: note: CSV files carry no rate; {args.output} holds {m.fps:g} fps data (readers "
            f"assume {formats.CSV_FPS:g} unless told; name it *_{m.fps:g}hz.csv to carry the rate)",
            file=sys.stderr,
        )
    library.save(m, args.output)
    print(f"{args.output}: {m.num_frames} frames at {m.fps:g} fps ({m.duration:.2f} s)")
    return 0


def _render(args: argparse.Namespace) -> int:
    m = _window(library.load(args.clip, input_fps=args.input_fps), args.start, args.end)
    ghost = _window(library.load(args.ghost), args.start, args.end) if args.ghost else None
    out = Path(args.output)
    suffix = out.suffix.lower()
    if suffix in render.VIDEO_SUFFIXES:
        n = render.render_video(m, out, args.width, args.height, ghost=ghost, fps=args.fps)
        print(f"{out}: {n} frames at {args.fps:g} fps")
    elif suffix in render.IMAGE_SUFFIXES:
        strip = render.render_strip(m, args.frames, args.width, args.height, ghost=ghost, time_offset=args.start)
        render.save_image(strip, out)
        print(f"{out}: {args.frames} frames of {m.name} from {args.start:.2f} s over {m.duration:.2f} s")
    else:
        raise ValueError(f"{out}: unknown output type {suffix!r}; use .png or .mp4")
    return 0


def _window(m: Motion, start: float, end: float | None) -> Motion:
    """The frames of m in [start, end] s (the whole clip by default), times restarted at 0."""
    return ops.window(m, start, end)


if __name__ == "__main__":
    sys.exit(main())
