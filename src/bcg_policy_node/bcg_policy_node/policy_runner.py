"""Runs a loaded policy on robot states: reference timing, observation, inference, checks, targets.

One `step` per control period (contract.control_dt): observation from the shared builder
(`bcg_sim.policy.build_observation`), action from `Policy.act`, joint targets
q = default + scale * action clipped to the joint table's range. A policy that observes its offset from the clip
(ref_root_offset_xy) gets the pelvis position from the runner's `LegOdometry` (encoders + IMU orientation).
Any non-finite value or policy exception raises PolicyFault with a cause for the log; the node then damps.
"""

from __future__ import annotations

import time

import numpy as np

from bcg_policy_node.safety import check_finite
from bcg_sim.policy import Policy, RobotState, build_observation
from bcg_sim.policy.odometry import LegOdometry


class PolicyFault(RuntimeError):
    """The policy cannot be trusted this step (the message is the cause)."""


class PolicyRunner:
    def __init__(self, policy: Policy, reference=None):
        """`reference`: this runner's own copy of the clip (its yaw/position alignment is per runner); default
        the policy's, shared with whoever reads policy.reference (one robot, one alignment)."""
        self.policy = policy
        self.contract = policy.contract
        self.reference = policy.reference if reference is None else reference
        self.horizon = self.contract.observation.ref_horizon
        self.dt = self.contract.control_dt
        self._slices = self.contract.slices()
        self.t = 0.0  # s since the run started (reference time of this step)
        self.last_action = np.zeros(29, dtype=np.float32)
        self.last_act_s = 0.0  # wall time of the last inference
        self.odometry = LegOdometry() if "ref_root_offset_xy" in self._slices else None

    def start(self, state, t0: float = 0.0) -> None:
        """Begin a run at reference time t0 [s] (default the clip's start): zero last action, clip yaw-aligned
        to the robot's heading and placed so that its pose at t0 is at the origin."""
        self.t = float(t0)
        self.last_action = np.zeros(29, dtype=np.float32)
        self.reference.align_yaw(state.base_quat_w, self.t)
        if self.odometry is not None:  # the robot stands where the aligned clip starts
            start_xy = self.reference.sample(np.array([self.t]))["root_pos_w"][0, :2]
            self.odometry.reset(state.joint_pos, state.base_quat_w, start_xy)

    @property
    def clip_ended(self) -> bool:
        return self.t > self.reference.duration

    def step(self, state) -> np.ndarray:
        """Joint targets [29] rad for robot `state` (a lowlevel.RobotState); advances reference time."""
        window = self.reference.window(self.t, self.horizon, self.dt)
        if self.odometry is not None:
            pos = self.odometry.update(state.joint_pos, state.base_quat_w)
            state = RobotState(state.joint_pos, state.joint_vel, state.base_quat_w, state.base_ang_vel_b, pos)
        obs = build_observation(state, window, self.last_action, self.reference.phase(self.t), self.contract)
        cause = check_finite("observation", obs, self._slices)
        if cause:
            raise PolicyFault(cause)
        t0 = time.perf_counter()
        try:
            action = self.policy.act(obs)
        except Exception as exc:  # noqa: BLE001 - any runtime failure means: stop trusting the policy
            raise PolicyFault(f"policy error: {type(exc).__name__}: {exc}") from exc
        self.last_act_s = time.perf_counter() - t0
        cause = check_finite("action", action)
        if cause:
            raise PolicyFault(cause)
        self.last_action = action.astype(np.float32)
        self.t += self.dt
        return np.asarray(self.contract.action_to_target(action), dtype=np.float64)  # inside the joint ranges

    def reference_pose(self) -> dict[str, np.ndarray]:
        """Reference at the current time (for display): joint_pos [29], root_pos_w [3], root_quat_w [4]."""
        s = self.reference.sample(np.array([self.t]))
        return {k: v[0] for k, v in s.items()}
