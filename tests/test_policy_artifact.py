"""Policy artifact: export -> load round trip (ONNX and TorchScript equal the torch module), clear errors
on metadata mismatch, the observation builder equal in numpy and torch, the hold policy and its CLI."""

from __future__ import annotations

import shutil

import numpy as np
import onnxruntime  # noqa: F401 - a hard dependency: a broken install fails, not skips
import pytest
import torch
import yaml

from bcg_sim.g1.joints import JOINTS_29
from bcg_sim.policy import (
    OPTIONAL_FEATURES,
    STANDARD_LAYOUT,
    PolicyContractError,
    ReferenceTrack,
    ReferenceWindow,
    RobotState,
    build_observation,
    default_contract,
    export_policy,
    load_policy,
)
from bcg_sim.policy.cli import main as cli_main
from bcg_sim.quat import multiply as quat_mul

RNG = np.random.default_rng(0)


def _mlp(n_obs: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(n_obs, 32), torch.nn.ELU(), torch.nn.Linear(32, 29))


def _contract():
    c = default_contract(ref_horizon=3)
    n = c.n_obs
    c.observation.mean = RNG.normal(size=n).tolist()
    c.observation.std = RNG.uniform(0.5, 2.0, size=n).tolist()
    return c


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    c = _contract()
    module = _mlp(c.n_obs)
    clip = ReferenceTrack(
        "wave",
        30.0,
        np.tile([0, 0, 0.78], (20, 1)),
        np.tile([1.0, 0, 0, 0], (20, 1)),
        np.tile(c.default_joint_pos, (20, 1)) + 0.1 * np.sin(np.arange(20))[:, None],
    )
    out = export_policy(module, c, tmp_path_factory.mktemp("art") / "mlp", reference=clip)
    return out, module, c


def test_round_trip_both_formats_equal_torch_module(artifact):
    out, module, c = artifact
    obs = RNG.normal(size=(5, c.n_obs)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(c.normalize(obs))).numpy()
    for runtime in ("onnx", "torchscript"):
        p = load_policy(out, runtime=runtime)
        assert p.runtime == runtime and p.n_obs == c.n_obs
        np.testing.assert_allclose(p.act(obs), expected, atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(p.act(obs[2]), expected[2], atol=1e-5, rtol=1e-5)
        assert p.reference.name == "wave" and p.reference.num_frames == 20
    assert load_policy(out / "policy.yaml").runtime == "onnx"  # auto prefers ONNX


def _edited_copy(src, dst, edit):
    shutil.copytree(src, dst)
    d = yaml.safe_load(open(dst / "policy.yaml"))
    edit(d)
    yaml.safe_dump(d, open(dst / "policy.yaml", "w"), sort_keys=False)
    return dst


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["joint_names"].reverse(), "joint order differs from bcg_sim.g1.joints at index 0"),
        (lambda d: d["observation"]["layout"][0].update(size=30), "joint_pos_rel has size 30, the builder makes 29"),
        (lambda d: d["observation"]["mean"].pop(), "mean/std have"),
        (lambda d: d.update(version=99), "metadata version 99"),
        (lambda d: d.update(kp_typo=1.0), "unknown key"),
        (lambda d: d["effort_limit"].__setitem__(0, 500.0), "exceeds its motor"),
    ],
)
def test_metadata_mismatch_gives_clear_error(artifact, tmp_path, edit, message):
    bad = _edited_copy(artifact[0], tmp_path / "bad", edit)
    with pytest.raises(PolicyContractError, match=message):
        load_policy(bad)


def test_network_that_does_not_fit_the_layout_is_rejected(artifact, tmp_path):
    def drop_phase(d):  # a consistent contract with one input fewer than the network takes
        d["observation"]["layout"].pop()
        d["observation"]["mean"].pop()
        d["observation"]["std"].pop()

    for runtime in ("onnx", "torchscript"):
        bad = _edited_copy(artifact[0], tmp_path / runtime, drop_phase)
        with pytest.raises(PolicyContractError, match="network"):
            load_policy(bad, runtime=runtime)


