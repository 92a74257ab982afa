"""`bcg-motion` smoke tests in a subprocess: info, convert, render a small PNG strip."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("bcg-motion")
    cmd = [exe] if exe else [sys.executable, "-m", "bcg_sim.motion.cli"]
    env = dict(os.environ, BCG_CACHE_DIR=str(cache))
    return subprocess.run(cmd + list(args), capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli_cache")


def test_info(cache: Path) -> None:
    r = _cli("info", "jump", cache=cache)
    assert r.returncode == 0, r.stderr
    for key in (
        "duration",
        "fps",
        "frames",
        "root speed mean/peak",
        "contact left/right",
        "flight time",
        "hold-first-pose E_track",
    ):
        assert key in r.stdout


def _odometry_cm(stdout: str) -> tuple[float, float]:
    line = next(x for x in stdout.splitlines() if x.startswith("leg odometry off pelvis"))
    mean, end = line.split()[4], line.split()[6]
    return float(mean), float(end)


def test_info_windows_the_clip_and_measures_leg_odometry_on_it(cache: Path) -> None:
    r = _cli("info", "dance", "--start", "1", "--end", "3", cache=cache)
    assert r.returncode == 0, r.stderr
    assert "duration                 2.000 s" in r.stdout
    # the built-in dance plants its soles: odometry on its frames stays on its pelvis; the jump's flights do not
    assert _odometry_cm(r.stdout)[0] < 1.0
    r = _cli("info", "jump", cache=cache)
    assert r.returncode == 0, r.stderr
    assert min(_odometry_cm(r.stdout)) > 30.0
    r = _cli("info", "jump", "--start", "20", cache=cache)
    assert r.returncode == 2 and "outside the clip" in r.stderr and "Traceback" not in r.stderr


def test_convert_and_info_on_the_result(cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "run30.pkl"
    r = _cli("convert", "run", str(out), "--fps", "30", cache=cache)
    assert r.returncode == 0, r.stderr
    r = _cli("info", str(out), cache=cache)
    assert r.returncode == 0, r.stderr
    assert "fps                      30" in r.stdout and "frames                   271" in r.stdout


def test_bad_file_is_one_clear_error(cache: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n")
    r = _cli("info", str(bad), cache=cache)
    assert r.returncode == 2 and str(bad) in r.stderr and "Traceback" not in r.stderr


LAFAN1_G1 = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "motions" / "lafan1_g1"


def test_convert_a_window_of_a_lafan1_clip(cache: Path, tmp_path: Path) -> None:
    """dance1_subject2 from 30 s to 40 s: 10 s of frames, the first one frame 30 fps of the whole clip (world
    positions kept); bad windows are one-line errors with exit status 2."""
    src = LAFAN1_G1 / "dance1_subject2.csv"
    if not src.is_file():
        pytest.skip(f"{src} not present (LAFAN1-G1 clips are research-only, not in the repository)")
    from bcg_sim.motion import load

    out = tmp_path / "dance_30_40.npz"
    r = _cli("convert", str(src), str(out), "--fps", "50", "--start", "30", "--end", "40", cache=cache)
    assert r.returncode == 0, r.stderr
    assert "501 frames at 50 fps (10.00 s)" in r.stdout
    with pytest.warns(UserWarning):
        whole = load(src, fps=50)
    w = load(out)
    assert w.duration == pytest.approx(10.0) and w.num_frames == 501
    np.testing.assert_allclose(w.qpos()[0], whole.qpos()[30 * 50], atol=1e-6)  # NPZ stores float32
    np.testing.assert_allclose(w.qpos()[-1], whole.qpos()[40 * 50], atol=1e-6)
    for start, end, words in (
        ("40", "30", "after start"),
        ("30", "200", "outside the clip"),
        ("-1", "10", "start must be >= 0"),
    ):
        r = _cli("convert", str(src), str(tmp_path / "bad.npz"), "--start", start, "--end", end, cache=cache)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip().splitlines()[-1].startswith("bcg-motion: error: window --start")
    assert not (tmp_path / "bad.npz").exists()


def _render_strip(
    clip: str, out: Path, frames: int, width: int, height: int, *extra: str, cache: Path
) -> subprocess.CompletedProcess:
    """`bcg-motion render CLIP -o OUT`: a PNG strip of `frames` frames of width x height pixels each."""
    args = ("--frames", str(frames), "--width", str(width), "--height", str(height))
    return _cli("render", clip, "-o", str(out), *args, *extra, cache=cache)


def test_render_png_strip(cache: Path, tmp_path: Path) -> None:
    import imageio.v2 as imageio

    out = tmp_path / "strip.png"
    r = _render_strip("run", out, 2, 96, 128, "--ghost", "dance", cache=cache)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr  # renderer closed before exit
    img = imageio.imread(out)
    label = _label_height()
    assert img.shape == (128 + label, 192, 3)
    assert img.std() > 10.0 and len(np.unique(img.reshape(-1, 3), axis=0)) > 100  # not blank


def _label_height() -> int:
    from bcg_sim.motion.config import motions_config

    return motions_config().render.label_height


def test_render_window_with_time_stamps(cache: Path, tmp_path: Path) -> None:
    """--start/--end render only that window; each strip frame carries its own clip time underneath."""
    import imageio.v2 as imageio

    out = tmp_path / "window.png"
    r = _render_strip("jump", out, 3, 64, 80, "--start", "1.0", "--end", "2.0", cache=cache)
    assert r.returncode == 0, r.stderr
    assert "from 1.00 s over 1.00 s" in r.stdout, r.stdout
    img = imageio.imread(out)
    label = _label_height()
    assert label > 0 and img.shape == (80 + label, 192, 3)
    stamps = [img[80:, 64 * i : 64 * (i + 1)] for i in range(3)]
    assert all(s.max() > 200 for s in stamps)  # white text on each
    assert not np.array_equal(stamps[0], stamps[1]) and not np.array_equal(stamps[1], stamps[2])  # 1.00, 1.50, 2.00
    r = _cli("render", "jump", "-o", str(tmp_path / "x.png"), "--start", "2", "--end", "1", cache=cache)
    assert r.returncode == 2 and "--start" in r.stderr and "Traceback" not in r.stderr


def test_ghost_is_in_every_strip_frame(tmp_path: Path) -> None:
    """run drifts metres away from a jump ghost: every frame must still show the ghost. Compared with the
    same scene with the ghost sunk 10 m under the floor (same camera: it frames both x-y positions)."""
    from bcg_sim.motion import load, render

    run, jump = load("run"), load("jump")
    times = render.strip_times(run, 4)
    q, gq = render.qpos_at(run, times), render.qpos_at(jump, times)
    sunk = gq.copy()
    sunk[:, 2] -= 10.0
    with render.MotionRenderer(64, 80) as r:
        for i in range(len(times)):
            changed = np.any(r.frame(q[i], gq[i]) != r.frame(q[i], sunk[i]), axis=-1).mean()
            assert changed > 0.01, f"frame {i} (t = {times[i]:.2f} s): ghost covers {changed:.1%} of the image"


def test_render_mp4_of_a_short_window(tmp_path: Path) -> None:
    import imageio.v2 as imageio

    from bcg_sim.motion import load, ops, render

    window = ops.clip(load("jump"), 1.0, 1.5)
    n = render.render_video(window, tmp_path / "jump.mp4", 64, 48, ghost=load("run"), fps=30, progress=False)
    reader = imageio.get_reader(tmp_path / "jump.mp4")
    try:
        assert n == 16 and reader.count_frames() == n and reader.get_meta_data()["size"] == (64, 48)
    finally:
        reader.close()


def test_convert_honours_the_input_rate_of_a_csv(cache: Path, tmp_path: Path) -> None:
    """A 60 fps CSV: read at 30 fps with a one-line warning, at 60 with --input-fps or a *_60hz name."""
    from bcg_sim.motion import formats as mio
    from bcg_sim.motion import load, ops

    run60 = ops.resample(load("run"), 60.0)
    mio.write_csv(run60, tmp_path / "g1moves.csv")
    r = _cli("convert", str(tmp_path / "g1moves.csv"), str(tmp_path / "a.npz"), cache=cache)
    assert r.returncode == 0 and "bcg-motion: warning:" in r.stderr and "30 fps" in r.stderr, r.stderr
    assert f"{run60.num_frames} frames at 30 fps" in r.stdout
    r = _cli("convert", str(tmp_path / "g1moves.csv"), str(tmp_path / "b.npz"), "--input-fps", "60", cache=cache)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert f"{run60.num_frames} frames at 60 fps ({run60.duration:.2f} s)" in r.stdout
    r = _cli("convert", str(tmp_path / "b.npz"), str(tmp_path / "c_60hz.csv"), cache=cache)
    assert r.returncode == 0 and "note" not in r.stderr, r.stderr  # the name carries the rate
    r = _cli("info", str(tmp_path / "c_60hz.csv"), cache=cache)
    assert r.returncode == 0 and "fps                      60" in r.stdout and "warning" not in r.stderr, r.stderr
