"""The project's G1 model: MJCF in MuJoCo and Newton, URDF, standing, agreement with Menagerie, CLI."""

from __future__ import annotations

import math
import subprocess
import sys
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

import bcg_sim.g1 as g1

VARIANTS = ("29dof", "23dof")
N_BODIES = 30
N_FK_SAMPLES = 200
FK_TOL = 0.005  # [m] body positions vs Menagerie
MASS_RTOL = 0.01
STAND_TIME = 2.0  # [s]
STAND_TOL = 0.02  # [m] pelvis excursion from its start
# The motors' policy gains are BeyondMimic's (10 Hz on the rotor inertia): far too soft for a pure PD to hold
# the robot up, and Menagerie's G1 falls the same way (see test_dynamics_match_menagerie). Standing uses the
# bring-up gains of the joint table, g1.stand_gains().
DYN_TIME = 1.0  # [s] of falling under the joints.py PD compared with Menagerie
DYN_TOL_POS = 1e-3  # [m]
DYN_TOL_Q = 5e-3  # [rad]
RNG_SEED = 0


def _pd_gains(variant: str):
    """kp [n] (N m/rad), kd [n] (N m s/rad), effort limit [n] (N m) from joints.py."""
    js = g1.joints(variant)
    kp = np.array([g1.MOTORS[j.motor].kp for j in js])
    kd = np.array([g1.MOTORS[j.motor].kd for j in js])
    eff = np.array([g1.MOTORS[j.motor].effort_limit for j in js])
    return kp, kd, eff


def _random_qpos(model: mujoco.MjModel, rng: np.random.Generator) -> np.ndarray:
    """Random free-base pose and joint angles uniformly inside the joint ranges: qpos [nq]."""
    q = np.zeros(model.nq)
    q[:3] = rng.uniform(-1.0, 1.0, 3)
    quat = rng.normal(size=4)
    q[3:7] = quat / np.linalg.norm(quat)
    lo, hi = model.jnt_range[1:, 0], model.jnt_range[1:, 1]
    q[7:] = rng.uniform(lo, hi)
    return q


# ---- MuJoCo --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_mjcf_compiles_with_expected_structure(variant):
    m = g1.load_mujoco(variant)
    js = g1.joints(variant)
    n = len(js)
    assert (m.nq, m.nv, m.nu) == (7 + n, 6 + n, n)
    assert [m.body(i).name for i in range(1, m.nbody)] == g1.body_names(variant)
    assert len(g1.body_names(variant)) == N_BODIES and g1.body_names(variant)[0] == "pelvis"
    assert [m.joint(i).name for i in range(1, m.njnt)] == g1.joint_names(variant)
    assert m.opt.timestep <= 0.002
    for i, j in enumerate(js):
        motor = g1.MOTORS[j.motor]
        jid = m.joint(j.mjcf_name).id
        np.testing.assert_allclose(m.jnt_range[jid], (j.lower, j.upper))
        np.testing.assert_allclose(m.dof_armature[m.jnt_dofadr[jid]], motor.armature)
        np.testing.assert_allclose(m.jnt_actfrcrange[jid], (-motor.effort_limit, motor.effort_limit))
        assert m.actuator(i).name == j.mjcf_name and m.actuator_trnid[i, 0] == jid
        assert m.actuator_gaintype[i] == mujoco.mjtGain.mjGAIN_FIXED and m.actuator_biastype[i] == 0  # motor
        np.testing.assert_allclose(m.actuator_ctrlrange[i], (-motor.effort_limit, motor.effort_limit))
    np.testing.assert_allclose(m.body_mass.sum(), g1.total_mass(variant))
    np.testing.assert_allclose(m.site("imu_in_pelvis").pos, (0.04525, 0.0, -0.08339))
    assert m.site_bodyid[m.site("imu_in_torso").id] == m.body("torso_link").id
    np.testing.assert_allclose(m.key("stand").qpos, g1.default_qpos(variant))


