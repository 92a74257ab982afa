"""Runs a loaded policy on robot states: reference timing, observation, inference, checks, targets.

One `step` per control period (contract.control_dt): observation from the shared builder
(`bcg_sim.policy.build_observation`), action from `Policy.act`, joint targets
q = default + scale * action clipped to the joint table's range. A policy that observes its offset from the clip
(ref_root_offset_xy) gets the pelvis position from the runner's `LegOdometry` (encoders + IMU orientation), or,
where its contract's observation.root_source is "pose", from `PoseFusion`: a pose source off the soles (lidar
odometry, fed with `observe_pose`) carried by leg odometry between its poses; a pose source silent for longer
than `pose_timeout_s` is a fault.

`PolicyRunner` runs one robot (the node, bcg-eval in MuJoCo): any non-finite value or policy exception raises
PolicyFault with a cause for the log; the node then damps. `BatchPolicyRunner` runs N simulated worlds in one
call per step (the training's evaluation in bcg_sim), each with its own copy of the clip and start time, and
reports a fault per world instead of raising; PolicyRunner is its one-world case, so both run the same code.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from bcg_policy_node.safety import check_finite
from bcg_sim.policy import Policy, RobotState, build_observation
from bcg_sim.policy.contract import ROOT_SOURCES
from bcg_sim.policy.odometry import LegOdometry
from bcg_sim.policy.pose import PoseFusion
from bcg_sim.policy.reference import ReferenceTrack, batch_window


class PolicyFault(RuntimeError):
    """The policy cannot be trusted this step (the message is the cause)."""


class BatchPolicyRunner:
    def __init__(
        self,
        policy: Policy,
        references: Sequence[ReferenceTrack],
        pose_timeout_s: float = float("inf"),
        root_source: str | None = None,
    ):
        """`references`: one copy of the clip per world (copy.copy of policy.reference: its yaw/position
        alignment is per world). `pose_timeout_s`: with a pose source, the longest a run goes on without a new
        pose (from the start, then from the last pose's measurement). `root_source`: one of ROOT_SOURCES in
        place of the contract's (bcg-eval --root-source), None: the contract's."""
        self.policy = policy
        self.contract = policy.contract
        self.references = list(references)
        self.horizon = self.contract.observation.ref_horizon
        self.dt = self.contract.control_dt
        self._slices = self.contract.slices()
        n = len(self.references)
        self.times = np.zeros(n)  # [N] s, reference time of each world's next step
        self.last_actions = np.zeros((n, 29), dtype=np.float32)
        self.last_act_s = 0.0  # wall time of the last inference (all worlds)
        self.root_source = self.contract.observation.root_source if root_source is None else root_source
        if self.root_source not in ROOT_SOURCES:
            raise ValueError(f"root_source must be one of {ROOT_SOURCES}, got {self.root_source!r}")
        self.pose_timeout_s = pose_timeout_s
        self.odometry: LegOdometry | PoseFusion | None = None
        if "ref_root_offset_xy" in self._slices:
            self.odometry = PoseFusion(self.dt) if self.root_source == "pose" else LegOdometry()
        self._run_s = 0.0  # [s] since start

    @property
    def uses_pose(self) -> bool:
        """Whether this runner's policy reads a pose source (observe_pose)."""
        return isinstance(self.odometry, PoseFusion)

    def observe_pose(self, xy: np.ndarray, yaw: np.ndarray, age_s: float) -> None:
        """A pose from the pose source for the coming step: pelvis position xy [N, 2] m and heading [N] rad in the
        source's own frame, measured age_s before the coming step's robot state."""
        if not self.uses_pose:
            raise RuntimeError("observe_pose: this policy does not read a pose source (contract root_source)")
        self.odometry.correct(np.asarray(xy, float), np.asarray(yaw, float), age_s)

    def start(self, states, t0) -> None:
        """Begin each world's run at reference time t0 [N] s: zero last action, the world's clip yaw-aligned to
        its robot's heading and placed so that its pose at t0 is at the origin. `states`: arrays [N, ...]."""
        self.times = np.array(t0, dtype=np.float64).reshape(len(self.references))
        self.last_actions[:] = 0.0
        for ref, quat, t in zip(self.references, states.base_quat_w, self.times):
            ref.align_yaw(quat, float(t))
        if self.odometry is not None:  # each robot stands where its aligned clip starts
            start_xy = np.stack(
                [ref.sample(np.array([t]))["root_pos_w"][0, :2] for ref, t in zip(self.references, self.times)]
            )
            self.odometry.reset(states.joint_pos, states.base_quat_w, start_xy)
        self._run_s = 0.0

    def step(self, states) -> tuple[np.ndarray, list[str | None]]:
        """Joint targets [N, 29] rad for robot `states` (arrays [N, ...]) and each world's fault (None: none).
        A faulted world's targets are NaN and its time and last action stay; the others advance."""
        n = len(self.references)
        window = batch_window(self.references, self.times, self.horizon, self.dt)
        pos = None if self.odometry is None else self.odometry.update(states.joint_pos, states.base_quat_w)
        silent = min(self.odometry.pose_age_s, self._run_s) if self.uses_pose else 0.0
        self._run_s += self.dt
        state = RobotState(states.joint_pos, states.joint_vel, states.base_quat_w, states.base_ang_vel_b, pos)
        phase = np.array([[ref.phase(float(t))] for ref, t in zip(self.references, self.times)])  # [N, 1]
        obs = build_observation(state, window, self.last_actions, phase, self.contract)
        causes: list[str | None] = [None] * n
        if silent > self.pose_timeout_s:  # the estimate is leg odometry's alone: wrong where the soles slide
            causes = [f"pose source silent for {silent:.2f} s (pose_timeout_s {self.pose_timeout_s:g})"] * n
        for i in np.flatnonzero(~np.isfinite(obs).all(axis=-1)):
            causes[i] = causes[i] or check_finite("observation", obs[i], self._slices)
        t0 = time.perf_counter()
        try:
            action = self.policy.act(obs)  # the rows are independent: a bad world does not spoil the others
        except Exception as exc:  # noqa: BLE001 - any runtime failure means: stop trusting the policy
            causes = [f"policy error: {type(exc).__name__}: {exc}"] * n
            action = np.full((n, 29), np.nan, dtype=np.float32)
        self.last_act_s = time.perf_counter() - t0
        for i in np.flatnonzero(~np.isfinite(action).all(axis=-1)):
            causes[i] = causes[i] or check_finite("action", action[i])
        ok = np.array([c is None for c in causes])
        self.last_actions[ok] = action[ok]
        self.times[ok] += self.dt
        targets = np.asarray(self.contract.action_to_target(action), dtype=np.float64)  # inside the joint ranges
        targets[~ok] = np.nan
        return targets, causes


class PolicyRunner(BatchPolicyRunner):
    """One robot: arrays without the world dimension, a fault raises PolicyFault."""

    def __init__(
        self,
        policy: Policy,
        reference: ReferenceTrack | None = None,
        pose_timeout_s: float = float("inf"),
        root_source: str | None = None,
    ):
        """`reference`: this runner's own copy of the clip (its yaw/position alignment is per runner); default
        the policy's, shared with whoever reads policy.reference (one robot, one alignment). The rest as
        BatchPolicyRunner's."""
        super().__init__(policy, [policy.reference if reference is None else reference], pose_timeout_s, root_source)

    @property
    def reference(self) -> ReferenceTrack:
        return self.references[0]

    @property
    def t(self) -> float:
        """s since the run started (reference time of this step)."""
        return float(self.times[0])

    @property
    def last_action(self) -> np.ndarray:
        return self.last_actions[0]

    @property
    def clip_ended(self) -> bool:
        return self.t > self.reference.duration

    def start(self, state, t0: float = 0.0) -> None:
        """Begin a run at reference time t0 [s] (default the clip's start): zero last action, clip yaw-aligned
        to the robot's heading and placed so that its pose at t0 is at the origin."""
        super().start(_one_world(state), [t0])

    def observe_pose(self, xy: np.ndarray, yaw: float, age_s: float) -> None:
        """A pose for the coming step: xy [2] m, heading rad, measured age_s before it (see BatchPolicyRunner)."""
        super().observe_pose(np.asarray(xy, float)[None], np.asarray([yaw], float), age_s)

    def step(self, state) -> np.ndarray:
        """Joint targets [29] rad for robot `state` (a lowlevel.RobotState); advances reference time."""
        targets, causes = super().step(_one_world(state))
        if causes[0]:
            raise PolicyFault(causes[0])
        return targets[0]

    def reference_pose(self) -> dict[str, np.ndarray]:
        """Reference at the current time (for display): joint_pos [29], root_pos_w [3], root_quat_w [4]."""
        s = self.reference.sample(np.array([self.t]))
        return {k: v[0] for k, v in s.items()}


def _one_world(state) -> RobotState:
    """A robot state as a batch of one world ([1, ...] arrays)."""
    return RobotState(*(np.asarray(getattr(state, k), dtype=np.float64)[None] for k in RobotState._fields[:4]))
