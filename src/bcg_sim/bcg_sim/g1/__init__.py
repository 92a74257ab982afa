"""The project's own G1 description (one Python source of truth) and its MJCF/URDF exporters."""

from bcg_sim.g1.joints import (  # noqa: F401
    JOINTS_23,
    JOINTS_29,
    MOTORS,
    NUM_MOTOR_SLOTS,
    Joint,
    Motor,
    index_29_to_23,
    joint_names,
    joints,
    motor_slots,
)