def _random_quat(*shape):
    q = RNG.normal(size=(*shape, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def test_observation_builder_numpy_equals_batched_torch():
    c = default_contract(ref_horizon=3, layout=STANDARD_LAYOUT + OPTIONAL_FEATURES)  # every feature
    b, k = 4, c.observation.ref_horizon
    state = RobotState(
        RNG.normal(size=(b, 29)),
        RNG.normal(size=(b, 29)),
        _random_quat(b),
        RNG.normal(size=(b, 3)),
        RNG.normal(size=(b, 3)),
    )
    win = ReferenceWindow(
        RNG.normal(size=(b, k, 29)),
        _random_quat(b, k),
        RNG.normal(size=(b, k, 3)),
        RNG.normal(size=(b, k, 3)),
        RNG.normal(size=(b, k, 3)),
    )
    last, phase = RNG.normal(size=(b, 29)), RNG.uniform(size=(b, 1))
    per_sample = np.stack(
        [
            build_observation(
                RobotState(*(x[i] for x in state)),
                ReferenceWindow(*(x[i] for x in win)),
                last[i],
                float(phase[i, 0]),
                c,
            )
            for i in range(b)
        ]
    )
    t = lambda x: torch.as_tensor(x, dtype=torch.float64)  # noqa: E731
    batched = build_observation(RobotState(*map(t, state)), ReferenceWindow(*map(t, win)), t(last), t(phase), c)
    assert per_sample.shape == (b, c.n_obs) and per_sample.dtype == np.float32
    assert batched.shape == (b, c.n_obs) and batched.dtype == torch.float64
    np.testing.assert_allclose(per_sample, batched.numpy(), atol=1e-5)
    s = c.slices()  # spot-check the frames of two features against their definitions
    np.testing.assert_allclose(per_sample[:, s["joint_pos_rel"]], state.joint_pos - c.default_joint_pos, atol=1e-5)
    np.testing.assert_allclose(per_sample[:, s["phase"]], phase, atol=1e-6)


def test_frames_upright_and_aligned_reference():
    c = default_contract(ref_horizon=2, layout=STANDARD_LAYOUT + ("ref_root_offset_xy",))
    yaw = 1.0
    q_robot = np.array([np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)])  # upright, IMU yaw 1 rad
    clip = ReferenceTrack(
        "walk",
        50.0,
        np.array([[0, 0, 0.8], [0.02, 0, 0.8], [0.04, 0, 0.8]]),
        np.tile([1.0, 0, 0, 0], (3, 1)),
        np.tile(c.default_joint_pos, (3, 1)),
    )
    clip.align_yaw(q_robot)
    win = clip.window(0.0, 2, c.control_dt)
    state = RobotState(np.array(c.default_joint_pos), np.zeros(29), q_robot, np.zeros(3), np.array([0.0, 0.0, 0.8]))
    obs = build_observation(state, win, np.zeros(29), clip.phase(0.0), c)
    s = c.slices()
    # the clip walks 2 cm per frame along its heading, which is the robot's: straight ahead in the heading frame
    np.testing.assert_allclose(obs[s["ref_root_offset_xy"]], [0.02, 0, 0.04, 0], atol=1e-6)
    off = RobotState(*state[:4], np.array([0.02 * np.cos(yaw), 0.02 * np.sin(yaw), 0.8]))  # the robot 2 cm ahead
    np.testing.assert_allclose(
        build_observation(off, win, np.zeros(29), 0.0, c)[s["ref_root_offset_xy"]], [0, 0, 0.02, 0], atol=1e-6
    )
    with pytest.raises(ValueError, match="root_pos_w"):
        build_observation(RobotState(*state[:4]), win, np.zeros(29), 0.0, c)
    np.testing.assert_allclose(obs[s["projected_gravity_b"]], [0, 0, -1], atol=1e-6)
    np.testing.assert_allclose(obs[s["ref_root_ori_b"]], [1, 0, 0, 1, 0, 0] * 2, atol=1e-6)  # same heading
    np.testing.assert_allclose(obs[s["ref_root_lin_vel_b"]][:3], [1.0, 0, 0], atol=1e-5)  # forward in its frame
    np.testing.assert_allclose(obs[s["joint_pos_rel"]], 0, atol=1e-6)
    np.testing.assert_allclose(win.root_quat_w[0], quat_mul(q_robot, np.array([1.0, 0, 0, 0])), atol=1e-9)


def test_hold_artifact_from_cli_is_zero_action(tmp_path):
    assert cli_main(["export-hold", "-o", str(tmp_path / "hold"), "--formats", "onnx"]) == 0
    p = load_policy(tmp_path / "hold")
    a = p.act(RNG.normal(size=p.n_obs).astype(np.float32))
    assert np.all(a == 0)
    np.testing.assert_allclose(p.contract.action_to_target(a), [j.default for j in JOINTS_29])
    with pytest.raises(PolicyContractError, match="no torchscript network"):
        load_policy(tmp_path / "hold", runtime="torchscript")


def _truncate(path, fraction=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])


