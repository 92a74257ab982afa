"""`load` / `save`: motion files and the built-in clips (generated once, cached as NPZ)."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np

from bcg_sim import quat
from bcg_sim.config import config_dir
from bcg_sim.motion import _model, formats, generators, ik, kinematics, ops
from bcg_sim.motion.config import motions_config
from bcg_sim.motion.motion import Motion

BUILTIN = generators.CLIPS


class MotionRateWarning(UserWarning):
    """A clip's rate is assumed, or its speeds look implausible for the rate it is read at."""


def load(
    name_or_path: str | os.PathLike, fps: float | None = None, clip: str | None = None, input_fps: float | None = None
) -> Motion:
    """A completed Motion: a built-in clip name ("run", "jump", "fight", "dance") or a motion file
    (.csv LAFAN1-G1, .npz mjlab/BeyondMimic, .pkl PHC/ASAP; `clip` picks one clip of a multi-clip PKL).

    input_fps: the rate of a CSV file (default: a rate in its name, `*_60hz.csv`, else 30 fps with a
    MotionRateWarning saying so). A clip that looks too fast for its rate warns (`speed_warning`).
    With `fps`, the clip is then resampled to that rate. Bad files raise `MotionFormatError`."""
    key = str(name_or_path)
    if key in BUILTIN and not Path(key).exists():
        if input_fps is not None:
            raise ValueError(f"{key}: an input rate applies to CSV files, not to built-in clips")
        motion = builtin(key)
    elif not Path(key).suffix and not Path(key).exists():
        raise formats.MotionFormatError(f"{key}: neither a built-in clip ({', '.join(BUILTIN)}) nor a motion file")
    else:
        motion = kinematics.complete(formats.read(name_or_path, clip, input_fps))
        if formats.format_of(key) == ".csv":
            _, origin = formats.csv_rate(key, input_fps)
            if input_fps is None and formats.rate_in_name(key) is None:
                warnings.warn(f"{key}: read at {origin}", MotionRateWarning, stacklevel=2)
        problem = speed_warning(motion)
        if problem:
            warnings.warn(f"{key}: {problem}", MotionRateWarning, stacklevel=2)
    if fps is not None and not np.isclose(fps, motion.fps):
        motion = ops.resample(motion, fps)
    return motion


def speed_warning(motion: Motion) -> str | None:
    """Why the completed clip looks too fast for its rate (config validation thresholds), or None."""
    from bcg_sim.g1.joints import JOINTS_29, MOTORS

    cfg = motions_config().validation
    limit = np.array([MOTORS[j.motor].velocity_limit for j in JOINTS_29])  # [29] rad/s
    ratio = np.quantile(np.abs(motion.joint_vel), cfg.speed_quantile, axis=0) / limit  # [29]
    root = float(np.quantile(np.linalg.norm(motion.root_lin_vel_w[:, :2], axis=1), cfg.speed_quantile))
    q = f"{cfg.speed_quantile:.0%} quantile"
    if ratio.max() > cfg.max_joint_speed_ratio:
        j = int(ratio.argmax())
        return (
            f"at {motion.fps:g} fps {JOINTS_29[j].name} moves at {ratio[j]:.2f} x its motor's velocity limit "
            f"({q}): is the clip recorded at a lower rate? (pass --input-fps)"
        )
    if root > cfg.max_root_speed:
        return (
            f"at {motion.fps:g} fps the pelvis moves at {root:.1f} m/s ({q}, more than {cfg.max_root_speed:g}): "
            "is the clip recorded at a lower rate? (pass --input-fps)"
        )
    return None


def save(motion: Motion, path: str | os.PathLike) -> None:
    """Write `motion` in the format of the extension (.csv, .npz, .pkl); completes it first if needed."""
    if not motion.completed:
        motion = kinematics.complete(motion.primary())
    formats.write(motion, path)


def builtin(name: str) -> Motion:
    """Built-in clip `name`, from the cache when its key (config + code + model) matches, else generated."""
    path = cache_path(name)
    if path.is_file():
        try:
            motion = kinematics.complete(formats.read_npz(path))
            motion.name, motion.source = name, f"built-in {name} ({path})"
            return motion
        except formats.MotionFormatError:
            pass  # a damaged cache entry is regenerated below (the cache holds nothing else)
    motion = generators.generate(name, motions_config().generation)
    _write_atomic(motion, path)
    return motion


def cache_dir() -> Path:
    """$BCG_CACHE_DIR/motions if set, else <repo>/<cache_subdir> (config), else ~/.cache/bcg/motions."""
    env = os.environ.get("BCG_CACHE_DIR")
    if env:
        return Path(env) / "motions"
    repo = config_dir().resolve().parent
    if (repo / "src" / "bcg_sim").is_dir():
        return repo / motions_config().cache_subdir
    return Path.home() / ".cache" / "bcg" / "motions"


def cache_path(name: str) -> Path:
    return cache_dir() / f"{name}-{cache_key(name)}.npz"


def cache_key(name: str) -> str:
    """16 hex digits of a hash of everything the clip depends on: its generator config, the generator/IK/
    kinematics code, the contact rule and the G1 model's kinematic tree."""
    cfg = motions_config()
    h = hashlib.sha256()
    h.update(
        json.dumps(
            [name, generators.GENERATOR_VERSION, dataclasses.asdict(cfg.generation), dataclasses.asdict(cfg.contact)],
            sort_keys=True,
            default=str,
        ).encode()
    )
    for module in (generators, ik, kinematics, quat, _model):
        h.update(inspect.getsource(module).encode())
    m = _model.model()
    for arr in (m.body_pos, m.body_quat, m.jnt_axis, m.jnt_range, m.geom_pos, m.geom_size):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:16]


def _write_atomic(motion: Motion, path: Path) -> None:
    """Write then rename, so concurrent readers (parallel tests, several processes) never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")  # np.savez keeps a .npz suffix
    os.close(fd)
    try:
        formats.write_npz(motion, Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
