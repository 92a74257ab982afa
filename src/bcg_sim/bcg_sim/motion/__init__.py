"""bcg motion library: the `Motion` type, file formats, operations, built-in G1 clips, rendering.

    from bcg_sim.motion import load, save
    run = load("run")                        # built-in clip (generated once, cached)
    clip = load("dance1_subject2.csv", fps=50)  # LAFAN1-G1 CSV, mjlab NPZ or PHC PKL, resampled
    save(clip, "dance.npz")
"""

from bcg_sim.motion.formats import MotionFormatError, validate
from bcg_sim.motion.kinematics import complete, foot_heights, foot_speeds, forward_kinematics
from bcg_sim.motion.library import BUILTIN, builtin, cache_dir, load, save
from bcg_sim.motion.motion import Motion
from bcg_sim.motion.ops import align_ground, clip, from_23dof, ground_offset, resample, to_23dof

__all__ = [
    "BUILTIN", "Motion", "MotionFormatError", "align_ground", "builtin", "cache_dir", "clip", "complete",
    "foot_heights", "foot_speeds", "forward_kinematics", "from_23dof", "ground_offset", "load", "resample",
    "save", "to_23dof", "validate",
]
