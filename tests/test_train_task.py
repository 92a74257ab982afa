"""The training task on the real simulator (bcg_train.task): observable termination rules, failure-weighted
start sampling, pushes, sensor noise and the critic's privileged inputs."""

from __future__ import annotations

import math

import pytest
import torch
from train_helpers import QUIET, tiny_trainer

from bcg_sim.config import ConfigError
from bcg_train.config import load_train_config


def _task(tmp_path, n=2, motion="dance", **task):
    task = {"motion": motion, "randomize": {**QUIET, **task.pop("randomize", {})}, **task}
    return tiny_trainer(tmp_path, {"algo": "shac", "num_envs": n, "reward": {"kind": "tracking"}, "task": task}).task


def _moved(task, dz=0.0, dx=0.0, roll=0.0):
    """Worlds reset at frame 0; world 1 shifted by dz, dx [m] and rolled by `roll` [rad] about x; one control
    step with the reference's joint angles as PD targets. Returns task.terminated of that step."""
    from bcg_sim.diffsim import motion_state

    env = task.env
    s = motion_state(task.motion, torch.zeros(task.n, dtype=torch.long))
    s.root_pos_w[1, 2] += dz
    s.root_pos_w[1, 0] += dx
    half = torch.tensor([math.cos(roll / 2), math.sin(roll / 2), 0.0, 0.0])
    w, x = half[0], half[1]
    q = s.root_quat_w[1].clone()  # half (x) q
    s.root_quat_w[1] = torch.stack([w * q[0] - x * q[1], w * q[1] + x * q[0], w * q[2] - x * q[3], w * q[3] + x * q[2]])
    env.reset(None, motion=task.motion, frames=torch.zeros(task.n, dtype=torch.long), state=s)
    task.frame.zero_()
    target = (task.ref.joint_pos[1:2].expand(task.n, -1) - env.default_joint_pos) / env.cfg.actuation.action_scale
    out = env.step(target)
    task.frame += 1
    return task.terminated(out)


def test_termination_follows_height_and_tilt_not_horizontal_drift(tmp_path):
    task = _task(tmp_path)
    assert _moved(task).tolist() == [False, False]  # on the clip
    assert _moved(task, dx=1.0).tolist() == [False, False]  # 1 m of drift: the actor cannot see it
    assert _moved(task, dz=0.4).tolist() == [False, True]  # pelvis (and ankles) 0.4 m above the clip's
    tilt = _task(tmp_path / "tilt", termination={"root_height": 0.0, "end_effector_height": 0.0})
    assert _moved(tilt, dz=0.3, roll=1.0).tolist() == [False, True]  # up axis 1 rad off
    assert _moved(tilt, dz=0.3, roll=0.5).tolist() == [False, False]
    far = _task(tmp_path / "far", termination={"root_distance": 0.5})
    assert _moved(far, dx=1.0).tolist() == [False, True]  # the optional 3-D rule