def test_23dof_welds_waist_and_wrists():
    m = g1.load_mujoco("23dof")
    for name in g1.REMOVED_IN_23DOF:
        with pytest.raises(KeyError):
            m.joint(f"{name}_joint")
    for body in ("waist_roll_link", "torso_link", "left_wrist_pitch_link", "right_wrist_yaw_link"):
        assert m.body_jntnum[m.body(body).id] == 0


def test_foot_spheres_api_matches_model():
    m = g1.load_mujoco()
    pos = g1.foot_sphere_positions()
    assert pos.shape == (4, 3)
    for foot, side in zip(g1.FOOT_BODIES, ("left", "right")):
        names = g1.foot_sphere_names(side)
        assert len(names) == 4
        for name, p in zip(names, pos):
            gid = m.geom(name).id
            assert m.geom_bodyid[gid] == m.body(foot).id
            np.testing.assert_allclose(m.geom_pos[gid], p)
            assert m.geom_type[gid] == mujoco.mjtGeom.mjGEOM_SPHERE
            np.testing.assert_allclose(m.geom_size[gid, 0], g1.FOOT_SPHERE_RADIUS)


@pytest.mark.parametrize("variant", VARIANTS)
def test_default_qpos_puts_soles_on_floor(variant):
    m = g1.load_mujoco(variant)
    d = mujoco.MjData(m)
    d.qpos[:] = g1.default_qpos(variant)
    mujoco.mj_kinematics(m, d)
    bottoms = np.array([d.geom_xpos[m.geom(n).id, 2] for n in g1.foot_sphere_names()]) - g1.FOOT_SPHERE_RADIUS
    assert bottoms.min() == pytest.approx(0.0, abs=1e-9)
    assert bottoms.max() < 0.002  # the default pose has (almost) flat soles


def test_numpy_forward_kinematics_matches_mujoco():
    rng = np.random.default_rng(RNG_SEED)
    for variant in VARIANTS:
        m = g1.load_mujoco(variant, floor=False)
        d = mujoco.MjData(m)
        qpos = np.array([_random_qpos(m, rng) for _ in range(20)])
        traj_pos, traj_rot = g1.forward_kinematics(qpos, variant)  # a whole trajectory [T, 30, 3 (, 3)] at once
        for t, q in enumerate(qpos):
            d.qpos[:] = q
            mujoco.mj_kinematics(m, d)
            pos, rot = g1.forward_kinematics(q, variant)
            np.testing.assert_allclose(pos, d.xpos[1:], atol=1e-9)
            np.testing.assert_allclose(rot, d.xmat[1:].reshape(-1, 3, 3), atol=1e-9)
            np.testing.assert_array_equal(traj_pos[t], pos)
            np.testing.assert_array_equal(traj_rot[t], rot)
        # only some bodies (leg odometry's feet): their own chains give the same numbers, in the order asked
        some = ("right_ankle_roll_link", "torso_link", "left_ankle_roll_link")
        sub_pos, sub_rot = g1.forward_kinematics(qpos, variant, bodies=some)
        rows = [g1.body_names(variant).index(b) for b in some]
        np.testing.assert_array_equal(sub_pos, traj_pos[:, rows])
        np.testing.assert_array_equal(sub_rot, traj_rot[:, rows])
    with pytest.raises(ValueError, match="unknown bodies"):
        g1.forward_kinematics(qpos[0], variant, bodies=("left_foot",))


def test_no_self_collision():
    """Random poses without a floor: no robot geom pair may ever be in contact."""
    m = g1.load_mujoco(floor=False)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(RNG_SEED)
    n_colliders = sum(1 for i in range(m.ngeom) if m.geom_contype[i] or m.geom_conaffinity[i])
    assert n_colliders == len(g1.COLLIDERS)
    for _ in range(50):
        d.qpos[:] = _random_qpos(m, rng)
        mujoco.mj_forward(m, d)
        assert d.ncon == 0


