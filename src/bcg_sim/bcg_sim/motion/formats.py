"""Motion files: LAFAN1-G1 CSV, mjlab/BeyondMimic NPZ, PHC/ASAP joblib PKL. The format follows the extension.

Every reader checks its input and raises ONE `MotionFormatError` naming the file and the problem; nothing is
repaired silently (quaternions are not re-normalised, joints are not clamped).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bcg_sim.g1 import JOINTS_29, joint_limits
from bcg_sim.motion.config import ValidationConfig, motions_config
from bcg_sim.motion.motion import Motion
from bcg_sim.quat import wxyz_to_xyzw, xyzw_to_wxyz

NUM_JOINTS = len(JOINTS_29)
CSV_FPS = 30.0  # LAFAN1-G1 files carry no rate; Unitree's retargeting is 30 fps
# A rate in a file name: "walk_60hz.csv", "dance 50fps.csv", "clip-120Hz.csv" (rl_sar, g1-moves name files so).
NAME_RATE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)[ _-]?(?:hz|fps)(?![a-z])", re.IGNORECASE)
CSV_COLUMNS = 3 + 4 + NUM_JOINTS  # root xyz, root quaternion x y z w, joints
# PHC/ASAP "23 DoF": the 29 motor-order joints minus all six wrist joints (not Unitree's 23-DoF set).
PHC_JOINTS = tuple(i for i, j in enumerate(JOINTS_29) if "wrist" not in j.name)
# bcg's extension key in PKL files: the full 29 joints, so bcg -> PKL -> bcg keeps the wrists. Other readers
# ignore it; files without it get zero wrists, as PHC/ASAP robots have none.
PKL_FULL_DOF_KEY = "dof_29"
NPZ_KEYS = ("fps", "joint_pos", "body_pos_w", "body_quat_w")  # read; the writer adds velocities
PKL_KEYS = ("root_trans_offset", "root_rot", "dof", "fps")


class MotionFormatError(ValueError):
    """A motion file (or array) is malformed; the message names the file and the problem."""


def _fail(path: str | os.PathLike, problem: str) -> MotionFormatError:
    return MotionFormatError(f"{path}: {problem}")


# ----------------------------------------------------------------------------------------------- checks
def validate(motion: Motion, where: str | os.PathLike, cfg: ValidationConfig | None = None) -> Motion:
    """Check shapes, finiteness, unit quaternions and joint limits of the primary fields; raise on the first
    problem (MotionFormatError naming `where`). Returns `motion` unchanged."""
    cfg = motions_config().validation if cfg is None else cfg
    t = motion.root_pos_w.shape[0]
    if t == 0:
        raise _fail(where, "no frames")
    expected = {"root_pos_w": (t, 3), "root_quat_w": (t, 4), "joint_pos": (t, NUM_JOINTS)}
    for name, shape in expected.items():
        arr = getattr(motion, name)
        if arr.shape != shape:
            raise _fail(where, f"{name} has shape {arr.shape}, expected {shape}")
        bad = ~np.isfinite(arr)
        if bad.any():
            frame = int(np.argwhere(bad)[0][0])
            raise _fail(where, f"{name} has NaN/inf values (first at frame {frame})")
    if not (np.isfinite(motion.fps) and motion.fps > 0):
        raise _fail(where, f"fps must be a positive number, got {motion.fps}")
    _check_quats(motion.root_quat_w, where, cfg.quat_norm_tolerance)
    _check_limits(motion.joint_pos, where, cfg.joint_limit_tolerance)
    return motion


def _check_quats(q: np.ndarray, where: str | os.PathLike, tol: float) -> None:
    err = np.abs(np.linalg.norm(q, axis=-1) - 1.0)
    if (err > tol).any():
        frame = int(np.argmax(err > tol))
        raise _fail(
            where, f"root quaternion is not unit length at frame {frame} (| |q| - 1 | = {err[frame]:.3g} > {tol:g})"
        )


def _check_limits(q: np.ndarray, where: str | os.PathLike, tol: float) -> None:
    lo, hi = joint_limits()
    excess = np.maximum(lo - q, q - hi)  # [T, 29] > 0 outside the range
    if (excess > tol).any():
        frame, j = (int(v) for v in np.argwhere(excess > tol)[0])
        raise _fail(
            where,
            f"joint {JOINTS_29[j].name} = {q[frame, j]:.4f} rad at frame {frame} is outside "
            f"[{lo[j]:.4f}, {hi[j]:.4f}] by more than {tol:g} rad",
        )


# ----------------------------------------------------------------------------------------------- CSV
def rate_in_name(path: str | os.PathLike) -> float | None:
    """The frame rate a file name states ("_60hz", "60fps"), or None."""
    found = NAME_RATE.findall(Path(path).stem)
    if len(set(found)) > 1:
        raise _fail(path, f"file name states several rates {sorted(set(found))}; pass the rate explicitly")
    return float(found[0]) if found else None


def csv_rate(path: str | os.PathLike, fps: float | None = None) -> tuple[float, str]:
    """(rate, where it came from) of a CSV: `fps` if given, else a rate in the file name, else CSV_FPS."""
    named = rate_in_name(path)
    if fps is not None:
        if not (np.isfinite(fps) and fps > 0):
            raise _fail(path, f"input rate must be a positive number, got {fps}")
        if named is not None and not np.isclose(named, fps):
            raise _fail(path, f"the file name says {named:g} fps but an input rate of {fps:g} fps was given")
        return float(fps), "given input rate"
    if named is not None:
        return named, "rate in the file name"
    return CSV_FPS, f"CSV default {CSV_FPS:g} fps (the file states no rate; pass --input-fps / fps=)"


def read_csv(path: str | os.PathLike, fps: float | None = None) -> Motion:
    """LAFAN1-G1 CSV: no header, 36 columns (root xyz m, root quaternion x y z w, 29 joints rad).

    The file holds no rate: `fps` if given, else a rate named in the file name (`*_60hz.csv`, `*60fps*`),
    else 30 fps (LAFAN1-G1). A name rate that contradicts `fps` is an error."""
    path = Path(path)
    rate, _ = csv_rate(path, fps)
    try:
        text = path.read_text()
    except OSError as exc:
        raise _fail(path, f"cannot read: {exc.strerror or exc}") from exc
    rows = [r for r in text.splitlines() if r.strip()]
    if not rows:
        raise _fail(path, "empty file (no frames)")
    widths = sorted({len(r.split(",")) for r in rows})
    if widths != [CSV_COLUMNS]:
        raise _fail(path, f"expected {CSV_COLUMNS} comma-separated columns per row, found {widths}")
    try:
        data = np.array([[float(v) for v in r.split(",")] for r in rows])
    except ValueError as exc:
        raise _fail(path, f"non-numeric value ({exc})") from exc
    motion = Motion(
        name=path.stem,
        fps=rate,
        root_pos_w=data[:, 0:3],
        root_quat_w=xyzw_to_wxyz(data[:, 3:7]),
        joint_pos=data[:, 7:],
        source=str(path),
    )
    return validate(motion, path)


def write_csv(motion: Motion, path: str | os.PathLike) -> None:
    """LAFAN1-G1 CSV. The file stores no rate: readers take it from the name (`*_60hz.csv`) or assume 30 fps,
    so a name that states another rate than the motion's is refused."""
    named = rate_in_name(path)
    if named is not None and not np.isclose(named, motion.fps):
        raise _fail(
            path,
            f"the file name says {named:g} fps but the motion is {motion.fps:g} fps "
            f"(resample it, or name the file *_{motion.fps:g}hz.csv)",
        )
    data = np.concatenate([motion.root_pos_w, wxyz_to_xyzw(motion.root_quat_w), motion.joint_pos], 1)
    # 17 significant digits: float64 round-trips exactly.
    np.savetxt(path, data, delimiter=",", fmt="%.17g")


