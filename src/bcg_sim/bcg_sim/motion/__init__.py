"""bcg motion library: the `Motion` type, file formats, operations, built-in G1 clips, rendering.

    from bcg_sim.motion import load, save
    run = load("run")                        # built-in clip (generated once, cached)
    clip = load("dance1_subject2.csv", fps=50)  # LAFAN1-G1 CSV, mjlab NPZ or PHC PKL, resampled
    save(clip, "dance.npz")
"""

from bcg_sim.motion.io import MotionFormatError, validate  # noqa: F401
from bcg_sim.motion.kinematics import complete, foot_heights, foot_speeds, forward_kinematics  # noqa: F401
from bcg_sim.motion.library import BUILTIN, builtin, cache_dir, load, save  # noqa: F401
from bcg_sim.motion.motion import Motion  # noqa: F401
from bcg_sim.motion.ops import align_ground, clip, from_23dof, ground_offset, resample, to_23dof  # noqa: F401
