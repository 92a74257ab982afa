"""bcg-eval --ros: the deployed stack measured, not only the Python loop.

Each run is one `bcg-sim2sim --fast --start --record BAG` (MuJoCo bridge + policy node + recorder over real
DDS, lockstep on sim time), with the bridge's seed varied per run (base_seed + i, like the MuJoCo path). The
bridge starts standing at the default pose; the policy node goes ZERO_TORQUE -> MOVE_TO_DEFAULT -> HOLD -> RUN
on the emulated remote. With the press that starts RUN the bridge adds the start-state spread of the MuJoCo
path (eval init_joint_noise on the joint angles, init_root_vel_noise on the pelvis velocity; Gaussian, drawn
from the run's seed), so N runs start from N states.
From the bag: RUN start = the `-> RUN` transition's stamp (sim time), pelvis pose from /sim/ground_truth
(50 Hz, stamped with sim time), joint angles from the /lowstate of the same tick (ms of sim time). The
reference is aligned like the node's runner does (heading of the robot at RUN start, clip at the origin).
The same metric functions then run on that qpos as on the Python loop's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from bcg_sim.policy import Policy
from bcg_train.eval import metrics
from bcg_train.eval.config import EvalConfig
from bcg_train.eval.mujoco_eval import EvalError, reference_qpos

ROS_TIMEOUT_FACTOR = 60.0  # wall seconds allowed per sim second of a sim2sim run (lockstep on a loaded CPU)
ROS_TIMEOUT_MIN_S = 120.0


def _domain_env() -> dict[str, str]:
    """Environment for the child: a ROS domain of its own unless the caller chose one (other DDS users on
    this machine must not feed it /lowstate)."""
    env = dict(os.environ)
    env.setdefault("ROS_DOMAIN_ID", str(101 + (os.getpid() * 7919) % 100))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    return env


def run_sim2sim(policy_dir: Path, bag: Path, duration: float, cfg: EvalConfig, seed: int) -> None:
    """One bcg-sim2sim run recording `bag`; raises EvalError with its output tail on failure."""
    latency = cfg.action_latency_s
    cmd = [
        sys.executable,
        "-m",
        "bcg_policy_node.sim2sim",
        "--policy",
        str(policy_dir),
        "--duration",
        f"{duration:.6f}",
        "--fast",
        "--start",
        "--record",
        str(bag),
        "--ros-args",
        "-p",
        f"policy_node:move_to_default_s:={cfg.ros_move_to_default_s}",
        "-p",
        f"mujoco_bridge:remote_press_s:={cfg.ros_remote_press_s}",
        "-p",
        f"mujoco_bridge:physics_dt:={cfg.physics_dt}",
        "-p",
        f"mujoco_bridge:seed:={seed}",
        "-p",
        f"mujoco_bridge:start_joint_noise:={cfg.init_joint_noise}",
        "-p",
        f"mujoco_bridge:start_root_vel_noise:={cfg.init_root_vel_noise}",
        "-p",
        f"mujoco_bridge:noise_q_std:={cfg.noise_q_std}",
        "-p",
        f"mujoco_bridge:noise_dq_std:={cfg.noise_dq_std}",
        "-p",
        f"mujoco_bridge:noise_gyro_std:={cfg.noise_gyro_std}",
        "-p",
        f"mujoco_bridge:cmd_latency_s:={latency}",
        "-p",
        f"mujoco_bridge:pose_rate_hz:={1.0 / cfg.pose_period_s}",
        "-p",
        f"mujoco_bridge:pose_latency_s:={cfg.pose_latency_s}",
        "-p",
        f"mujoco_bridge:pose_noise_m:={cfg.pose_noise_m}",
        "-p",
        f"mujoco_bridge:pose_drift:={cfg.pose_drift}",
        "-p",
        f"policy_node:pose_timeout_s:={cfg.pose_timeout_s}",
    ]
    timeout = max(ROS_TIMEOUT_MIN_S, ROS_TIMEOUT_FACTOR * duration)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_domain_env())
    except subprocess.TimeoutExpired as exc:
        raise EvalError(f"--ros: bcg-sim2sim did not finish {duration:.1f} s of sim within {timeout:.0f} s") from exc
    if r.returncode not in (0, 1):  # 1 = ended in DAMPING after a fault: still a measured run (likely a fall)
        tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or ["(no output)"]
        raise EvalError(f"--ros: bcg-sim2sim exited {r.returncode}: {tail[0]}")


def bag_rollout(bag: Path, policy: Policy, seconds: float) -> tuple[metrics.Rollout, float]:
    """The RUN segment of a sim2sim bag as a Rollout (control-rate samples from /sim/ground_truth) and the
    sim time [s] at which RUN began."""
    from bcg_policy_node.bags import deserialize, read_bag

    run_t = [
        m.timestamp_ns * 1e-9 for m in read_bag(bag, ["/policy_node/transitions"]) if "-> RUN" in deserialize(m).data
    ]
    if not run_t:
        raise EvalError(f"--ros: bag {bag}: the policy node never reached RUN (raise eval.ros_preroll_s?)")
    t_run = run_t[0]
    joints: dict[int, np.ndarray] = {}
    for m in read_bag(bag, ["/lowstate"]):
        msg = deserialize(m)
        joints[int(msg.tick)] = np.array([s.q for s in msg.motor_state[:29]], dtype=np.float64)
    rows, times = [], []
    for m in read_bag(bag, ["/sim/ground_truth"]):
        msg = deserialize(m)
        t = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        tick = int(round(t * 1000))
        if t + 1e-6 < t_run or t > t_run + seconds + 1e-6 or tick not in joints:
            continue
        p, o = msg.pose.position, msg.pose.orientation
        rows.append(np.concatenate([[p.x, p.y, p.z, o.w, o.x, o.y, o.z], joints[tick]]))
        times.append(t - t_run)
    if not rows or times[-1] < seconds - 0.05:
        got = times[-1] if times else 0.0
        raise EvalError(
            f"--ros: bag {bag}: RUN lasted {got:.2f} s of the {seconds:.2f} s asked (RUN began at "
            f"{t_run:.2f} s sim; raise eval.ros_preroll_s)"
        )
    qpos = np.array(rows)
    ref = policy.reference
    ref.align_yaw(qpos[0, 3:7])  # what PolicyRunner.start did with the IMU quaternion
    t = np.array(times)
    return metrics.Rollout(t, qpos, reference_qpos(ref, t)), t_run


def run_ros(
    policy: Policy, cfg: EvalConfig, seconds: float, out_dir: Path, progress: Callable[[str], None]
) -> list[dict]:
    """cfg.runs sim2sim runs, each measured from its bag (same record layout as evaluate.run_mujoco)."""
    import time

    out = []
    for i in range(cfg.runs):
        seed = cfg.base_seed + i
        bag = out_dir / f"ros_bag_{i}"
        if bag.exists():
            raise EvalError(f"--ros: {bag} exists; use a new --out folder")
        t0 = time.monotonic()
        run_sim2sim(policy.path, bag, cfg.ros_preroll_s + seconds, cfg, seed)
        r, t_run = bag_rollout(bag, policy, seconds)
        s = metrics.series(r, policy.contract.control_dt, cfg.contact_height)
        out.append(
            {
                "seed": seed,
                "rollout": r,
                "series": s,
                "fault": "",
                "max_contacts": None,
                "warnings": {},
                "missed_contacts": None,
                "run_start_s": t_run,
            }
        )
        progress(
            f"ROS run {i + 1}/{cfg.runs} (bridge seed {seed}): {seconds:.2f} s of RUN (from {t_run:.2f} s sim) in "
            f"{time.monotonic() - t0:.1f} s wall"
        )
    return out