# ----------------------------------------------------------------------------------------------- NPZ
def read_npz(path: str | os.PathLike) -> Motion:
    """mjlab/BeyondMimic NPZ: fps (1,), joint_pos [T, 29], body_pos_w / body_quat_w [T, B, .] with the root
    (pelvis) as body 0, quaternions w x y z. Only the root pose, joints and fps are read; the derived fields
    are recomputed by `complete` on the project model."""
    path = Path(path)
    data = _open(path, lambda: dict(np.load(path, allow_pickle=False)))
    missing = [k for k in NPZ_KEYS if k not in data]
    if missing:
        raise _fail(path, f"missing NPZ key(s) {missing}; found {sorted(data)}")
    fps = np.asarray(data["fps"], dtype=float).reshape(-1)
    if fps.size != 1:
        raise _fail(path, f"fps must hold one value, got shape {np.shape(data['fps'])}")
    bp, bq = np.asarray(data["body_pos_w"], float), np.asarray(data["body_quat_w"], float)
    if bp.ndim != 3 or bq.ndim != 3 or bp.shape[-1] != 3 or bq.shape[-1] != 4:
        raise _fail(path, f"body_pos_w / body_quat_w must be [T, B, 3] / [T, B, 4], got {bp.shape} / {bq.shape}")
    motion = Motion(
        name=path.stem,
        fps=float(fps[0]),
        root_pos_w=bp[:, 0],
        root_quat_w=bq[:, 0],
        joint_pos=np.asarray(data["joint_pos"], float),
        source=str(path),
    )
    return validate(motion, path)


