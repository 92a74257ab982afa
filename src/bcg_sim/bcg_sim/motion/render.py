"""Offscreen rendering of motions on the project's G1 model: PNG strips and MP4 videos, with an optional
translucent "ghost" (a second motion, e.g. the reference under a simulated rollout) in the same scene.

The camera is a free camera that tracks the pelvis (x, y) at a fixed height, azimuth and distance; with a
ghost it tracks the midpoint of both pelvises and backs off with their distance, so the ghost stays in view.
Strip frames carry their clip time underneath.
Backend: MuJoCo's Renderer with $MUJOCO_GL (env.sh picks EGL with a GPU, OSMesa otherwise).
"""

from __future__ import annotations

import os
from pathlib import Path

import mujoco
import numpy as np

from bcg_sim.motion import _model
from bcg_sim.motion.config import RenderConfig, motions_config
from bcg_sim.motion.motion import Motion

VIDEO_SUFFIXES = (".mp4",)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


class MotionRenderer:
    """Renders frames of a motion (and a ghost); use as a context manager so the GL context is freed."""

    def __init__(self, width: int, height: int, cfg: RenderConfig | None = None) -> None:
        self.cfg = motions_config().render if cfg is None else cfg
        sky = (self.cfg.sky_top, self.cfg.sky_bottom) if self.cfg.sky_top else None
        self.model = _model.render_model(width, height, sky)
        self._robot_geoms = _robot_geom_ids(self.model)
        if self.cfg.robot_rgba:
            self.model.geom_rgba[self._robot_geoms] = self.cfg.robot_rgba
            self.model.geom_matid[self._robot_geoms] = -1
        self.renderer = mujoco.Renderer(self.model, height=height, width=width)
        self.data = mujoco.MjData(self.model)
        self.ghost_data = mujoco.MjData(self.model)
        self.option = mujoco.MjvOption()
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        self.camera.distance, self.camera.azimuth, self.camera.elevation = (
            self.cfg.distance,
            self.cfg.azimuth,
            self.cfg.elevation,
        )

    def __enter__(self) -> MotionRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Free the GL context now (OSMesa prints a traceback if it is freed during interpreter teardown)."""
        self.renderer.close()

    def frame(self, qpos: np.ndarray, ghost_qpos: np.ndarray | None = None) -> np.ndarray:
        """[H, W, 3] uint8 image of the robot at qpos [36] (and the ghost at ghost_qpos [36])."""
        self.data.qpos[:] = qpos
        mujoco.mj_forward(self.model, self.data)
        centre, apart = np.asarray(qpos[:2], float), 0.0
        if ghost_qpos is not None:  # frame both, or a ghost that drifts away leaves the picture
            centre = 0.5 * (centre + ghost_qpos[:2])
            apart = float(np.linalg.norm(qpos[:2] - ghost_qpos[:2]))
        self.camera.lookat[:] = (centre[0], centre[1], self.cfg.lookat_height)
        self.camera.distance = self.cfg.distance + self.cfg.ghost_distance_per_m * apart
        self.renderer.update_scene(self.data, self.camera, self.option)
        if ghost_qpos is not None:
            self._add_ghost(ghost_qpos)
        return self.renderer.render().copy()

    def _add_ghost(self, qpos: np.ndarray) -> None:
        """Append the robot's geoms at qpos to the scene, recoloured with the translucent ghost colour."""
        self.ghost_data.qpos[:] = qpos
        mujoco.mj_forward(self.model, self.ghost_data)
        scene = self.renderer.scene
        first = scene.ngeom
        mujoco.mjv_addGeoms(
            self.model, self.ghost_data, self.option, mujoco.MjvPerturb(), mujoco.mjtCatBit.mjCAT_DYNAMIC, scene
        )
        for i in range(first, scene.ngeom):
            g = scene.geoms[i]
            if g.objtype == mujoco.mjtObj.mjOBJ_GEOM and g.objid in self._robot_geoms:
                g.rgba[:] = self.cfg.ghost_rgba
                g.matid = -1
            else:  # e.g. a floor is not part of the ghost
                g.rgba[3] = 0.0


def _robot_geom_ids(m: mujoco.MjModel) -> set[int]:
    """Visible geoms that belong to the robot (not the world body's floor)."""
    return {g for g in range(m.ngeom) if m.geom_bodyid[g] != 0}


def qpos_at(motion: Motion, times: np.ndarray) -> np.ndarray:
    """[N, 36] qpos of the nearest frames at times (s, clamped to the clip)."""
    idx = np.clip(np.rint(np.asarray(times) * motion.fps).astype(int), 0, motion.num_frames - 1)
    return motion.qpos()[idx]


def strip_times(motion: Motion, frames: int) -> np.ndarray:
    """[frames] evenly spaced times over the clip, first and last frame included."""
    return np.linspace(0.0, motion.duration, max(1, frames))


def render_strip(
    motion: Motion,
    frames: int,
    width: int,
    height: int,
    ghost: Motion | None = None,
    cfg: RenderConfig | None = None,
    time_offset: float = 0.0,
) -> np.ndarray:
    """[H + label_height, frames * W, 3] uint8: `frames` snapshots side by side, each with its time stamp
    (clip time + time_offset, e.g. the --start of a window) in a row underneath."""
    cfg = motions_config().render if cfg is None else cfg
    times = strip_times(motion, frames)
    q, gq = qpos_at(motion, times), (qpos_at(ghost, times) if ghost is not None else None)
    with MotionRenderer(width, height, cfg) as r:
        images = [r.frame(q[i], gq[i] if gq is not None else None) for i in range(times.size)]
    if cfg.label_height > 0:
        images = [
            np.concatenate([im, _label(f"t = {t + time_offset:.2f} s", width, cfg.label_height)], axis=0)
            for im, t in zip(images, times)
        ]
    return np.concatenate(images, axis=1)


def _label(text: str, width: int, height: int) -> np.ndarray:
    """[height, width, 3] uint8: white text centred on black."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default()
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    draw.text(((width - (right - left)) / 2 - left, (height - (bottom - top)) / 2 - top), text, fill="white", font=font)
    return np.asarray(img)


def render_video(
    motion: Motion,
    path: str | os.PathLike,
    width: int,
    height: int,
    ghost: Motion | None = None,
    fps: float | None = None,
    cfg: RenderConfig | None = None,
    progress: bool = True,
) -> int:
    """Write an MP4 of the clip at `fps` (default: config mp4_fps); returns the number of frames.
    Odd sizes are rounded up to even ones (H.264 in yuv420p needs them)."""
    import imageio.v2 as imageio
    from tqdm import tqdm

    cfg = motions_config().render if cfg is None else cfg
    fps = cfg.mp4_fps if fps is None else fps
    width, height = width + width % 2, height + height % 2
    times = np.arange(int(np.floor(motion.duration * fps)) + 1) / fps
    q, gq = qpos_at(motion, times), (qpos_at(ghost, times) if ghost is not None else None)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    # macro_block_size=1: no resizing to multiples of 16 by imageio (even sizes suffice for H.264)
    with MotionRenderer(width, height, cfg) as r, imageio.get_writer(str(path), fps=fps, macro_block_size=1) as w:
        for i in tqdm(range(times.size), desc=f"render {Path(path).name}", unit="frame", disable=not progress):
            w.append_data(r.frame(q[i], gq[i] if gq is not None else None))
    return int(times.size)


def save_image(image: np.ndarray, path: str | os.PathLike) -> None:
    import imageio.v2 as imageio

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    imageio.imwrite(str(path), image)