BROKEN = {  # case -> (damage(folder), runtime, file the message must name, problem in the message)
    "missing folder": (lambda d: shutil.rmtree(d), "auto", "", "does not exist"),
    "truncated onnx": (lambda d: _truncate(d / "policy.onnx"), "onnx", "policy.onnx", "not a readable ONNX"),
    "truncated torchscript": (
        lambda d: _truncate(d / "policy.pt"),
        "torchscript",
        "policy.pt",
        "not a readable TorchScript",
    ),
    "non-zip reference": (
        lambda d: (d / "reference.npz").write_text("not a zip"),
        "auto",
        "reference.npz",
        "not a readable reference clip",
    ),
    "truncated reference": (lambda d: _truncate(d / "reference.npz", 0.7), "auto", "reference.npz", "reference clip"),
    "yaml syntax error": (
        lambda d: (d / "policy.yaml").write_text("format: bcg_policy\nversion: [1\n"),
        "auto",
        "policy.yaml",
        "YAML syntax error at line",
    ),
    "binary garbage yaml": (
        lambda d: (d / "policy.yaml").write_bytes(bytes(range(256)) * 4),
        "auto",
        "policy.yaml",
        "policy.yaml",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_artifact_is_one_error_type_and_one_cli_line(artifact, tmp_path, case):
    """load_policy raises ArtifactError naming the file; `bcg-policy info` prints it as one line, exit 2."""
    import subprocess
    import sys

    from bcg_sim.policy import ArtifactError

    damage, runtime, file, problem = BROKEN[case]
    broken = tmp_path / "broken"
    shutil.copytree(artifact[0], broken)
    damage(broken)
    with pytest.raises(ArtifactError, match=problem) as err:
        load_policy(broken, runtime=runtime)
    assert file in str(err.value) and str(broken) in str(err.value)
    r = subprocess.run(
        [sys.executable, "-m", "bcg_sim.policy.cli", "info", str(broken), "--runtime", runtime],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("bcg-policy: error: ") and problem in lines[0] and file in lines[0], lines[0]


def test_target_reach_lets_the_pd_push_with_the_full_effort_at_a_range_end():
    """With target_reach 1 a raw action far past a joint's range gives the range's end plus effort_limit / kp:
    a joint at its end gets the motor's full effort from the PD (with 0: none), the same in torch and numpy;
    policy.yaml keeps the key, an artifact without it reads as 0, and a negative one is refused in one line."""
    import dataclasses

    from bcg_sim.g1.joints import joint_limits
    from bcg_sim.policy.contract import PolicyContract, PolicyContractError

    contract = default_contract()
    lower, upper = joint_limits()
    kp, effort = np.asarray(contract.kp), np.asarray(contract.effort_limit)
    big = np.full(29, 1e3)
    none = dataclasses.replace(contract, target_reach=0.0)
    assert np.allclose(none.action_to_target(big), upper)  # no PD torque towards the end at the end
    c = dataclasses.replace(contract, target_reach=1.0)
    for a in (big, -big):
        at_end = upper if a[0] > 0 else lower
        pd_at_end = kp * (c.action_to_target(a) - at_end)  # the PD torque of a joint standing at that end
        assert np.allclose(np.abs(pd_at_end), effort, rtol=1e-9)
        t = c.action_to_target(torch.as_tensor(a, dtype=torch.float64))
        assert np.allclose(t.numpy(), c.action_to_target(a))
    d = c.to_dict()
    assert PolicyContract.from_dict(d).target_reach == 1.0
    assert PolicyContract.from_dict({k: v for k, v in d.items() if k != "target_reach"}).target_reach == 0.0
    with pytest.raises(PolicyContractError, match="target_reach must be a number in"):
        PolicyContract.from_dict({**d, "target_reach": -1.0})
