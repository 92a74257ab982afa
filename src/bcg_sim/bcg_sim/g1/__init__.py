"""The project's own G1 description (one Python source of truth) and its MJCF/URDF exporters."""

from bcg_sim.g1.description import (  # noqa: F401
    BODIES,
    BODY_NAMES,
    COLLIDERS,
    FOOT_BODIES,
    FOOT_FRICTION,
    FOOT_SPHERE_RADIUS,
    SITES,
    VISUALS,
    Body,
    Geom,
    Inertial,
    Site,
    body_joint,
    body_names,
    default_joint_pos,
    default_qpos,
    foot_sphere_names,
    foot_sphere_positions,
    forward_kinematics,
    standing_height,
    total_mass,
)
from bcg_sim.g1.joints import (  # noqa: F401
    JOINTS_23,
    JOINTS_29,
    MOTORS,
    NUM_MOTOR_SLOTS,
    REMOVED_IN_23DOF,
    VARIANTS,
    Joint,
    Motor,
    index_29_to_23,
    joint_limits,
    joint_names,
    joints,
    motor_slots,
    stand_gains,
)
from bcg_sim.g1.mjcf import load_mujoco, to_mjcf, write_mjcf  # noqa: F401
from bcg_sim.g1.newton_model import add_to_builder, newton_joint_q, qpos_to_newton  # noqa: F401
from bcg_sim.g1.urdf import to_urdf, write_urdf  # noqa: F401
