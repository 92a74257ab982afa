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
    for key in ("duration", "fps", "frames", "root speed mean/peak", "contact left/right", "flight time"):
        assert key in r.stdout


def test_convert_and_info_on_the_result(cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "run30.pkl"
    r = _cli("convert", "run", str(out), "--fps", "30", cache=cache)
    assert r.returncode == 0, r.stderr
    r = _cli("info", str(out), cache=cache)
    assert r.returncode == 0, r.stderr
    assert "fps                    30" in r.stdout and "frames                 121" in r.stdout


def test_bad_file_is_one_clear_error(cache: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n")
    r = _cli("info", str(bad), cache=cache)
    assert r.returncode == 2 and str(bad) in r.stderr and "Traceback" not in r.stderr


def test_render_png_strip(cache: Path, tmp_path: Path) -> None:
    import imageio.v2 as imageio

    out = tmp_path / "strip.png"
    r = _cli("render", "run", "-o", str(out), "--frames", "2", "--width", "96", "--height", "128",
             "--ghost", "dance", cache=cache)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr  # renderer closed before exit
    img = imageio.imread(out)
    assert img.shape == (128, 192, 3)
    assert img.std() > 10.0 and len(np.unique(img.reshape(-1, 3), axis=0)) > 100  # not blank


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