def test_fall_lands_on_body_colliders_not_through_floor():
    """With zero torque the robot collapses; the ground must be met by body colliders, not just the soles."""
    m = g1.load_mujoco()
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("stand").id)
    touched = set()
    for _ in range(int(3.0 / m.opt.timestep)):
        mujoco.mj_step(m, d)
        for c in d.contact[: d.ncon]:
            touched.update({m.geom(c.geom1).name, m.geom(c.geom2).name})
    feet = set(g1.foot_sphere_names())
    assert touched - feet - {"floor"}, f"only the soles touched the floor: {touched}"
    assert d.xpos[m.body("pelvis").id, 2] > 0.05  # lying on the colliders, not sunk into the floor


@pytest.mark.parametrize("variant", VARIANTS)
def test_stands_under_pd(variant):
    m = g1.load_mujoco(variant)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("stand").id)
    _, _, eff = _pd_gains(variant)
    kp, kd = (np.array(g) for g in g1.stand_gains(variant))
    q_star = g1.default_joint_pos(variant)
    start = d.qpos[:3].copy()
    worst = 0.0
    for _ in range(int(STAND_TIME / m.opt.timestep)):
        d.ctrl[:] = np.clip(kp * (q_star - d.qpos[7:]) - kd * d.qvel[6:], -eff, eff)
        mujoco.mj_step(m, d)
        worst = max(worst, float(np.linalg.norm(d.qpos[:3] - start)))
    assert worst < STAND_TOL


# ---- Newton --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_loads_in_newton(variant):
    import newton

    builder = newton.ModelBuilder()
    builder.add_mjcf(g1.to_mjcf(variant), parse_sites=False)
    model = builder.finalize(device="cpu")
    js = g1.joints(variant)
    n = len(js)
    assert model.body_count == N_BODIES
    assert model.joint_dof_count == 6 + n
    assert float(model.body_mass.numpy().sum()) == pytest.approx(g1.total_mass(variant), rel=1e-5)
    assert (model.joint_armature.numpy()[6:] > 0).all()  # Featherstone needs armature
    np.testing.assert_allclose(model.joint_limit_lower.numpy()[6:], [j.lower for j in js], rtol=1e-6)
    np.testing.assert_allclose(model.joint_limit_upper.numpy()[6:], [j.upper for j in js], rtol=1e-6)
    np.testing.assert_allclose(model.joint_effort_limit.numpy()[6:], [g1.MOTORS[j.motor].effort_limit for j in js])
    colliding = model.shape_flags.numpy() & int(newton.ShapeFlags.COLLIDE_SHAPES)
    assert int((colliding > 0).sum()) == len(g1.COLLIDERS) + 1  # + the floor plane
    keys = list(model.body_label) if hasattr(model, "body_label") else list(model.body_key)
    assert [k.split("/")[-1] for k in keys] == g1.body_names(variant)


def test_newton_contacts_floor_only():
    """In Newton too, robot shapes meet the floor but never each other (from the MJCF contype/conaffinity)."""
    import newton

    builder = newton.ModelBuilder()
    g1.add_to_builder(builder, floor=True)
    model = builder.finalize(device="cpu")
    state = model.state()
    q = g1.newton_joint_q()
    q[2] -= 0.5  # sink the robot half a metre: legs, pelvis and hands all cross the floor, limbs overlap
    state.joint_q.assign(q.astype(np.float32))
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    pipeline = newton.CollisionPipeline(model)
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    n = int(contacts.rigid_contact_count.numpy()[0])
    labels = [label.split("/")[-1] for label in model.shape_label]
    pairs = {
        (labels[a], labels[b])
        for a, b in zip(contacts.rigid_contact_shape0.numpy()[:n], contacts.rigid_contact_shape1.numpy()[:n])
    }
    touching = {a if b == "floor" else b for a, b in pairs if "floor" in (a, b)}
    assert set(g1.foot_sphere_names()) <= touching and {"pelvis_collision", "left_shin"} <= touching
    assert all("floor" in pair for pair in pairs), pairs