def write_npz(motion: Motion, path: str | os.PathLike) -> None:
    """mjlab/BeyondMimic NPZ (needs a completed motion); adds `body_names` as an extra key."""
    _require_completed(motion)
    np.savez(
        path,
        fps=np.array([motion.fps]),
        joint_pos=motion.joint_pos,
        joint_vel=motion.joint_vel,
        body_pos_w=motion.body_pos_w,
        body_quat_w=motion.body_quat_w,
        body_lin_vel_w=motion.body_lin_vel_w,
        body_ang_vel_w=motion.body_ang_vel_w,
        body_names=np.array(motion.body_names),
    )


# ----------------------------------------------------------------------------------------------- PKL
def read_pkl(path: str | os.PathLike, clip: str | None = None) -> Motion:
    """PHC/ASAP joblib PKL {name: {root_trans_offset [T,3], root_rot [T,4] x y z w, dof [T,23], fps}}.

    The 23 `dof` are the 29 motor-order joints without the six wrist joints; the wrists load as 0 unless
    bcg's `dof_29` key is present. A file with several clips needs `clip`.
    """
    import joblib

    path = Path(path)
    data = _open(path, lambda: joblib.load(path))
    if not isinstance(data, dict) or not data:
        raise _fail(path, "expected a non-empty {clip name: {...}} dictionary")
    if clip is None and len(data) > 1:
        raise _fail(path, f"holds {len(data)} clips; pass clip= one of {sorted(data)[:10]}")
    key = next(iter(data)) if clip is None else clip
    if key not in data:
        raise _fail(path, f"no clip {key!r}; found {sorted(data)[:10]}")
    entry = data[key]
    if not isinstance(entry, dict):
        raise _fail(path, f"clip {key!r} is a {type(entry).__name__}, expected a dictionary")
    missing = [k for k in PKL_KEYS if k not in entry]
    if missing:
        raise _fail(path, f"clip {key!r}: missing key(s) {missing}; found {sorted(entry)}")
    joints = _pkl_joints(path, entry)
    motion = Motion(
        name=str(key),
        fps=float(np.asarray(entry["fps"], dtype=float).reshape(-1)[0]),
        root_pos_w=np.asarray(entry["root_trans_offset"], float),
        root_quat_w=xyzw_to_wxyz(np.asarray(entry["root_rot"], float)),
        joint_pos=joints,
        source=str(path),
    )
    return validate(motion, path)


