"""Warp kernels of bcg_sim: PD actuation with effort limits and penalty sphere-vs-ground contact.

Both are recorded on each control step's wp.Tape, so their adjoints carry gradients from the next state back
to the PD targets and the previous state. Layout: worlds are contiguous blocks in Newton's flat arrays,
`coords_per_world` joint coordinates (7 free-joint + 29 hinge) and `dofs_per_world` DoFs (6 + 29) each;
bodies `bodies_per_world` each. Newton's conventions inside: transforms (p, q xyzw); body twist
(v of the COM in world, omega in world); body_f a world-frame wrench about the COM.
"""

from __future__ import annotations

import warp as wp

# Free joint: 7 coordinates (p, q xyzw) and 6 DoFs (v_com_w, omega_w) come before the hinges.
FREE_COORDS = 7
FREE_DOFS = 6
# Spheres per contact body are visited in a fixed-length (unrolled) loop so the adjoint is a plain
# straight-line replay; model.py refuses bodies with more spheres than this.
MAX_SPHERES_PER_BODY = wp.constant(8)


@wp.kernel
def pd_torque(
    joint_q: wp.array[float],
    joint_qd: wp.array[float],
    target_q: wp.array2d[float],  # [N, J] PD position targets [rad]
    kp: wp.array[float],  # [J] N m/rad
    kd: wp.array[float],  # [J] N m s/rad
    effort_limit: wp.array[float],  # [J] N m
    coords_per_world: int,
    dofs_per_world: int,
    joint_f: wp.array[float],  # out: generalized forces, [N * dofs_per_world]
):
    """tau = clamp(kp (q* - q) - kd qd, +-effort) for each hinge; zero on the free joint (unactuated)."""
    w, d = wp.tid()
    out = w * dofs_per_world + d
    if d < FREE_DOFS:
        joint_f[out] = 0.0
        return
    j = d - FREE_DOFS
    q = joint_q[w * coords_per_world + FREE_COORDS + j]
    qd = joint_qd[out]
    tau = kp[j] * (target_q[w, j] - q) - kd[j] * qd
    joint_f[out] = wp.clamp(tau, -effort_limit[j], effort_limit[j])


@wp.func
def sphere_lowest_point(X: wp.transform, centre_b: wp.vec3, radius: float):
    """Lowest point of a sphere (centre `centre_b` in the body frame of pose X) in the world [m]."""
    return wp.transform_point(X, centre_b) - wp.vec3(0.0, 0.0, radius)


@wp.func
def point_velocity(twist: wp.spatial_vector, r: wp.vec3):
    """World velocity of the material point at r from the COM, for a Newton body twist (v_com_w, omega_w)."""
    return wp.spatial_top(twist) + wp.cross(wp.spatial_bottom(twist), r)


@wp.func
def sphere_ground_force(
    c_w: wp.vec3,  # lowest point of the sphere, world [m]
    v_c: wp.vec3,  # velocity of that material point, world [m/s]
    ke: float,
    kd: float,
    kf: float,
    mu: float,
):
    """Contact force on a sphere whose lowest point is c_w, from the ground plane z = 0 (world, N).

    Normal: f_n = max(ke * pen - kd * v_z, 0) with pen = -c_z (Kelvin-Voigt, never pulling).
    Tangential: regularised Coulomb, f_t = -kf v_t, capped at mu f_n along -v_t.
    """
    pen = -c_w[2]
    f = wp.vec3(0.0)
    if pen > 0.0:
        fn = wp.max(ke * pen - kd * v_c[2], 0.0)
        vt = wp.vec3(v_c[0], v_c[1], 0.0)
        ft = -kf * vt
        limit = mu * fn
        speed_sq = wp.dot(vt, vt)
        # Normalise only in the sliding branch: at rest the viscous branch is smooth with slope kf.
        if kf * kf * speed_sq > limit * limit:
            ft = -vt * (limit / wp.sqrt(speed_sq))
        f = wp.vec3(ft[0], ft[1], fn)
    return f


@wp.kernel
def contact_wrench(
    body_q: wp.array[wp.transform],
    body_qd: wp.array[wp.spatial_vector],
    body_com: wp.array[wp.vec3],
    contact_body: wp.array[int],  # [C] local body index of each contact body
    sphere_start: wp.array[int],  # [C + 1] CSR offsets into the sphere arrays
    sphere_pos_b: wp.array[wp.vec3],  # [S] sphere centres in the body frame [m]
    sphere_radius: wp.array[float],  # [S] [m]
    bodies_per_world: int,
    ke: float,
    kd: float,
    kf: float,
    mu: float,
    body_f: wp.array[wp.spatial_vector],  # out: world wrench about the COM (force, torque)
):
    """Sum of the ground forces on the spheres of one body, as Newton's body_f wrench. One thread per
    (world, contact body): each body's wrench is written once, without atomics, so the adjoint is exact."""
    w, c = wp.tid()
    b = w * bodies_per_world + contact_body[c]
    X = body_q[b]
    com_w = wp.transform_point(X, body_com[b])
    f_tot = wp.vec3(0.0)
    t_tot = wp.vec3(0.0)
    s0 = sphere_start[c]
    n = sphere_start[c + 1] - s0
    for k in range(MAX_SPHERES_PER_BODY):
        if k < n:
            c_w = sphere_lowest_point(X, sphere_pos_b[s0 + k], sphere_radius[s0 + k])
            r = c_w - com_w
            f = sphere_ground_force(c_w, point_velocity(body_qd[b], r), ke, kd, kf, mu)
            f_tot = f_tot + f
            t_tot = t_tot + wp.cross(r, f)
    body_f[b] = wp.spatial_vector(f_tot, t_tot)


@wp.kernel
def foot_contact_stats(
    body_q: wp.array[wp.transform],
    body_qd: wp.array[wp.spatial_vector],
    body_com: wp.array[wp.vec3],
    foot_body: wp.array[int],  # [2] local body index of each foot
    foot_sphere_start: wp.array[int],  # [3] CSR offsets into the sphere arrays
    sphere_pos_b: wp.array[wp.vec3],
    sphere_radius: wp.array[float],
    bodies_per_world: int,
    ke: float,
    kd: float,
    normal_force: wp.array2d[float],  # out [N, 2]: total normal force on the foot [N]
    penetration: wp.array2d[float],  # out [N, 2]: deepest sphere penetration [m] (0 when clear)
    peak_force: wp.array2d[float],  # in/out [N, 2]: running max of normal_force over the control step
):
    """Per-foot diagnostics (not differentiated, launched outside the tape): the same normal law as
    contact_wrench, summed over the foot's sole spheres."""
    w, f = wp.tid()
    b = w * bodies_per_world + foot_body[f]
    X = body_q[b]
    com_w = wp.transform_point(X, body_com[b])
    fn_tot = float(0.0)
    pen_max = float(0.0)
    for s in range(foot_sphere_start[f], foot_sphere_start[f + 1]):
        c_w = sphere_lowest_point(X, sphere_pos_b[s], sphere_radius[s])
        # Normal component of the very force contact_wrench applies (friction does not change it).
        fn_tot += sphere_ground_force(c_w, point_velocity(body_qd[b], c_w - com_w), ke, kd, 0.0, 0.0)[2]
        pen_max = wp.max(pen_max, -c_w[2])
    normal_force[w, f] = fn_tot
    penetration[w, f] = pen_max
    peak_force[w, f] = wp.max(peak_force[w, f], fn_tot)