# ---- URDF ----------------------------------------------------------------------------------------------------
def _rpy_mat(rpy) -> np.ndarray:
    r, p, y = rpy
    rx = np.array([[1, 0, 0], [0, math.cos(r), -math.sin(r)], [0, math.sin(r), math.cos(r)]])
    ry = np.array([[math.cos(p), 0, math.sin(p)], [0, 1, 0], [-math.sin(p), 0, math.cos(p)]])
    rz = np.array([[math.cos(y), -math.sin(y), 0], [math.sin(y), math.cos(y), 0], [0, 0, 1]])
    return rz @ ry @ rx


def _urdf_fk(root: ET.Element, q: dict[str, float]) -> dict[str, np.ndarray]:
    """Link origins [m] with pelvis at the world origin, by walking URDF joints (parents listed first)."""
    pose = {"pelvis": (np.zeros(3), np.eye(3))}
    for j in root.findall("joint"):
        o = j.find("origin")
        xyz = np.array([float(v) for v in o.get("xyz").split()])
        rot = _rpy_mat([float(v) for v in o.get("rpy").split()])
        p, r = pose[j.find("parent").get("link")]
        r_child = r @ rot
        if j.get("type") == "revolute":
            axis = np.array([float(v) for v in j.find("axis").get("xyz").split()])
            r_child = r_child @ g1.description._axis_angle_mat(axis, q[j.get("name")])
        pose[j.find("child").get("link")] = (p + r @ xyz, r_child)
    return {k: v[0] for k, v in pose.items()}


@pytest.mark.parametrize("variant", VARIANTS)
def test_urdf_joints_limits_and_kinematics(variant):
    root = ET.fromstring(g1.to_urdf(variant))
    links = {link.get("name") for link in root.findall("link")}
    assert set(g1.body_names(variant)) <= links
    revolute = [j for j in root.findall("joint") if j.get("type") == "revolute"]
    assert [j.get("name") for j in revolute] == g1.joint_names(variant)
    for j, spec in zip(revolute, g1.joints(variant)):
        lim, motor = j.find("limit"), g1.MOTORS[spec.motor]
        got = [float(lim.get(k)) for k in ("lower", "upper", "effort", "velocity")]
        np.testing.assert_allclose(got, [spec.lower, spec.upper, motor.effort_limit, motor.velocity_limit])
    children = [j.find("child").get("link") for j in root.findall("joint")]
    assert len(children) == len(set(children)) == len(links) - 1 and "pelvis" not in children  # a tree
    for link in root.findall("link"):
        if link.get("name") in g1.body_names(variant):
            assert float(link.find("inertial/mass").get("value")) > 0
    # URDF kinematics (rpy origins) agree with MuJoCo's
    m = g1.load_mujoco(variant, floor=False)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(10):
        d.qpos[:] = _random_qpos(m, rng)
        d.qpos[:7] = (0, 0, 0, 1, 0, 0, 0)
        mujoco.mj_kinematics(m, d)
        pos = _urdf_fk(root, dict(zip(g1.joint_names(variant), d.qpos[7:])))
        for i, name in enumerate(g1.body_names(variant)):
            np.testing.assert_allclose(pos[name], d.xpos[i + 1], atol=1e-9)


# ---- agreement with Unitree's published model (Menagerie) ----------------------------------------------------
@pytest.fixture(scope="module")
def menagerie(menagerie_g1_xml) -> mujoco.MjModel:
    """Menagerie's G1 with a floor added (the file itself has none)."""
    spec = mujoco.MjSpec.from_file(str(menagerie_g1_xml))
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1])
    return spec.compile()


def test_mass_and_joints_match_menagerie(menagerie):
    men = menagerie
    ours = g1.load_mujoco(floor=False)
    assert ours.body_mass.sum() == pytest.approx(men.body_mass.sum(), rel=MASS_RTOL)
    assert [ours.joint(i).name for i in range(ours.njnt)] == [men.joint(i).name for i in range(men.njnt)]
    np.testing.assert_allclose(ours.jnt_range, men.jnt_range)
    np.testing.assert_allclose(ours.jnt_actfrcrange, men.jnt_actfrcrange)
    np.testing.assert_allclose(ours.jnt_axis, men.jnt_axis)
    assert [ours.body(i).name for i in range(ours.nbody)] == [men.body(i).name for i in range(men.nbody)]


