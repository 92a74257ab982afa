"""Motion files: LAFAN1-G1 CSV / mjlab NPZ / PHC PKL round trips on the real clips, FK of the clips, and one
clear MotionFormatError (naming the file) per kind of bad input."""

from __future__ import annotations

from pathlib import Path

import joblib
import numpy as np
import pytest

from bcg_sim.motion import MotionFormatError, kinematics, load, ops, save
from bcg_sim.motion import formats as mio

WINDOW_S = (10.0, 14.0)  # a short stretch of each clip keeps FK fast
CONTACT_FLOOR_TOL = 0.05  # m: soles of contacting feet within +-5 cm of z = 0


@pytest.fixture(scope="module")
def lafan1_csvs(lafan1_dir: Path) -> list[Path]:
    return sorted(lafan1_dir.glob("*.csv"))


@pytest.fixture(scope="module")
def window_csv(lafan1_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few seconds of run1_subject2.csv, verbatim rows (the CSV text is the reference)."""
    rows = (lafan1_dir / "run1_subject2.csv").read_text().splitlines()
    start, end = (int(t * mio.CSV_FPS) for t in WINDOW_S)
    path = tmp_path_factory.mktemp("lafan1") / "run_window.csv"
    path.write_text("\n".join(rows[start:end]) + "\n")
    return path


def test_csv_npz_pkl_csv_round_trip_is_lossless(window_csv: Path, tmp_path: Path) -> None:
    reference = np.loadtxt(window_csv, delimiter=",")
    m = load(window_csv)
    assert m.fps == 30 and m.num_frames == reference.shape[0]
    save(m, tmp_path / "a.npz")
    save(load(tmp_path / "a.npz"), tmp_path / "b.pkl")
    save(load(tmp_path / "b.pkl"), tmp_path / "c.csv")
    back = np.loadtxt(tmp_path / "c.csv", delimiter=",")
    assert back.shape == reference.shape
    np.testing.assert_allclose(back, reference, rtol=0, atol=1e-12)
    final = load(tmp_path / "c.csv")
    np.testing.assert_allclose(final.body_pos_w, m.body_pos_w, atol=1e-12)


def test_npz_has_the_mjlab_layout(window_csv: Path, tmp_path: Path) -> None:
    m = load(window_csv)
    save(m, tmp_path / "m.npz")
    data = np.load(tmp_path / "m.npz")
    t = m.num_frames
    assert data["fps"].shape == (1,) and data["fps"][0] == 30
    assert data["joint_pos"].shape == data["joint_vel"].shape == (t, 29)
    for key, width in (("body_pos_w", 3), ("body_quat_w", 4), ("body_lin_vel_w", 3), ("body_ang_vel_w", 3)):
        assert data[key].shape == (t, 30, width), key
    np.testing.assert_array_equal(data["body_pos_w"][:, 0], m.root_pos_w)  # root = body 0
    from bcg_sim import g1

    assert list(data["body_names"]) == m.body_names == g1.body_names()  # MuJoCo depth-first, pelvis first


def test_foreign_pkl_without_wrists_loads_them_as_zero(window_csv: Path, tmp_path: Path) -> None:
    m = load(window_csv)
    entry = {
        "root_trans_offset": m.root_pos_w.astype(np.float32),
        "fps": 30,
        "root_rot": np.concatenate([m.root_quat_w[:, 1:], m.root_quat_w[:, :1]], 1).astype(np.float32),
        "dof": m.joint_pos[:, mio.PHC_JOINTS].astype(np.float32),
    }
    joblib.dump({"clip0": entry}, tmp_path / "phc.pkl")
    got = load(tmp_path / "phc.pkl")
    wrists = [i for i in range(29) if i not in mio.PHC_JOINTS]
    assert len(wrists) == 6 and np.all(got.joint_pos[:, wrists] == 0.0)
    np.testing.assert_allclose(got.joint_pos[:, mio.PHC_JOINTS], m.joint_pos[:, mio.PHC_JOINTS], atol=1e-6)
    np.testing.assert_allclose(got.root_quat_w, m.root_quat_w, atol=1e-6)


def test_lafan1_fk_keeps_contacting_feet_on_the_floor(lafan1_csvs: list[Path]) -> None:
    assert lafan1_csvs
    for path in lafan1_csvs:
        m = ops.clip(load(path), *WINDOW_S)
        heights = kinematics.foot_heights(m)[m.foot_contact]
        assert heights.size > 0, f"{path.name}: no contact frames"
        assert np.abs(heights).max() < CONTACT_FLOOR_TOL, f"{path.name}: sole {np.abs(heights).max():.3f} m off"
        assert m.body_pos_w.shape == (m.num_frames, 30, 3)


# ------------------------------------------------------------------------------------------ bad input
def _good_rows(n: int = 5) -> np.ndarray:
    """[n, 36] a valid LAFAN1-G1 CSV block: standing, identity orientation (x y z w)."""
    from bcg_sim.motion import _model

    row = np.concatenate([[0.0, 0.0, 0.75, 0.0, 0.0, 0.0, 1.0], _model.default_joint_pos()])
    return np.tile(row, (n, 1))


def _write_csv(path: Path, rows: np.ndarray) -> Path:
    np.savetxt(path, rows, delimiter=",", fmt="%.10g")
    return path


def _expect(path: Path, fragment: str) -> None:
    with pytest.raises(MotionFormatError) as info:
        load(path)
    assert str(path) in str(info.value), info.value
    assert fragment in str(info.value), info.value


def test_good_csv_loads_and_is_not_modified(tmp_path: Path) -> None:
    rows = _good_rows()
    rows[:, 7 + 3] = 2.8798 + 0.01  # a knee 0.01 rad past its limit is within tolerance and kept as is
    m = load(_write_csv(tmp_path / "ok.csv", rows))
    assert m.joint_pos[0, 3] == pytest.approx(2.8898, abs=1e-12)


def test_csv_wrong_column_count(tmp_path: Path) -> None:
    _expect(_write_csv(tmp_path / "cols.csv", _good_rows()[:, :35]), "36 comma-separated columns")


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_csv_nan_or_inf(tmp_path: Path, value: float) -> None:
    rows = _good_rows()
    rows[2, 10] = value
    _expect(_write_csv(tmp_path / "nan.csv", rows), "NaN/inf")


def test_csv_non_unit_quaternion(tmp_path: Path) -> None:
    rows = _good_rows()
    rows[3, 3:7] *= 1.01
    _expect(_write_csv(tmp_path / "quat.csv", rows), "not unit length at frame 3")


def test_csv_joint_beyond_limit(tmp_path: Path) -> None:
    rows = _good_rows()
    rows[1, 7 + 3] = 3.5  # left knee, limit 2.8798
    _expect(_write_csv(tmp_path / "limit.csv", rows), "joint left_knee")


def test_empty_files(tmp_path: Path) -> None:
    for name in ("empty.csv", "empty.npz", "empty.pkl"):
        (tmp_path / name).write_text("")
        _expect(tmp_path / name, "empty")


def test_npz_missing_key(tmp_path: Path) -> None:
    path = tmp_path / "nokey.npz"
    np.savez(path, fps=np.array([50.0]), body_pos_w=np.zeros((3, 30, 3)), body_quat_w=np.ones((3, 30, 4)))
    _expect(path, "missing NPZ key(s) ['joint_pos']")


def test_npz_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.npz"
    path.write_bytes(b"this is not a zip archive")
    _expect(path, "cannot read")


def test_pkl_missing_key(tmp_path: Path) -> None:
    path = tmp_path / "nokey.pkl"
    joblib.dump({"clip": {"root_trans_offset": np.zeros((3, 3)), "root_rot": np.zeros((3, 4)), "fps": 30}}, path)
    _expect(path, "missing key(s) ['dof']")


def test_pkl_with_several_clips_needs_a_choice(tmp_path: Path) -> None:
    rows = _good_rows()
    entry = {
        "root_trans_offset": rows[:, :3],
        "root_rot": rows[:, 3:7],
        "dof": rows[:, 7:][:, mio.PHC_JOINTS],
        "fps": 30,
    }
    path = tmp_path / "multi.pkl"
    joblib.dump({"a": entry, "b": entry}, path)
    _expect(path, "holds 2 clips")
    assert load(path, clip="b").name == "b"


def test_unknown_extension_and_missing_file(tmp_path: Path) -> None:
    _expect(tmp_path / "clip.txt", "unknown motion format")
    _expect(tmp_path / "absent.csv", "no such file")


def _csv_of(motion, path):
    mio.write_csv(motion, path)
    return path


def test_csv_rate_from_argument_or_file_name_and_warnings(tmp_path: Path) -> None:
    """A 60 fps CSV read at 60 fps (argument or file name) keeps its duration; read without a rate it is read
    at 30 fps with a warning; a clip too fast for its rate warns; contradictions are errors."""
    import warnings

    from bcg_sim.motion import library, resample

    run60 = resample(load("run"), 60.0)
    plain = _csv_of(run60, tmp_path / "run.csv")
    named = _csv_of(run60, tmp_path / "run_60hz.csv")
    m = load(plain, input_fps=60)
    assert m.fps == 60 and m.duration == pytest.approx(run60.duration)
    assert mio.read_csv(plain, fps=60).fps == 60
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a rate from the name or argument: no warning at all
        assert load(named).fps == 60 and load(tmp_path / "run_60hz.csv", input_fps=60).fps == 60
    with pytest.warns(library.MotionRateWarning, match="CSV default 30 fps"):
        assert load(plain).duration == pytest.approx(2 * run60.duration, rel=1e-3)
    with pytest.warns(library.MotionRateWarning, match="velocity limit"):
        load(plain, input_fps=240)  # 4x too fast: faster than the G1's motors
    with pytest.raises(mio.MotionFormatError, match="file name says 60 fps"):
        load(named, input_fps=30)
    with pytest.raises(mio.MotionFormatError, match="file name says 60 fps but the motion is 50 fps"):
        mio.write_csv(load("run"), tmp_path / "bad_60hz.csv")
    assert mio.rate_in_name("walk 50fps.csv") == 50 and mio.rate_in_name("walk1_subject1.csv") is None
