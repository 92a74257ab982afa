"""bcg motion library: the `Motion` type, file formats, operations, built-in G1 clips, rendering.

from bcg_sim.motion import load, save
run = load("run")                        # built-in clip (generated once, cached)
clip = load("dance1_subject2.csv", fps=50)  # LAFAN1-G1 CSV, mjlab NPZ or PHC PKL, resampled
save(clip, "dance.npz")
"""

from bcg_sim.motion._gl import default_gl_backend

default_gl_backend()  # before the first `import mujoco` below, so headless rendering works without env.sh

from bcg_sim.motion.formats import MotionFormatError, validate  # noqa: E402
from bcg_sim.motion.kinematics import complete, foot_heights, foot_speeds, forward_kinematics  # noqa: E402
from bcg_sim.motion.library import BUILTIN, builtin, cache_dir, load, save  # noqa: E402
from bcg_sim.motion.motion import Motion  # noqa: E402
from bcg_sim.motion.ops import align_ground, clip, from_23dof, ground_offset, hold_error, resample, to_23dof, window  # noqa: E402

__all__ = [
    "BUILTIN",
    "Motion",
    "MotionFormatError",
    "align_ground",
    "builtin",
    "cache_dir",
    "clip",
    "complete",
    "foot_heights",
    "foot_speeds",
    "forward_kinematics",
    "from_23dof",
    "ground_offset",
    "hold_error",
    "load",
    "resample",
    "save",
    "to_23dof",
    "validate",
    "window",
]