def test_forward_kinematics_matches_menagerie(menagerie):
    men = menagerie
    ours = g1.load_mujoco(floor=False)
    d_ours, d_men = mujoco.MjData(ours), mujoco.MjData(men)
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(N_FK_SAMPLES):
        q = _random_qpos(ours, rng)
        d_ours.qpos[:], d_men.qpos[:] = q, q
        mujoco.mj_kinematics(ours, d_ours)
        mujoco.mj_kinematics(men, d_men)
        err = np.linalg.norm(d_ours.xpos - d_men.xpos, axis=1)
        assert err.max() < FK_TOL, f"body {ours.body(int(err.argmax())).name} off by {err.max():.4f} m"


def _signed_distance(geom: g1.Geom, points: np.ndarray) -> np.ndarray:
    """Signed distance [N] [m] from body-frame points [N, 3] to a primitive (negative inside)."""
    local = (points - np.asarray(geom.pos)) @ g1.description.quat_to_mat(geom.quat)
    if geom.kind == "sphere":
        return np.linalg.norm(local, axis=1) - geom.size[0]
    if geom.kind == "capsule":
        radius, half = geom.size
        axis_point = np.zeros_like(local)
        axis_point[:, 2] = np.clip(local[:, 2], -half, half)
        return np.linalg.norm(local - axis_point, axis=1) - radius
    excess = np.abs(local) - np.asarray(geom.size)
    return np.linalg.norm(np.maximum(excess, 0.0), axis=1) + np.minimum(excess.max(axis=1), 0.0)


def _mesh_vertices_in_body(model: mujoco.MjModel, geom: int) -> np.ndarray:
    """Vertices [N, 3] [m] of a mesh geom in its body's frame."""
    mesh = model.geom_dataid[geom]
    start = model.mesh_vertadr[mesh]
    verts = model.mesh_vert[start : start + model.mesh_vertnum[mesh]]
    return verts @ g1.description.quat_to_mat(model.geom_quat[geom]).T + model.geom_pos[geom]


COVER_MARGIN = 0.01  # [m] a mesh vertex this far outside every collider of its link counts as uncovered
COVER_MIN_FRACTION = 0.75


def test_colliders_cover_the_link_meshes(menagerie):
    """Each visual mesh of a link with colliders lies mostly inside them (falls touch where they should)."""
    men = menagerie
    for i in range(men.ngeom):
        if men.geom_group[i] != 2 or men.geom_type[i] != mujoco.mjtGeom.mjGEOM_MESH:
            continue  # Menagerie's visual meshes only
        body = men.body(men.geom_bodyid[i]).name
        colliders = [c for c in g1.COLLIDERS if c.body == body and c.name not in g1.foot_sphere_names()]
        if not colliders:
            continue
        points = _mesh_vertices_in_body(men, i)
        dist = np.min([_signed_distance(c, points) for c in colliders], axis=0)
        covered = float(np.mean(dist < COVER_MARGIN))
        mesh = men.mesh(men.geom_dataid[i]).name
        assert covered >= COVER_MIN_FRACTION, f"{body}: colliders cover only {covered:.0%} of mesh {mesh}"


