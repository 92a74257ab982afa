"""MuJoCo's offscreen GL backend, chosen before mujoco is first imported (it reads $MUJOCO_GL at import)."""

from __future__ import annotations

import os
from pathlib import Path

# Device files whose presence means a GPU driver that can give an EGL context.
_GPU_DEVICES = ("/dev/nvidia0", "/dev/dri/renderD128")


def default_gl_backend() -> None:
    """Like env.sh: when $MUJOCO_GL is unset and there is no display, use EGL with a GPU driver, else OSMesa.
    With a display (or an explicit choice) nothing changes."""
    if os.environ.get("MUJOCO_GL") or os.environ.get("DISPLAY"):
        return
    os.environ["MUJOCO_GL"] = "egl" if any(Path(p).exists() for p in _GPU_DEVICES) else "osmesa"
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
