"""Typed view of config/motions.yaml: contact rule, input validation, IK, built-in clip generators, rendering."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from bcg_sim.config import load_config


@dataclass(frozen=True)
class ContactConfig:
    """A foot is in contact when BOTH hold (evaluated per frame, per foot): its lowest sole sphere (bottom
    of the sphere, not the centre) is below `height` above z = 0, and that sphere moves slower than `speed`
    (3-D speed, central differences). The lowest sphere is the touching point: still while the foot rolls."""

    height: float  # [m]
    speed: float  # [m/s]


@dataclass(frozen=True)
class ValidationConfig:
    quat_norm_tolerance: float  # | |q| - 1 | allowed in input files
    joint_limit_tolerance: float  # [rad] allowed excursion beyond the joint table's limits
    # Rate plausibility (a warning, not an error): the `speed_quantile` of |joint velocity| above
    # `max_joint_speed_ratio` x the motor's velocity limit, or of the horizontal pelvis speed above
    # `max_root_speed`, suggests the clip is read at too high a rate.
    speed_quantile: float = 0.99
    max_joint_speed_ratio: float = 1.0
    max_root_speed: float = 10.0  # [m/s]


@dataclass(frozen=True)
class IKConfig:
    """Damped least squares on MuJoCo body Jacobians: dq = J^T (J J^T + damping^2 I)^-1 e (rows weighted,
    joints at a limit that the step would push further are frozen for that iteration)."""

    damping: float
    max_iterations: int
    tolerance: float  # [m, rad] converged when |e| is below this
    max_error: float  # [m, rad] a larger residual of a planted foot is a generator bug -> error
    max_swing_error: float  # [m] the same for a swinging foot's position (its orientation is a wish)
    max_step: float  # [rad] per-iteration joint step clamp (keeps DLS stable far from the solution)
    swing_rotation_weight: float  # weight of a swinging foot's orientation error (its position is exact);
    # lets the ankle stay within its limits when the planned swing-foot orientation is out of reach


@dataclass(frozen=True)
class SwingConfig:
    """Swing-foot path between two footholds: height = apex * sin(pi s); the horizontal move (min-jerk) is
    confined to s in [hold, 1 - hold] so the foot only lifts/lowers vertically near the ground (no scuffing)."""

    apex: float  # [m] peak sole height
    hold: float  # fraction of the swing at each end with vertical-only motion
    pitch: float = 0.0  # [rad] peak foot pitch in swing: toes down then up (sin(2 pi s) profile)


@dataclass(frozen=True)
class StepConfig:
    foot: str  # "left" | "right"
    t_lift: float  # [s]
    t_land: float  # [s]
    move: list[float]  # [dx, dy, dyaw] of the foothold in the world frame [m, m, rad]


@dataclass(frozen=True)
class RootKey:
    t: float  # [s]
    pos: list[float]  # [forward, left, z] m: pelvis offset from the support point in the support heading's
    # frame (see KeyframedConfig), and the pelvis height above the ground
    rpy: list[float]  # [roll, pitch, yaw] rad (R = Rz Ry Rx); yaw is added to the support heading


@dataclass(frozen=True)
class PoseKey:
    t: float  # [s]
    pose: str  # key of the clip's `poses`


@dataclass(frozen=True)
class HeadingKey:
    t: float  # [s]
    yaw: float  # [rad] heading of the path (0 = +x, + = left)


@dataclass(frozen=True)
class RunConfig:
    duration: float  # [s]
    speed: float  # [m/s] horizontal speed, constant (its direction turns in stance only: flights are ballistic)
    heading: list[HeadingKey]  # the path's heading (PCHIP through the keys; [] = straight along +x)
    stance_time: float  # [s] single support per step (rounded to whole frames)
    flight_time: float  # [s] (rounded to whole frames); sets the take-off speed g * T / 2
    touchdown_height: float  # [m] pelvis height at touch-down and take-off
    half_width: float  # [m] lateral offset of each foothold from the path
    foot_forward: float  # [m] foothold ahead of the pelvis at mid-stance
    swing: SwingConfig
    lean: float  # [rad] pelvis pitch (forward lean)
    yaw_amplitude: float  # [rad] pelvis yaw oscillation at stride frequency
    roll_amplitude: float  # [rad]
    waist_yaw_amplitude: float  # [rad] counter-rotation of the torso
    arm_swing: float  # [rad] shoulder-pitch amplitude, opposite to the legs
    arm_bias: float  # [rad] mean shoulder pitch
    shoulder_roll: float  # [rad] outward (mirrored for the right arm)
    elbow: float  # [rad] mean elbow flexion
    elbow_swing: float  # [rad]


@dataclass(frozen=True)
class JumpSpec:
    distance: float  # [m] displacement during the flight, along the heading before the jump
    turn: float  # [rad] heading change (yaw, + = left) from the push to the end of the landing


@dataclass(frozen=True)
class JumpConfig:
    stand_time: float  # [s] still standing at the start
    crouch_time: float  # [s]
    push_time: float  # [s] extension from crouch to take-off
    apex: float  # [m] pelvis rise above take-off height (flight time follows, rounded to whole frames)
    jumps: list[JumpSpec]  # one stand-crouch-push-flight-land-recover-end cycle each, one after the other
    landing_time: float  # [s] absorb to the landing crouch
    recover_time: float  # [s] back to standing
    end_time: float  # [s] still standing at the end
    stand_height: float  # [m] pelvis
    crouch_height: float  # [m]
    takeoff_height: float  # [m] pelvis height at take-off and touch-down
    land_height: float  # [m] lowest pelvis height after landing
    half_width: float  # [m]
    foot_forward: float  # [m] footholds relative to the pelvis when standing
    lean: float  # [rad] pelvis pitch in the crouch
    takeoff_lean: float  # [rad] pelvis pitch at take-off
    tuck: float  # [m] extra foot lift relative to the pelvis at the middle of the flight
    hold: float  # fraction of the flight with vertical-only foot motion (see SwingConfig.hold)
    poses: dict[str, dict[str, float]]  # joint name (no "_joint") -> rad; unnamed joints: G1 default
    keys: list[PoseKey]  # upper-body keyframes of one jump; times are fractions of its phases, see generators._jump


@dataclass(frozen=True)
class KeyframedConfig:
    """A clip of footwork (fight, dance): steps move one foot at a time; the pelvis follows the support.

    Support point and heading: the weighted mean of the two feet (sole points, yaws) with the left foot's
    weight w(t): 0.5 in double support, shifted to `weight_shift` over the foot that stays planted during
    `shift_time` before a lift, held through the swing, back to 0.5 during `settle_time` after touch-down
    (monotone PCHIP through those keys). The pelvis sits at the support point plus the keyframed offset."""

    duration: float  # [s]
    half_width: float  # [m] initial footholds: (x, +-half_width), yaw 0, plus `stagger`
    stagger: list[float]  # [left dx, right dx, left yaw, right yaw] initial foothold offsets, m / rad
    swing: SwingConfig
    weight_shift: float  # (0.5, 1]: share of the weight on the planted foot while the other one steps
    shift_time: float  # [s] weight transfer before a lift
    settle_time: float  # [s] back to even weight after a touch-down
    steps: list[StepConfig]
    root: list[RootKey]
    poses: dict[str, dict[str, float]]
    keys: list[PoseKey]


@dataclass(frozen=True)
class GenerationConfig:
    fps: float  # [Hz] of the built-in clips
    gravity: float  # [m/s^2]
    ik: IKConfig
    run: RunConfig
    jump: JumpConfig
    fight: KeyframedConfig
    dance: KeyframedConfig


@dataclass(frozen=True)
class RenderConfig:
    width: int  # [px] per frame
    height: int  # [px]
    frames: int  # frames in a PNG strip
    mp4_fps: float  # [Hz] video frame rate (the clip is resampled to it)
    distance: float  # [m] camera distance from the pelvis
    azimuth: float  # [deg] MuJoCo free-camera azimuth
    elevation: float  # [deg]
    lookat_height: float  # [m] the camera looks at (pelvis x, pelvis y, this z)
    ghost_rgba: list[float]  # colour of the translucent ghost robot
    robot_rgba: list[float]  # colour override of the main robot ([] keeps the model's colours)
    sky_top: list[float]  # rgb of a gradient skybox ([] = none, black background)
    sky_bottom: list[float]
    ghost_distance_per_m: float  # [m/m] camera distance added per metre between robot and ghost (both in view)
    label_height: int  # [px] row under each strip frame with its time stamp (0 = no labels)


@dataclass(frozen=True)
class GroundConfig:
    """`align_ground`: the ground is the median lowest-sole height over the stance (contact) frames. Contacts
    depend on the height, so it starts from the `initial_quantile` of the per-frame lowest sole and re-picks
    the stance frames `iterations` times. (The minimum over contacts is an outlier of a noisy clip.)"""

    initial_quantile: float = 0.05
    iterations: int = 3


@dataclass(frozen=True)
class MotionsConfig:
    contact: ContactConfig
    validation: ValidationConfig
    generation: GenerationConfig
    render: RenderConfig
    ground: GroundConfig = field(default_factory=GroundConfig)
    cache_subdir: str = field(default=".cache/bcg/motions")  # under the repository root unless $BCG_CACHE_DIR


@functools.lru_cache(maxsize=None)
def motions_config(name_or_path: str = "motions") -> MotionsConfig:
    """config/motions.yaml as a `MotionsConfig` (cached; the dataclasses are frozen)."""
    return load_config(MotionsConfig, name_or_path)