def test_dynamics_match_menagerie(menagerie):
    """Same PD (joints.py gains) from the same stance: both models must move identically (they fall).

    Menagerie's joint friction loss is zeroed and its armature set to the motors', the two things our
    model deliberately does differently; its position actuators are disabled and the torque applied directly.
    """
    men = menagerie
    men.dof_frictionloss[:] = 0.0
    men.dof_armature[6:] = [g1.MOTORS[j.motor].armature for j in g1.JOINTS_29]
    men.actuator_gainprm[:, 0] = 0.0
    men.actuator_biasprm[:, :3] = 0.0
    ours = g1.load_mujoco()
    kp, kd, eff = _pd_gains("29dof")
    q_star = g1.default_joint_pos()
    trajectories = []
    for m, apply in ((ours, "ctrl"), (men, "qfrc")):
        d = mujoco.MjData(m)
        d.qpos[:] = g1.default_qpos()
        traj = []
        for _ in range(int(DYN_TIME / m.opt.timestep)):
            tau = np.clip(kp * (q_star - d.qpos[7:]) - kd * d.qvel[6:], -eff, eff)
            if apply == "ctrl":
                d.ctrl[:] = tau
            else:
                d.qfrc_applied[6:] = tau
            mujoco.mj_step(m, d)
            traj.append(d.qpos.copy())
        trajectories.append(np.array(traj))
    a, b = trajectories
    assert np.abs(a[:, :3] - b[:, :3]).max() < DYN_TOL_POS
    assert np.abs(a[:, 7:] - b[:, 7:]).max() < DYN_TOL_Q
    assert np.linalg.norm(a[-1, :3] - a[0, :3]) > STAND_TOL  # it does fall: the comparison is not trivial


# ---- CLI -----------------------------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bcg_sim.g1.cli", *args], capture_output=True, text=True, timeout=60)


def test_cli_export_and_info(tmp_path):
    for variant in VARIANTS:
        out = tmp_path / f"g1_{variant}.xml"
        r = _cli("export", "--variant", variant, "--format", "mjcf", "-o", str(out))
        assert r.returncode == 0, r.stderr
        assert mujoco.MjModel.from_xml_path(str(out)).nu == len(g1.joints(variant))
        urdf = tmp_path / f"g1_{variant}.urdf"
        r = _cli("export", "--variant", variant, "--format", "urdf", "-o", str(urdf))
        assert r.returncode == 0, r.stderr
        assert ET.parse(urdf).getroot().tag == "robot"
    r = _cli("info", "--variant", "23dof")
    assert r.returncode == 0, r.stderr
    assert f"{g1.total_mass('23dof'):.3f} kg" in r.stdout
    assert all(name in r.stdout for name in g1.joint_names("23dof"))
    assert "waist_roll_joint" not in r.stdout.split("joints (motor order)")[1]


def test_cli_rejects_bad_input(tmp_path):
    r = _cli("export", "--variant", "42dof", "-o", str(tmp_path / "x.xml"))
    assert r.returncode != 0 and "invalid choice" in r.stderr
    r = _cli("export", "--format", "sdf", "-o", str(tmp_path / "x.xml"))
    assert r.returncode != 0 and "invalid choice" in r.stderr
    r = _cli("export", "--format", "urdf", "--no-floor", "-o", str(tmp_path / "x.urdf"))
    assert r.returncode != 0 and "--no-floor" in r.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = _cli("export", "-o", str(blocker / "x.xml"))  # parent is a file
    assert r.returncode != 0 and "cannot write" in r.stderr


def test_cli_export_format_follows_the_extension(tmp_path):
    r = _cli("export", "-o", str(tmp_path / "g1.urdf"))  # no --format: URDF from the extension
    assert r.returncode == 0, r.stderr
    assert ET.parse(tmp_path / "g1.urdf").getroot().tag == "robot"
    r = _cli("export", "-o", str(tmp_path / "g1.xml"))
    assert r.returncode == 0 and mujoco.MjModel.from_xml_path(str(tmp_path / "g1.xml")).nu == 29, r.stderr
    r = _cli("export", "--format", "mjcf", "-o", str(tmp_path / "x.urdf"))  # mismatch: refused, nothing written
    assert r.returncode == 2 and "means urdf" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "x.urdf").exists()
    r = _cli("export", "-o", str(tmp_path / "g1.model"))
    assert r.returncode == 2 and "cannot tell the format" in r.stderr, r.stderr