def test_adaptive_starts_follow_the_failure_hazard(tmp_path):
    task = _task(tmp_path, start={"uniform_floor": 0.2, "first_frame": 0.1})
    n_bins = task.hazard.numel()
    assert n_bins >= 3
    # before any failure: uniform over the bins
    assert torch.allclose(task.start_weights(), torch.full((n_bins,), 1.0 / n_bins, dtype=torch.float64))
    # terminations in the last bin only, counted over one iteration
    last = n_bins - 1
    task._bin_visits[:] = 100.0
    task._bin_fails[last] = 50.0
    log = task.end_iteration()
    assert log["hazard_peak_s"] == pytest.approx(last * task.bin_frames / 50.0)
    assert task.hazard[last] == pytest.approx(0.05 * 0.5) and float(task.hazard[:last].sum()) == 0.0
    w = task.start_weights()
    assert float(w.sum()) == pytest.approx(1.0)
    # hazard in the last bin, half of it credited to the bin before; the rest only the uniform floor
    assert w[last] > w[last - 1] > w[0] == pytest.approx(0.2 / n_bins)
    frames = task.sample_frames(20000)
    assert int(frames.min()) == 0 and int(frames.max()) < task.max_start
    assert float((frames == 0).double().mean()) == pytest.approx(0.1 + 0.9 * float(w[0]) / task.bin_frames, abs=0.01)
    in_last = float((frames // task.bin_frames == last).double().mean())
    assert in_last == pytest.approx(0.9 * float(w[last]), abs=0.02)
    uniform = _task(tmp_path / "u", start={"sampling": "uniform"})
    uniform.hazard[-1] = 1.0
    assert torch.allclose(uniform.start_weights(), torch.full((n_bins,), 1.0 / n_bins, dtype=torch.float64))


def test_pushes_change_only_the_horizontal_root_velocity_of_due_worlds(tmp_path):
    task = _task(tmp_path, n=4, randomize={"push_lin_vel": 0.5, "push_interval_s": [1.0, 2.0]})
    env = task.env
    task.push_timer[:] = torch.tensor([0, 5, 0, 5])
    before_q, before = env.joint_q.clone(), env.state
    assert task.apply_pushes() == 2
    after = env.state
    dv = after.root_lin_vel_w - before.root_lin_vel_w
    assert torch.equal(env.joint_q, before_q)
    assert float(dv[[1, 3]].abs().max()) < 1e-5 and float(dv[:, 2].abs().max()) < 1e-5
    assert 0 < float(dv[[0, 2], :2].abs().max()) <= 0.5 + 1e-5
    assert torch.allclose(after.joint_vel, before.joint_vel, atol=1e-5)
    assert torch.allclose(after.root_ang_vel_w, before.root_ang_vel_w, atol=1e-5)
    assert bool(((task.push_timer[[0, 2]] >= 50) & (task.push_timer[[0, 2]] <= 100)).all())
    assert task.apply_pushes() == 0  # nobody due


def test_sensor_noise_touches_only_what_the_robot_measures(tmp_path):
    task = _task(tmp_path, n=512, randomize={"obs_joint_pos": 0.01, "obs_joint_vel": 0.5, "obs_ang_vel": 0.2})
    obs = task.observation(task.env.state, task.frame, task.last_action)
    noise = task.sensor_noise(obs)
    sizes = {item.name: item.size for item in task.contract.observation.layout}
    at, std = 0, {}
    for name, size in sizes.items():
        std[name] = float(noise[:, at : at + size].std())
        at += size
    assert std["joint_pos_rel"] == pytest.approx(0.01, rel=0.05)
    assert std["joint_vel"] == pytest.approx(0.5, rel=0.05)
    assert std["base_ang_vel_b"] == pytest.approx(0.2, rel=0.1)
    for name in ("projected_gravity_b", "last_action", "ref_joint_pos_rel", "ref_root_ori_b", "phase"):
        assert std[name] == 0.0, name


def test_privileged_inputs_see_the_pelvis_offset_from_the_clip(tmp_path):
    from bcg_sim.diffsim import motion_state

    task = _task(tmp_path)
    frames = torch.tensor([10, 10])
    s = motion_state(task.motion, frames)
    s.root_pos_w[1, 0] += 0.7  # world 1 is 0.7 m ahead of the clip along world x
    p = task.privileged(s, frames)
    assert p.shape == (2, 7)
    assert float(p[0, 4:].abs().max()) < 1e-5
    yaw_free = torch.linalg.vector_norm(p[1, 4:])  # in the pelvis frame: same length, rotated
    assert float(yaw_free) == pytest.approx(0.7, abs=1e-4)
    assert float(p[1, 0]) == pytest.approx(float(s.root_pos_w[1, 2]))


def test_action_delay_applies_the_previous_action_in_delayed_episodes(tmp_path):
    task = _task(tmp_path, n=400, randomize={"action_delay_prob": 0.25})
    share = float(task.delayed.double().mean())
    assert share == pytest.approx(0.25, abs=0.07)
    prev, now = torch.full((400, 29), 0.5), torch.full((400, 29), -1.0)
    task.last_action = prev
    applied = task.delay(now)
    assert torch.equal(applied[task.delayed], prev[task.delayed])
    assert torch.equal(applied[~task.delayed], now[~task.delayed])
    # the gradient reaches the previous step's action in delayed worlds, this step's elsewhere
    prev, now = prev.clone().requires_grad_(), now.clone().requires_grad_()
    task.last_action = prev
    task.delay(now).sum().backward()
    assert torch.equal(prev.grad[:, 0] > 0, task.delayed) and torch.equal(now.grad[:, 0] > 0, ~task.delayed)
    none = _task(tmp_path / "none", n=50)
    assert not bool(none.delayed.any())


def test_action_rate_cost_is_the_weighted_mean_squared_change_and_pulls_actions_together(tmp_path):
    task = tiny_trainer(
        tmp_path,
        {
            "algo": "shac",
            "num_envs": 3,
            "reward": {"kind": "tracking", "action_rate": 0.5},
            "task": {"motion": "dance"},
        },
    ).task
    prev = torch.zeros(3, 29)
    prev[1, :5] = 1.0
    now = torch.zeros(3, 29)
    now[1, :5] = 1.0  # world 1 repeats its action
    now[2, 0] = 2.0  # world 2 moves one joint by 2
    task.last_action = prev.clone().requires_grad_()
    now.requires_grad_()
    cost = task.action_rate_cost(now)
    assert torch.allclose(cost, torch.tensor([0.0, 0.0, 0.5 * 4.0 / 29]))
    cost.sum().backward()
    # descending the cost moves this action towards the last one and the last one towards this one
    assert float(now.grad[2, 0]) > 0 and float(task.last_action.grad[2, 0]) < 0
    assert float(now.grad[:2].abs().sum()) == 0.0
    off = _task(tmp_path / "off", n=3)
    off.last_action = prev
    assert torch.equal(off.action_rate_cost(now.detach()), torch.zeros(3))
    with pytest.raises(ConfigError, match="reward.action_rate"):
        load_train_config("tiny", {"reward": {"action_rate": -0.1}})


def test_training_targets_stay_in_the_target_ranges_the_node_enforces(tmp_path):
    """Training drives the simulator with the targets the node would send: a raw action past a joint's target
    range gives the range's end (no extra PD torque the robot would not get), with zero gradient there, and the
    node's PolicyRunner sends the same targets for the same action."""
    task = _task(tmp_path)
    lower, upper = (torch.as_tensor(x, dtype=torch.float32) for x in task.contract.target_range())
    action = torch.full((2, 29), 50.0)
    action[1] = -50.0
    action.requires_grad_()
    target = task.contract.action_to_target(action)
    assert torch.allclose(target[0], upper) and torch.allclose(target[1], lower)
    env_target = task.env.default_joint_pos + task.env.cfg.actuation.action_scale * task.env_action(action)
    assert torch.allclose(env_target[0], upper, atol=1e-5) and torch.allclose(env_target[1], lower, atol=1e-5)
    target.sum().backward()
    assert float(action.grad.abs().max()) == 0.0
    inside = torch.zeros(1, 29, requires_grad=True)  # the default pose: inside every range, gradient = scale
    task.contract.action_to_target(inside).sum().backward()
    assert bool((inside.grad > 0).all())
    node = task.contract.action_to_target(action.detach()[0].numpy().astype("float64"))
    assert node == pytest.approx(target[0].detach().numpy(), abs=1e-6)


def test_the_observed_offset_is_the_clip_minus_what_leg_odometry_would_estimate(tmp_path):
    """With task.observe_root_offset the actor sees the reference pelvis minus the pelvis estimate that the
    robot's LegOdometry makes from the same joint angles and orientations (obs_root_drift off here): exact at a
    reset, and equal to LegOdometry step by step as the worlds move on their own."""
    import numpy as np

    from bcg_sim.policy.odometry import LegOdometry

    task = _task(tmp_path, n=4, observe_root_offset=True, randomize={"obs_root_drift": 0.0})
    s = task.contract.slices()["ref_root_offset_xy"]
    task.reset()
    state = task.env.state
    first = task.observation(state, task.frame, task.last_action)[:, s]
    step = task.ref.root_pos_w[task.frame + 1, :2] - state.root_pos_w[:, :2]  # the clip's next frame, world x y
    assert torch.allclose(first[:, :2].norm(dim=-1), step.norm(dim=-1), atol=1e-5)  # a rotation of it
    odo = [LegOdometry() for _ in range(task.n)]
    errors = []
    for k in range(40):  # zero actions: the robots sag, shuffle and fall, and their soles slide
        out = task.env.step(task.env_action(torch.zeros(task.n, 29)))
        task.advance(out)
        st = out.state
        q, r, p = st.joint_pos.numpy(), st.root_quat_w.numpy(), st.root_pos_w.numpy()
        if k == 0:  # the task's estimate starts at the first step after a reset
            [o.reset(q[i], r[i], p[i, :2]) for i, o in enumerate(odo)]
        est = np.stack([o.update(q[i], r[i]) for i, o in enumerate(odo)])
        np.testing.assert_allclose(task.root_drift[:, :2].numpy(), est[:, :2] - p[:, :2], atol=2e-4)
        errors.append(float(task.root_drift.abs().max()))
    assert max(errors) > 1e-3  # the soles slid: the estimate moved away from the truth, as the robot's would
    task.reset(torch.tensor([0]))
    assert float(task.root_drift[0].abs().max()) == 0.0
