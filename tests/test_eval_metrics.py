"""bcg-eval metrics on constructed cases with known answers (bcg_train.eval.metrics, MuJoCo for ground truth)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import bcg_sim.motion
from bcg_sim.g1 import BODY_NAMES, default_qpos, load_mujoco
from bcg_sim.policy import ReferenceTrack
from bcg_train.eval import metrics
from bcg_train.eval.mujoco_eval import reference_qpos
from bcg_train.eval.report import markdown_table

DT = 0.02


@pytest.fixture(scope="module")
def run_ref():
    ref = ReferenceTrack.from_motion(bcg_sim.motion.load("run"))
    t = np.arange(0, min(ref.duration, 1.0), DT)
    return t, reference_qpos(ref, t)


def test_kinematic_playback_in_mujoco_gives_zero_tracking_error(run_ref):
    """The reference played back kinematically in MuJoCo: MuJoCo's own body positions vs the metric's FK."""
    t, q = run_ref
    m = load_mujoco()
    d = mujoco.MjData(m)
    ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in BODY_NAMES]
    mj_pos = []
    for row in q:
        d.qpos[:] = row  # the project MJCF's qpos is in motor order
        mujoco.mj_kinematics(m, d)
        mj_pos.append(d.xpos[ids].copy())
    e = metrics.tracking_error(np.array(mj_pos), metrics.kinematics(q).body_pos_w)
    assert e.max() < 1e-9
    s = metrics.summarize(metrics.series(metrics.Rollout(t, q, q), DT, 0.02), fall_height=0.3)
    assert s["e_track_cm"] == 0.0 and s["joint_err_rad"] == 0.0 and not s["fell"]


def test_offset_of_10_cm_gives_10_cm(run_ref):
    t, q = run_ref
    shifted = q.copy()
    shifted[:, :3] += np.array([0.06, -0.08, 0.0])  # |(6, -8)| = 10 cm: every body moves by 10 cm
    s = metrics.series(metrics.Rollout(t, shifted, q), DT, 0.02)
    np.testing.assert_allclose(s["e_track"], 0.10, atol=1e-12)
    body = metrics.kinematics(q).body_pos_w
    one = body.copy()
    one[:, 5] += np.array([0.0, 0.0, 0.10])  # a single body 10 cm off: 10 cm / 30 bodies in the mean
    np.testing.assert_allclose(metrics.tracking_error(one, body), 0.10 / len(BODY_NAMES), atol=1e-12)


def test_known_penetration_gives_its_delta_d():
    """Default pose lowered by 5 mm (training) and by 2 mm (MuJoCo): delta_d = 3 mm; MuJoCo agrees on depth."""
    q0 = default_qpos()
    deep, shallow = q0.copy(), q0.copy()
    deep[2] -= 0.005
    shallow[2] -= 0.002
    t = np.arange(10) * DT
    pen = {}
    for name, q in (("train", deep), ("mujoco", shallow)):
        qs = np.tile(q, (10, 1))
        s = metrics.summarize(metrics.series(metrics.Rollout(t, qs, qs), DT, 0.02), 0.3, window_s=1.0)
        pen[name] = s["pen_window_mm"]
    assert pen["train"] == pytest.approx(5.0, abs=1e-6) and pen["mujoco"] == pytest.approx(2.0, abs=1e-6)
    assert pen["train"] - pen["mujoco"] == pytest.approx(3.0, abs=1e-6)
    m = load_mujoco()
    d = mujoco.MjData(m)
    d.qpos[:] = deep
    mujoco.mj_forward(m, d)
    depth = max(-c.dist for c in d.contact[: d.ncon])
    assert depth == pytest.approx(0.005, abs=1e-6)  # the geometric definition is MuJoCo's contact depth


def test_fall_and_survival_from_pelvis_height():
    t = np.arange(50) * DT
    q = np.tile(default_qpos(), (50, 1))
    q[30:, 2] = 0.25  # dropped below 0.3 m at step 30
    s = metrics.summarize(metrics.series(metrics.Rollout(t, q, q), DT, 0.02), fall_height=0.3)
    assert s["fell"] and s["survival_s"] == pytest.approx(30 * DT)
    agg = metrics.aggregate(
        [s, metrics.summarize(metrics.series(metrics.Rollout(t[:30], q[:30], q[:30]), DT, 0.02), 0.3)]
    )
    assert agg["falls"] == 1 and agg["runs"] == 2


def test_foot_slip_is_the_contact_foot_speed():
    t = np.arange(20) * DT
    q = np.tile(default_qpos(), (20, 1))
    q[:, 0] = 0.1 * t  # the whole robot slides at 10 cm/s, feet on the ground
    s = metrics.series(metrics.Rollout(t, q, q), DT, 0.02)
    np.testing.assert_allclose(s["slip"][1:], 0.1, rtol=1e-9)
    q[:, 2] += 0.1  # lifted 10 cm: no foot in contact, no slip samples
    assert np.isnan(metrics.series(metrics.Rollout(t, q, q), DT, 0.02)["slip"]).all()


def test_markdown_table_writer():
    text = markdown_table(["a", "b|c"], [[1, "x|y"], ["2", 3.5]])
    assert text.splitlines() == ["| a | b|c |", "|---|---|", "| 1 | x\\|y |", "| 2 | 3.5 |"]
    with pytest.raises(ValueError, match="2 cells"):
        markdown_table(["a", "b", "c"], [[1, 2]])