def _pkl_joints(path: Path, entry: dict[str, Any]) -> np.ndarray:
    """[T, 29] joints from a PKL clip: bcg's dof_29 if present, else dof [T, 23] with zero wrists."""
    if PKL_FULL_DOF_KEY in entry:
        return np.asarray(entry[PKL_FULL_DOF_KEY], float)
    dof = np.asarray(entry["dof"], float)
    if dof.ndim != 2 or dof.shape[1] != len(PHC_JOINTS):
        raise _fail(path, f"dof must be [T, {len(PHC_JOINTS)}], got {dof.shape}")
    out = np.zeros((dof.shape[0], NUM_JOINTS))
    out[:, PHC_JOINTS] = dof
    return out


def write_pkl(motion: Motion, path: str | os.PathLike) -> None:
    """PHC/ASAP joblib PKL with one clip named motion.name (plus bcg's `dof_29` and `contact_mask`)."""
    import joblib

    entry = {
        "root_trans_offset": motion.root_pos_w,
        "root_rot": wxyz_to_xyzw(motion.root_quat_w),
        "dof": motion.joint_pos[:, PHC_JOINTS],
        PKL_FULL_DOF_KEY: motion.joint_pos,
        "fps": motion.fps,
    }
    if motion.foot_contact is not None:
        entry["contact_mask"] = motion.foot_contact.astype(np.float64)
    joblib.dump({motion.name: entry}, path)


# ----------------------------------------------------------------------------------------------- common
READERS: dict[str, Callable[[Path], Motion]] = {".csv": read_csv, ".npz": read_npz, ".pkl": read_pkl}
WRITERS: dict[str, Callable[[Motion, Path], None]] = {".csv": write_csv, ".npz": write_npz, ".pkl": write_pkl}


def _open(path: Path, reader: Callable[[], Any]) -> Any:
    """Run a binary reader, turning its many failure types into one MotionFormatError."""
    if not path.is_file():
        raise _fail(path, "no such file")
    if path.stat().st_size == 0:
        raise _fail(path, "empty file")
    try:
        return reader()
    except Exception as exc:  # noqa: BLE001 - numpy/zipfile/pickle raise many types for corrupt files
        raise _fail(path, f"cannot read ({type(exc).__name__}: {exc})") from exc


def _require_completed(motion: Motion) -> None:
    if not motion.completed:
        raise ValueError(f"motion {motion.name!r} is not completed; call bcg_sim.motion.kinematics.complete")


def format_of(path: str | os.PathLike) -> str:
    ext = Path(path).suffix.lower()
    if ext not in READERS:
        raise MotionFormatError(f"{path}: unknown motion format {ext!r}; expected one of {sorted(READERS)}")
    return ext


def read(path: str | os.PathLike, clip: str | None = None, fps: float | None = None) -> Motion:
    """Read the primary fields of a motion file (format from the extension); not completed.

    fps: the input rate of a CSV (which stores none); NPZ and PKL files state their rate, and an `fps`
    that contradicts it is an error."""
    ext = format_of(path)
    if ext == ".csv":
        if not Path(path).is_file():
            raise _fail(path, "no such file")
        return read_csv(path, fps)
    if ext == ".pkl":
        motion = read_pkl(path, clip)
    else:
        if not Path(path).is_file():
            raise _fail(path, "no such file")
        motion = READERS[ext](Path(path))
    if fps is not None and not np.isclose(fps, motion.fps):
        raise _fail(path, f"the file states {motion.fps:g} fps; an input rate ({fps:g}) applies to CSV files only")
    return motion


def write(motion: Motion, path: str | os.PathLike) -> None:
    ext = format_of(path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    WRITERS[ext](motion, Path(path))
