// bcg_sim native backend: N G1 worlds, one control step of S substeps, forward and exact reverse mode.
//
// Dynamics: Pinocchio's articulated-body algorithm (O(n) tree recursion, no dense mass matrix); in reverse mode
// the analytic derivatives of its inverse (computeRNEADerivatives) and M^-1 (computeMinverse). Around it,
// written here with their hand-derived adjoints:
//   * penalty sphere-vs-ground contact, the same law as bcg_sim.diffsim.kernels (Kelvin-Voigt normal force,
//     regularised Coulomb friction, force at the sphere's lowest point); its damping optionally implicit (a point
//     mass dt c per sphere), and optionally the normal spring with it (implicit_spring: backward Euler in contact);
//   * PD with effort limits, optionally "stable" (implicit in q and qd: the gain terms go onto the
//     mass-matrix diagonal, so the PD does not limit the substep);
//   * joint-range stops: a one-sided spring-damper past a hinge's range (Newton's law), implicit like the
//     stable PD (its terms on the diagonal while it acts);
//   * semi-implicit Euler on the Lie group: v' = v + dt a, q' = q (+) dt v'  (pinocchio::integrate).
// Layout (pinocchio): q [36] = (p_w, quat x y z w, 29 joints); v [35] = (v_origin in the pelvis frame,
// omega in the pelvis frame, 29 joint rates). Tangent-space gradients inside; the caller converts at the ends.
// C ABI (ctypes): g1dyn_create / g1dyn_forward / g1dyn_backward / g1dyn_destroy. Double precision.

#include "pinocchio/multibody.hpp"
#include "pinocchio/algorithm/aba.hpp"
#include "pinocchio/algorithm/jacobian.hpp"
#include "pinocchio/algorithm/joint-configuration.hpp"
#include "pinocchio/algorithm/kinematics.hpp"
#include "pinocchio/algorithm/rnea-derivatives.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using namespace pinocchio;
using Eigen::Matrix3d;
using Eigen::MatrixXd;
using Eigen::Vector3d;
using Eigen::VectorXd;
using ForceVec = PINOCCHIO_ALIGNED_STD_VECTOR(Force);

struct Params {
  int substeps = 0;
  double dt = 0.0;
  double ke = 0.0, kd = 0.0, kf = 0.0, mu = 0.0;
  int stable_pd = 0;
  int implicit_contact = 0;  // contact damping implicit (see implicit_mass)
  int implicit_spring = 0;   // ...and the normal spring with it: backward Euler in contact (see normal_damping)
  int spring_normal_only = 1;  // its implicit excess along the normal only (1) or as an isotropic point mass (0)
  double spring_theta = 1.0;   // implicit_spring's weight on the end-of-substep penetration (see normal_damping)
  double gravity = 9.81;
  VectorXd kp, kd_pd, effort;  // [29]
  VectorXd lim_lo, lim_hi;     // [29] joint ranges (empty: no stops)
  double lim_ke = 0.0, lim_kd = 0.0;
  VectorXd armature;           // [35] base armature (zero on the free joint)
  std::vector<int> sph_joint;  // [S] pinocchio joint of each sphere
  std::vector<Vector3d> sph_pos;  // [S] centre in the joint (= body) frame
  std::vector<double> sph_rad;    // [S]
  int foot_start[3] = {0, 0, 0};  // spheres [foot_start[f], foot_start[f+1]) belong to foot f
  std::vector<int> body_joint;     // [B] joint of each output body (the caller's body order)
  std::vector<Vector3d> body_com;  // [B] its COM in the body frame
};

// Per contact joint: the DoFs of its support chain and each one's depth (0 = free joint, shared by its 6 DoFs).
struct Chain {
  std::vector<int> dof;
  std::vector<int> depth;
  std::vector<int> parent_joint;  // joint whose world twist precedes this DoF (0 = none: free joint)
  std::vector<int> joint;         // joint of this DoF
};

struct Sim {
  Model model;
  Params p;
  std::vector<Chain> chain;  // per joint
  std::vector<std::vector<int>> anc;  // per joint: its support joints, itself first, down to the free joint (1)
  std::vector<Vector3d> axis;         // per hinge joint: its axis in the joint frame
  int nq = 0, nv = 0, nj = 0;
};

constexpr int kMaxActive = 64;  // contact spheres the reverse of the normal-only spring handles (the G1 has 16)
using SmallMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, 0, kMaxActive, kMaxActive>;
using SmallVec = Eigen::Matrix<double, Eigen::Dynamic, 1, 0, kMaxActive, 1>;

struct Work {  // per thread
  Model model;  // its own copy: the stable PD puts per-world gains on the armature
  Params p;     // its own copy: the per-world constants (friction, PD gains) of the world it runs (set_world)
  PINOCCHIO_ALIGNED_STD_VECTOR(Inertia) base;  // [njoints] inertias of that world, before implicit-contact masses
  Data dk, dd;
  ForceVec fext;
  VectorXd tau, aug, dtau_q, dtau_v, dtau_t, a, vnext, qnext, u, gu, ga, lam, tmp;
  MatrixXd J0, J1, dTc_q, dTc_v, Minv;
  std::vector<Motion> Vw;
  std::vector<int> touched;  // joints whose inertia carries implicit-contact masses this substep
  // implicit_spring: the spheres whose normal carries the implicit term, its rows and multipliers
  std::vector<int> act;
  MatrixXd Jn, Y;  // [max spheres, nv], [nv, max spheres]: the first n_c rows / columns are used
  VectorXd lamn, a0;
  SmallMat G;
  SmallVec rhs;
  std::vector<Motion> Aw;          // world spatial accelerations (accel_chain)
  std::vector<int> mark, bodies;  // accel_chain's joints done (== stamp), the contact bodies
  int stamp = 0;
  // aba_normal's articulated inertias, bias forces and joint terms
  std::vector<Inertia::Matrix6, Eigen::aligned_allocator<Inertia::Matrix6>> Ia;
  std::vector<Force> pA;
  std::vector<Motion> cA;
  std::vector<Motion::Vector6, Eigen::aligned_allocator<Motion::Vector6>> Uh;
  VectorXd uh, dh;
  explicit Work(const Sim& s)
      : model(s.model), p(s.p), base(s.model.inertias.begin(), s.model.inertias.end()), dk(s.model), dd(s.model),
        fext(s.model.njoints, Force::Zero()) {
    int ns = (int)s.p.sph_joint.size();
    lamn.setZero(ns);
    a0.setZero(s.nv);
    Jn.setZero(ns, s.nv);
    Y.setZero(s.nv, ns);
    Aw.assign(s.model.njoints, Motion::Zero());
    mark.assign(s.model.njoints, 0);
    Ia.resize(s.model.njoints);
    pA.assign(s.model.njoints, Force::Zero());
    cA.assign(s.model.njoints, Motion::Zero());
    Uh.resize(s.model.njoints);
    uh.setZero(s.nv);
    dh.setZero(s.nv);
    int nv = s.nv, nj = s.nv - 6;
    tau.setZero(nv); aug.setZero(nv); dtau_q.setZero(nj); dtau_v.setZero(nj); dtau_t.setZero(nj);
    a.setZero(nv); vnext.setZero(nv); qnext.setZero(s.nq); u.setZero(nv); gu.setZero(nv); ga.setZero(nv);
    lam.setZero(nv); tmp.setZero(nv);
    J0.setZero(nv, nv); J1.setZero(nv, nv); dTc_q.setZero(nv, nv); dTc_v.setZero(nv, nv); Minv.setZero(nv, nv);
    Vw.resize(s.model.njoints);
  }
};

inline Motion cross(const Motion& m1, const Motion& m2) { return m1.cross(m2); }

// Normal damping of the explicit part of the law. With implicit_spring the normal spring acts on the
// penetration theta of the way to the end of the substep, pen' = pen - theta dt vz': ke pen' - kd vz' =
// ke pen - (kd + theta dt ke) vz', i.e. a damping kd + theta dt ke on the end-of-substep normal velocity
// (theta dt ke is the scheme's numerical damping: backward Euler at theta 1, the trapezoidal rule's half at 0.5,
// which is still unconditionally stable for the linear spring). Its explicit part is ke pen - (kd + theta dt ke) vz;
// the rest, -(kd + theta dt ke) dt az, is the implicit mass below.
inline double normal_damping(const Params& p) {
  return p.kd + (p.implicit_spring ? p.spring_theta * p.dt * p.ke : 0.0);
}

// Ground force on a sphere whose lowest point is cw moving at vel (world); F_c, F_v its Jacobians.
// Returns false when the sphere exerts no force.
bool contact_force(const Params& p, const Vector3d& cw, const Vector3d& vel, Vector3d& f, Matrix3d* Fc,
                   Matrix3d* Fv) {
  double pen = -cw.z();
  if (pen <= 0.0) return false;
  // Active while the base law ke pen - kd vz pushes (the same set with and without implicit_spring). With it the
  // explicit part ke pen - (kd + theta dt ke) vz may be negative (a sphere moving up, which the implicit part
  // then decelerates): switching the sphere off on that sign made the feet chatter on/off every other substep at
  // 4-5 ms (measured), so it is not a condition; the friction cone uses its positive part.
  if (p.ke * pen - p.kd * vel.z() <= 0.0) return false;
  const double kdn = normal_damping(p);
  double fn = p.ke * pen - kdn * vel.z();
  bool cone_open = fn > 0.0;  // false: friction limit 0 (implicit_spring only)
  Eigen::Vector2d vt(vel.x(), vel.y());
  double limit = cone_open ? p.mu * fn : 0.0;
  double speed_sq = vt.squaredNorm();
  bool sliding = speed_sq > 0.0 && p.kf * p.kf * speed_sq > limit * limit;
  Eigen::Vector2d ft;
  Eigen::Matrix2d dft_dvt;
  Eigen::Vector2d dft_dfn = Eigen::Vector2d::Zero();
  if (sliding) {  // capped at mu fn along -vt
    double s = std::sqrt(speed_sq);
    Eigen::Vector2d vh = vt / s;
    ft = -limit * vh;
    dft_dvt = -(limit / s) * (Eigen::Matrix2d::Identity() - vh * vh.transpose());
    if (cone_open) dft_dfn = -p.mu * vh;
  } else {  // viscous branch, slope kf
    ft = -p.kf * vt;
    dft_dvt = -p.kf * Eigen::Matrix2d::Identity();
  }
  f << ft.x(), ft.y(), fn;
  if (Fc) {
    Fc->setZero();
    (*Fc)(0, 2) = dft_dfn.x() * -p.ke;
    (*Fc)(1, 2) = dft_dfn.y() * -p.ke;
    (*Fc)(2, 2) = -p.ke;
  }
  if (Fv) {
    Fv->setZero();
    Fv->topLeftCorner<2, 2>() = dft_dvt;
    (*Fv)(0, 2) = dft_dfn.x() * -kdn;
    (*Fv)(1, 2) = dft_dfn.y() * -kdn;
    (*Fv)(2, 2) = -kdn;
  }
  return true;
}

// PD torque on the hinges (free joint unactuated) and, for the stable PD, the armature it adds.
// Writes w.tau (hinges), w.aug, and the diagonal derivatives dtau/dq, dtau/dv, dtau/dtarget.
void pd(const Sim& s, Work& w, const VectorXd& q, const VectorXd& v, const double* target) {
  const Params& p = w.p;
  int nj = s.nv - 6;
  w.tau.setZero();
  w.aug.setZero();
  for (int j = 0; j < nj; ++j) {
    double qj = q[7 + j], vj = v[6 + j];
    double look = p.stable_pd ? p.dt * vj : 0.0;  // implicit: error at the end of the substep
    double t = p.kp[j] * (target[j] - qj - look) - p.kd_pd[j] * vj;
    if (std::abs(t) >= p.effort[j]) {  // saturated: constant torque, no implicit gain
      w.tau[6 + j] = t > 0 ? p.effort[j] : -p.effort[j];
      w.dtau_q[j] = w.dtau_v[j] = w.dtau_t[j] = 0.0;
    } else {
      w.tau[6 + j] = t;
      w.dtau_q[j] = -p.kp[j];
      w.dtau_v[j] = -(p.kd_pd[j] + (p.stable_pd ? p.dt * p.kp[j] : 0.0));
      w.dtau_t[j] = p.kp[j];
      if (p.stable_pd) w.aug[6 + j] = p.dt * p.kd_pd[j] + p.dt * p.dt * p.kp[j];
    }
    if (p.lim_lo.size() == 0) continue;
    // Joint-range stop, active while q is past the range at the substep's start: f = -ke (q + dt v' - limit)
    // - kd v' on the end-of-substep state (implicit, unconditionally stable; ke 1e4 on a 0.01 kg m^2 rotor
    // would bound an explicit step at 2 ms).
    double over = qj > p.lim_hi[j] ? qj - p.lim_hi[j] : (qj < p.lim_lo[j] ? qj - p.lim_lo[j] : 0.0);
    if (over != 0.0) {
      w.tau[6 + j] += -p.lim_ke * (over + p.dt * vj) - p.lim_kd * vj;
      w.dtau_q[j] += -p.lim_ke;
      w.dtau_v[j] += -(p.lim_kd + p.dt * p.lim_ke);
      w.aug[6 + j] += p.dt * p.lim_kd + p.dt * p.dt * p.lim_ke;
    }
  }
}

// Implicit contact damping. A sphere in contact feels f = f(v_c) - c dt a_c: its damping c = min(kd, kf)
// acts on the end-of-substep velocity (backward Euler), isotropically. That is exactly the force of a point
// mass dt c at the sphere centre (its weight cancelled by an upward force), so adding the mass to the body's
// inertia keeps the O(n) ABA, and Pinocchio's derivatives see it as the constant inertia it is within the
// substep. It lifts the bound the sole's light tangential effective mass puts on an explicit damping
// (docs/sim.md, "Native backend"). Applied to sliding spheres too (where friction is capped and the term is
// a small extra tangential inertia): switching it off at the stick/slip boundary made the dynamics
// discontinuous there and the multi-step gradients 10-100x off at dt >= 1 ms (measured).
// With implicit_spring the normal law's implicit part is -(kd + theta dt ke) dt a_z. spring_normal_only: the
// isotropic point mass keeps dt min(kd, kf) and the rest, normal_excess(), acts along the normal only
// (aba_normal: a point mass that moves along the normal only), so the tangential direction keeps the friction
// law's implicit term.
// Else the point mass is dt (kd + theta dt ke), isotropic: the tangential direction gets -(kd + theta dt ke) dt a_t
// where the law has -kf dt a_t, an extra inertia dt (kd + theta dt ke - kf) per sphere (cheaper; docs/sim.md).
double implicit_mass(const Params& p) {
  if (!p.implicit_contact) return 0.0;
  return p.implicit_spring && !p.spring_normal_only ? p.dt * normal_damping(p) : p.dt * std::min(p.kd, p.kf);
}
double normal_excess(const Params& p) {
  if (p.implicit_spring) return p.spring_normal_only ? p.dt * normal_damping(p) - implicit_mass(p) : 0.0;
  // A friction slope below kd (task.randomize.friction_slope_scale): the isotropic mass carries dt kf and the
  // normal's remaining damping kd - kf goes here. Left explicit, it would bound the substep (the linear bound at
  // kappa 300 falls to 1.7 ms for kf = kd / 2; at kf = kd / 5 the soles chatter at 2 ms, tests).
  return p.implicit_contact ? p.dt * std::max(p.kd - p.kf, 0.0) : 0.0;
}

void restore_inertias(const Sim& s, Work& w) {
  for (int b : w.touched) w.model.inertias[b] = w.base[b];
  w.touched.clear();
}

void add_implicit_mass(Work& w, int b, const Vector3d& c, double m) {
  if (std::find(w.touched.begin(), w.touched.end(), b) == w.touched.end()) w.touched.push_back(b);
  w.model.inertias[b] += Inertia(m, c, Symmetric3::Zero());
}

// Inertia from a row (mass, com 3, Ixx Ixy Iyy Ixz Iyz Izz about the com): g1dyn_create and the per-world
// inertias build it the same way, so a world given the model's own row is bit-identical to it.
Inertia inertia_row(const double* I) {
  Symmetric3 Ic(I[4], I[5], I[6], I[7], I[8], I[9]);  // pinocchio order: xx xy yy xz yz zz
  return Inertia(I[0], Vector3d(I[1], I[2], I[3]), Ic);
}

// Per-world constants of the dynamics for one g1dyn_forward / g1dyn_backward call (each pointer nullable: the
// model's own value for every world). Rows follow the call's worlds. Constants: no gradient w.r.t. them.
struct WorldArgs {
  const double* mu = nullptr;     // [n] Coulomb friction coefficient
  const double* kf = nullptr;     // [n] slope of the regularised friction below the cap [N s/m]
  const double* kp = nullptr;     // [n, 29] PD stiffness [N m/rad]
  const double* kd = nullptr;     // [n, 29] the PD law's damping as g1dyn_create takes it [N m s/rad]
  int ninert = 0;                 // K joints whose inertia is per world
  const int* inert_joint = nullptr;  // [K] their pinocchio joint index
  const double* inert = nullptr;  // [n, K, 10] their inertia rows (as g1dyn_create's)
};

// Load world i's constants into the thread's Params and model copy.
void set_world(const Sim& s, Work& w, const WorldArgs& a, int i) {
  int nh = s.nv - 6;
  if (a.mu) w.p.mu = a.mu[i];
  if (a.kf) w.p.kf = a.kf[i];
  if (a.kp) w.p.kp = Eigen::Map<const VectorXd>(a.kp + (size_t)i * nh, nh);
  if (a.kd) w.p.kd_pd = Eigen::Map<const VectorXd>(a.kd + (size_t)i * nh, nh);
  if (a.inert && a.ninert > 0) {
    restore_inertias(s, w);  // drop the previous world's implicit-contact masses before its base changes
    for (int k = 0; k < a.ninert; ++k) {
      int j = a.inert_joint[k];
      w.base[j] = inertia_row(a.inert + ((size_t)i * a.ninert + k) * 10);
      w.model.inertias[j] = w.base[j];
    }
  }
}

struct FootStats {
  double fn[2] = {0, 0};
  double pen[2] = {0, 0};
};

// Contact as local joint wrenches (forward). Needs w.dk.oMi and w.dk.v (forwardKinematics(q, v)).
void contact_fext(const Sim& s, Work& w, FootStats& st, bool apply_implicit = true) {
  const Params& p = w.p;
  restore_inertias(s, w);
  w.act.clear();
  for (auto& f : w.fext) f.setZero();
  st = FootStats();
  for (size_t k = 0; k < p.sph_joint.size(); ++k) {
    int b = p.sph_joint[k];
    const SE3& M = w.dk.oMi[b];
    Vector3d x = M.translation() + M.rotation() * p.sph_pos[k];
    Vector3d cw = x - Vector3d(0, 0, p.sph_rad[k]);
    int foot = (int)k < p.foot_start[1] ? 0 : ((int)k < p.foot_start[2] ? 1 : -1);
    if (foot >= 0) st.pen[foot] = std::max(st.pen[foot], -cw.z());
    if (cw.z() >= 0.0) continue;
    Motion Vb = M.act(w.dk.v[b]);
    Vector3d vel = Vb.linear() + Vb.angular().cross(cw);
    Vector3d f;
    if (!contact_force(p, cw, vel, f, nullptr, nullptr)) continue;
    if (foot >= 0) st.fn[foot] += std::max(f.z(), 0.0);
    Vector3d fl = M.rotation().transpose() * f;
    Vector3d nl = M.rotation().transpose() * (cw - M.translation()).cross(f);
    w.fext[b].linear() += fl;
    w.fext[b].angular() += nl;
    if (normal_excess(p) > 0.0) w.act.push_back((int)k);
    double m = implicit_mass(p);
    if (m > 0.0 && apply_implicit) {
      add_implicit_mass(w, b, p.sph_pos[k], m);
      Vector3d lift_l = M.rotation().transpose() * Vector3d(0, 0, m * p.gravity);  // cancels its weight
      w.fext[b].linear() += lift_l;
      w.fext[b].angular() += p.sph_pos[k].cross(lift_l);
    }
  }
}

// w.Jn [nc, nv] (its first nc rows): the world-z rows of the Jacobians of the centres of the spheres in w.act
// (joint Jacobians in w.dk computed for the current q).
void normal_rows(const Sim& s, Work& w, int nc) {
  const Params& p = w.p;
  w.Jn.topRows(nc).setZero();
  for (int i = 0; i < nc; ++i) {
    int k = w.act[i], b = p.sph_joint[k];
    const SE3& M = w.dk.oMi[b];
    Vector3d x = M.translation() + M.rotation() * p.sph_pos[k];
    const Chain& ch = s.chain[b];
    for (size_t d = 0; d < ch.dof.size(); ++d) {
      Motion S(w.dk.J.col(ch.dof[d]));
      w.Jn(i, ch.dof[d]) = (S.linear() + S.angular().cross(x)).z();
    }
  }
}

// Solve of a small SPD system A x = b in place (Cholesky, no allocation): A [n, n] (lower triangle read and
// overwritten), b -> x.
void spd_solve(SmallMat& A, SmallVec& b, int n) {
  for (int j = 0; j < n; ++j) {
    double d = A(j, j);
    for (int k = 0; k < j; ++k) d -= A(j, k) * A(j, k);
    d = std::sqrt(d);
    A(j, j) = d;
    for (int i = j + 1; i < n; ++i) {
      double t = A(i, j);
      for (int k = 0; k < j; ++k) t -= A(i, k) * A(j, k);
      A(i, j) = t / d;
    }
  }
  for (int i = 0; i < n; ++i) {
    double t = b[i];
    for (int k = 0; k < i; ++k) t -= A(i, k) * b[k];
    b[i] = t / A(i, i);
  }
  for (int i = n - 1; i >= 0; --i) {
    double t = b[i];
    for (int k = i + 1; k < n; ++k) t -= A(k, i) * b[k];
    b[i] = t / A(i, i);
  }
}

// The forward of the normal-only implicit spring (normal_excess() e > 0, spheres in w.act): each sphere in contact
// feels lam_i = -e (n . xdd_i), xdd_i the classical acceleration of its centre x_i = Jn_i a + gam_i, with
// M' a = tau - h + Jn^T lam (M': the mass matrix with the armature and the isotropic masses), i.e.
// (diag(1/e) + Jn M'^-1 Jn^T) lam = -(Jn a0 + gam) for a0 the acceleration without lam. Eliminating lam instead:
// (M' + e Jn^T Jn) a = tau - h - e Jn^T gam, the dynamics of the robot with a point mass e at each centre that moves
// along the normal only. On its body (local frame; normal n = R^T z, centre r, wrench direction d = (n, r x n))
// that is the rank-one inertia e d d^T and the bias force e d (n . (w x (v + w x r)) + g_z) (the velocity-product
// part of xdd, and gravity, which the ABA carries as an upward root acceleration), so the ABA's O(n) recursion
// solves it in one pass: no mass matrix, no n_c x n_c system. This is Pinocchio's aba (LOCAL convention) written
// out with those inertias, after w.dk holds the kinematics of (q, v) (forwardKinematics, which aba would redo) and
// with w.fext, w.tau, w.model's inertias and armature set as for aba. Out: a.
void aba_normal(const Sim& s, Work& w, const VectorXd& v, VectorXd& a) {
  const Params& p = w.p;
  const Model& m = w.model;
  const double e = normal_excess(p);
  const double gz = m.gravity.linear().z();
  const int nj = m.njoints;
  for (int i = 1; i < nj; ++i) {  // pass 1: velocity-product accelerations, body inertias and bias forces
    const Motion& vi = w.dk.v[i];
    if (i == 1) {
      w.cA[i].setZero();  // v x vJ = v x v
    } else {
      w.cA[i] = cross(vi, Motion(Vector3d::Zero(), s.axis[i] * v[m.idx_vs[i]]));
    }
    w.Ia[i] = m.inertias[i].matrix();
    w.pA[i] = vi.cross(m.inertias[i] * vi) - w.fext[i];
  }
  for (int k : w.act) {  // the normal point masses
    int b = p.sph_joint[k];
    const Vector3d& r = p.sph_pos[k];
    Vector3d n = w.dk.oMi[b].rotation().transpose().col(2);
    Motion::Vector6 d;
    d << n, r.cross(n);
    const Motion& vb = w.dk.v[b];
    Vector3d om = vb.angular();
    w.Ia[b].noalias() += e * d * d.transpose();
    w.pA[b].toVector() += e * (n.dot(om.cross(vb.linear() + om.cross(r))) + gz) * d;
  }
  for (int i = nj - 1; i > 1; --i) {  // pass 2, hinges: U = I^A S, D = S^T U + armature, u = tau - S^T p^A
    const int iv = (int)m.idx_vs[i], parent = (int)m.parents[i];
    const Vector3d& ax = s.axis[i];
    Inertia::Matrix6& Ia = w.Ia[i];
    Motion::Vector6& U = w.Uh[i];
    U.noalias() = Ia.middleCols<3>(Motion::ANGULAR) * ax;
    double Dinv = 1.0 / (ax.dot(U.tail<3>()) + m.armature[iv]);
    double u = w.tau[iv] - ax.dot(w.pA[i].angular());
    w.dh[iv] = Dinv;
    w.uh[iv] = u;
    Ia.noalias() -= (Dinv * U) * U.transpose();
    Force pa(w.pA[i].toVector() + Ia * w.cA[i].toVector() + (Dinv * u) * U);
    if (parent > 0) {
      w.Ia[parent] += impl::internal::SE3actOn<double>::run(w.dk.liMi[i], Ia);
      w.pA[parent] += w.dk.liMi[i].act(pa);
    }
  }
  // the free joint (S = identity): its 6 x 6 D = I^A + armature, u = tau - p^A
  Inertia::Matrix6 D = w.Ia[1];
  D.diagonal() += m.armature.head<6>();
  Eigen::LLT<Inertia::Matrix6> llt(D);
  Motion a1 = w.dk.liMi[1].actInv(Motion(-m.gravity.toVector()));  // the root's parent: -gravity
  Motion::Vector6 x = llt.solve(w.tau.head<6>() - w.pA[1].toVector() - w.Ia[1] * a1.toVector());
  a.head<6>() = x;
  w.cA[1] = Motion(a1.toVector() + x);  // from here cA holds the spatial accelerations less gravity
  for (int i = 2; i < nj; ++i) {  // pass 3: a_i = liMi^-1 a_parent + c_i, ddq_i = D^-1 (u_i - U^T a_i)
    const int iv = (int)m.idx_vs[i];
    Motion ai = w.dk.liMi[i].actInv(w.cA[m.parents[i]]) + w.cA[i];
    double xi = w.dh[iv] * (w.uh[iv] - w.Uh[i].dot(ai.toVector()));
    a[iv] = xi;
    ai.angular() += s.axis[i] * xi;
    w.cA[i] = ai;
  }
}

// One substep forward: (q, v) -> (qn, vn). Foot stats of the state (q, v).
void substep_forward(const Sim& s, Work& w, const VectorXd& q, const VectorXd& v, const double* target,
                     VectorXd& qn, VectorXd& vn, FootStats& st) {
  forwardKinematics(w.model, w.dk, q, v);
  contact_fext(s, w, st);
  pd(s, w, q, v, target);
  w.model.armature = w.p.armature + w.aug;
  if (normal_excess(w.p) > 0.0 && !w.act.empty()) {  // normal-only implicit spring in contact: one pass
    aba_normal(s, w, v, w.a0);
  } else {
    aba(w.model, w.dd, q, v, w.tau, w.fext);
    w.a0 = w.dd.ddq;
  }
  vn = v + w.p.dt * w.a0;
  integrate(w.model, q, w.p.dt * vn, qn);
}

// World spatial accelerations w.Aw of b's support joints at the substep's a = w.a0 (those not yet computed
// since the last ++w.stamp): A_j = A_parent + sum over j's DoFs of S a + (V_j x S) v (world S = w.dk.J's columns,
// V_j = w.Vw[j]; kinematics() of (q, v)).
void accel_chain(const Sim& s, Work& w, int b, const VectorXd& v) {
  for (auto it = s.anc[b].rbegin(); it != s.anc[b].rend(); ++it) {
    int j = *it;
    if (w.mark[j] == w.stamp) continue;
    w.mark[j] = w.stamp;
    int parent = (int)s.model.parents[j];
    Motion::Vector6 A = parent > 0 ? w.Aw[parent].toVector() : Motion::Vector6::Zero();
    int idx = (int)s.model.idx_vs[j], nvj = (int)s.model.nvs[j];
    for (int d = idx; d < idx + nvj; ++d) {
      Motion S(w.dk.J.col(d));
      A += S.toVector() * w.a0[d] + cross(w.Vw[j], S).toVector() * v[d];
    }
    w.Aw[j] = Motion(A);
  }
}

// Generalised contact force and its tangent Jacobians dTc/dq, dTc/dv at (q, v). Needs w.dk.oMi, w.dk.v,
// w.dk.J (world) and w.Vw (world twists).
void contact_tau_jac(const Sim& s, Work& w, const VectorXd& v, VectorXd& tau_c) {
  const Params& p = w.p;
  const double e = normal_excess(p);
  w.lamn.setZero();
  w.act.clear();
  restore_inertias(s, w);
  w.dTc_q.setZero();
  w.dTc_v.setZero();
  Matrix3d Fc, Fv;
  std::vector<Vector3d> Jc, Jx;
  for (size_t k = 0; k < p.sph_joint.size(); ++k) {
    int b = p.sph_joint[k];
    const SE3& M = w.dk.oMi[b];
    Vector3d x = M.translation() + M.rotation() * p.sph_pos[k];
    Vector3d cw = x - Vector3d(0, 0, p.sph_rad[k]);
    if (cw.z() >= 0.0) continue;
    const Motion& Vb = w.Vw[b];
    Vector3d vel = Vb.linear() + Vb.angular().cross(cw);
    Vector3d f;
    if (!contact_force(p, cw, vel, f, &Fc, &Fv)) continue;
    const Chain& ch = s.chain[b];
    size_t n = ch.dof.size();
    double m_imp = implicit_mass(p);
    if (m_imp > 0.0) add_implicit_mass(w, b, p.sph_pos[k], m_imp);
    if (e > 0.0) {  // implicit_spring's normal multiplier of this sphere: lam = -e (z . xdd) at the substep's a
      accel_chain(s, w, b, v);
      const Motion& A = w.Aw[b];
      Vector3d xd = Vb.linear() + Vb.angular().cross(x);
      w.lamn[k] = -e * (A.linear() + A.angular().cross(x) + Vb.angular().cross(xd)).z();
      w.act.push_back((int)k);
    }
    // constant world force at the body-fixed centre x: the isotropic mass's weight cancelled, and the normal
    // implicit term of implicit_spring (w.lamn, the forward's multiplier of this state)
    Vector3d lift(0, 0, m_imp * p.gravity + w.lamn[k]);
    Jc.resize(n);
    Jx.resize(n);
    for (size_t i = 0; i < n; ++i) {
      Motion Sj(w.dk.J.col(ch.dof[i]));
      Jc[i] = Sj.linear() + Sj.angular().cross(cw);
      Jx[i] = Sj.linear() + Sj.angular().cross(x);
      tau_c[ch.dof[i]] += Jc[i].dot(f) + Jx[i].dot(lift);
    }
    for (size_t kk = 0; kk < n; ++kk) {
      int dk_ = ch.dof[kk];
      Motion Sk(w.dk.J.col(dk_));
      Vector3d FvJ = Fv * Jc[kk];
      // d(body twist)/d(dof kk): Sk x (twist accumulated after it in the chain)
      Motion after = ch.parent_joint[kk] == 0 ? Vb : Motion(Vb - w.Vw[ch.parent_joint[kk]]);
      Motion dVb = cross(Sk, after);
      const Vector3d& dcw = Jx[kk];
      Vector3d dvel = dVb.linear() + dVb.angular().cross(cw) + Vb.angular().cross(dcw);
      Vector3d df = Fc * dcw + Fv * dvel;
      for (size_t jj = 0; jj < n; ++jj) {
        int dj = ch.dof[jj];
        Motion Sj(w.dk.J.col(dj));
        w.dTc_v(dj, dk_) += Jc[jj].dot(FvJ);
        double term = Jc[jj].dot(df) + Sj.angular().cross(dcw).dot(f + lift);
        bool moves = ch.depth[kk] < ch.depth[jj] || (ch.depth[kk] == 0 && ch.depth[jj] == 0);
        if (moves) {  // the axis of dof jj is carried by dof kk
          Motion dS = cross(Sk, Sj);
          term += (dS.linear() + dS.angular().cross(cw)).dot(f) + (dS.linear() + dS.angular().cross(x)).dot(lift);
        }
        w.dTc_q(dj, dk_) += term;
      }
    }
  }
}

// Kinematics of the state (q, v) the body outputs and their adjoint need: oMi, v, world Jacobian, world twists.
void kinematics(Work& w, const VectorXd& q, const VectorXd& v) {
  forwardKinematics(w.model, w.dk, q, v);
  computeJointJacobians(w.model, w.dk);
  for (int i = 1; i < w.model.njoints; ++i) w.Vw[i] = w.dk.oMi[i].act(w.dk.v[i]);
}

// lam's own dependence on (q, v) at fixed a: adds the gradient of phi = sum_i c_i z . xdd_i (c_i = -e lbar_i,
// w.rhs) to gq, gv, xdd_i the classical acceleration of sphere centre x_i. In world spatial quantities of its body
// (twist V = (v, w), acceleration A = (a, al), both at the world origin), xdd(x) = a + al x x + w x v + w x (w x x)
// is affine in x, so a body's spheres sum to phi_b = C z.(a + w x v) + z.(al x P + w x (w x P)) with C = sum c_i,
// P = sum c_i x_i. Along the body's support chain, a DoF k (world axis S_k, its joint's twist V_k, its parent
// body's V_p, A_p; zero for the free joint) moves the chain after it rigidly:
//   dV/dq_k = S_k x (V - V_p),  dA/dq_k = S_k x (A - A_p) - (S_k x V_p) x (V - V_p),  dx/dq_k = S_k at x,
//   dV/dv_k = S_k,              dA/dv_k = V_k x S_k + S_k x (V - V_p)
// (A is sum_j S_j a_j + (V_j x S_j) v_j over the chain; the Jacobi identity folds the sum). Needs w.dk.J, w.Vw,
// w.Aw of (q, v, a). One pass over each contact body's chain (12 DoFs for a foot).
void lam_dependence(const Sim& s, Work& w, int nc, double e, VectorXd& gq, VectorXd& gv) {
  const Params& p = w.p;
  const Vector3d z = Vector3d::UnitZ();
  w.bodies.clear();
  for (int i = 0; i < nc; ++i)
    if (std::find(w.bodies.begin(), w.bodies.end(), p.sph_joint[w.act[i]]) == w.bodies.end())
      w.bodies.push_back(p.sph_joint[w.act[i]]);
  for (int b : w.bodies) {
    double C = 0.0;
    Vector3d P = Vector3d::Zero();
    const SE3& M = w.dk.oMi[b];
    for (int i = 0; i < nc; ++i) {
      int k = w.act[i];
      if (p.sph_joint[k] != b) continue;
      double c = -e * w.rhs[i];
      C += c;
      P += c * (M.translation() + M.rotation() * p.sph_pos[k]);
    }
    const Motion& V = w.Vw[b];
    const Motion& A = w.Aw[b];
    const Vector3d om = V.angular(), vo = V.linear(), al = A.angular();
    const Vector3d wP = om.cross(P);
    const Chain& ch = s.chain[b];
    for (size_t kk = 0; kk < ch.dof.size(); ++kk) {
      int dof = ch.dof[kk], pj = ch.parent_joint[kk];
      Motion Sk(w.dk.J.col(dof));
      Motion Vrel = pj == 0 ? V : Motion(V - w.Vw[pj]);
      // q
      Motion dV = cross(Sk, Vrel);
      Motion dA = pj == 0 ? cross(Sk, A) : Motion(cross(Sk, Motion(A - w.Aw[pj])) - cross(cross(Sk, w.Vw[pj]), Vrel));
      Vector3d dP = C * Sk.linear() + Sk.angular().cross(P);
      Vector3d dw = dV.angular();
      gq[dof] += C * z.dot(dA.linear() + dw.cross(vo) + om.cross(dV.linear())) +
                 z.dot(dA.angular().cross(P) + al.cross(dP) + dw.cross(wP) + om.cross(dw.cross(P)) +
                       om.cross(om.cross(dP)));
      // v
      Motion dAv = cross(w.Vw[ch.joint[kk]], Sk) + cross(Sk, Vrel);
      dw = Sk.angular();
      gv[dof] += C * z.dot(dAv.linear() + dw.cross(vo) + om.cross(Sk.linear())) +
                 z.dot(dAv.angular().cross(P) + dw.cross(wP) + om.cross(dw.cross(P)));
    }
  }
}

// One substep backward. In: gq (tangent at qn), gv (at vn). Out (overwritten): gq (tangent at q),
// gv (at v); g_target accumulated.
void substep_backward(const Sim& s, Work& w, const VectorXd& q, const VectorXd& v, const VectorXd& vn,
                      const double* target, VectorXd& gq, VectorXd& gv, double* g_target) {
  const Params& p = w.p;
  int nj = s.nv - 6;
  w.u = p.dt * vn;
  dIntegrate(w.model, q, w.u, w.J0, ARG0);
  dIntegrate(w.model, q, w.u, w.J1, ARG1);
  w.gu.noalias() = w.J1.transpose() * gq;
  w.tmp.noalias() = w.J0.transpose() * gq;
  gq = w.tmp;
  gv += p.dt * w.gu;  // gradient at vn
  w.ga = p.dt * gv;   // vn = v + dt a

  double e = normal_excess(p);
  kinematics(w, q, v);
  w.a0 = (vn - v) / p.dt;  // the substep's acceleration
  if (e > 0.0) ++w.stamp;  // the normal multipliers (contact_tau_jac) need w.Aw at a0: none computed yet
  pd(s, w, q, v, target);
  contact_tau_jac(s, w, v, w.tau);  // adds the contact force (and the normal multipliers) to w.tau
  w.model.armature = p.armature + w.aug;
  // a = M^-1 (tau - b(q, v)) at fixed tau: da/dq = -M^-1 dRNEA/dq (at a), the same for v. RNEA's derivatives
  // and M^-1 cost two thirds of computeABADerivatives, which also forms the two dense products M^-1 dRNEA/d(q, v)
  // of which the adjoint needs only (M^-1 ga)^T dRNEA/d(q, v).
  computeRNEADerivatives(w.model, w.dd, q, v, w.a0);
  computeMinverse(w.model, w.dd, q);
  w.Minv = w.dd.Minv;
  w.Minv.triangularView<Eigen::StrictlyLower>() = w.Minv.transpose();
  int nc = (int)w.act.size();
  if (nc > 0) {  // rows of the normals at the sphere centres (world Jacobian of kinematics())
    // lam = -e (Jn a + gam): (I + e Jn M^-1 Jn^T) lbar = Jn M^-1 ga, ga <- ga - e Jn^T lbar. A row of Jn is
    // non-zero on its body's support DoFs only (12 of 35 for a foot): Y = M^-1 Jn^T and Jn Y on those.
    if (nc > kMaxActive) throw std::runtime_error("g1dyn: more spheres in contact than kMaxActive");
    normal_rows(s, w, nc);
    auto Y = w.Y.leftCols(nc);
    w.G.resize(nc, nc);
    w.rhs.resize(nc);
    for (int j = 0; j < nc; ++j) {
      const Chain& ch = s.chain[p.sph_joint[w.act[j]]];
      Y.col(j).setZero();
      for (int d : ch.dof) Y.col(j) += w.Jn(j, d) * w.Minv.col(d);
      w.rhs[j] = Y.col(j).dot(w.ga);  // Jn M^-1 ga
    }
    for (int i = 0; i < nc; ++i) {
      const Chain& ch = s.chain[p.sph_joint[w.act[i]]];
      for (int j = 0; j <= i; ++j) {
        double g = 0.0;
        for (int d : ch.dof) g += w.Jn(i, d) * Y(d, j);
        w.G(i, j) = e * g + (i == j ? 1.0 : 0.0);
      }
    }
    spd_solve(w.G, w.rhs, nc);  // rhs -> lbar
    for (int i = 0; i < nc; ++i)
      for (int d : s.chain[p.sph_joint[w.act[i]]].dof) w.ga[d] -= e * w.Jn(i, d) * w.rhs[i];
  }
  w.lam.noalias() = w.Minv * w.ga;
  gq.noalias() -= w.dd.dtau_dq.transpose() * w.lam;  // = (da/dq)^T ga
  gq.noalias() += w.dTc_q.transpose() * w.lam;
  gv.noalias() -= w.dd.dtau_dv.transpose() * w.lam;  // v -> a at fixed tau (gv keeps the v -> vn identity)
  gv.noalias() += w.dTc_v.transpose() * w.lam;
  for (int j = 0; j < nj; ++j) {
    gq[6 + j] += w.dtau_q[j] * w.lam[6 + j];
    gv[6 + j] += w.dtau_v[j] * w.lam[6 + j];
    g_target[j] += w.dtau_t[j] * w.lam[6 + j];
  }
  if (nc > 0) lam_dependence(s, w, nc, e, gq, gv);
}

// Body poses (p_w, quat x y z w) [B, 7] and twists (v of the COM, omega; world) [B, 6]. Needs kinematics().
// A body's orientation as a quaternion in the root's hemisphere, so that it changes continuously with the state
// (limbs turn less than 180 degrees from the pelvis; the pelvis itself is the state's own quaternion).
Eigen::Quaterniond body_quat(const Work& w, const SE3& M, const Eigen::Quaterniond& q_root) {
  Eigen::Quaterniond q(M.rotation());
  if (q.dot(q_root) < 0.0) q.coeffs() = -q.coeffs();
  return q;
}

void body_outputs(const Sim& s, const Work& w, const Eigen::Quaterniond& q_root, double* bq, double* bqd) {
  const Params& p = w.p;
  for (size_t b = 0; b < p.body_joint.size(); ++b) {
    const SE3& M = w.dk.oMi[p.body_joint[b]];
    const Motion& V = w.Vw[p.body_joint[b]];
    Eigen::Quaterniond quat = body_quat(w, M, q_root);
    Vector3d c = M.translation() + M.rotation() * p.body_com[b];
    Vector3d vc = V.linear() + V.angular().cross(c);
    double* o = bq + 7 * b;
    o[0] = M.translation().x(); o[1] = M.translation().y(); o[2] = M.translation().z();
    o[3] = quat.x(); o[4] = quat.y(); o[5] = quat.z(); o[6] = quat.w();
    double* t = bqd + 6 * b;
    t[0] = vc.x(); t[1] = vc.y(); t[2] = vc.z();
    t[3] = V.angular().x(); t[4] = V.angular().y(); t[5] = V.angular().z();
  }
}

// Adjoint of body_outputs: adds to gq (tangent at q) and gv. Needs kinematics() of the same state.
void body_outputs_backward(const Sim& s, const Work& w, const Eigen::Quaterniond& q_root, const double* gbq,
                           const double* gbqd, VectorXd& gq, VectorXd& gv) {
  const Params& p = w.p;
  for (size_t b = 0; b < p.body_joint.size(); ++b) {
    int j = p.body_joint[b];
    const SE3& M = w.dk.oMi[j];
    const Motion& V = w.Vw[j];
    Eigen::Quaterniond quat = body_quat(w, M, q_root);
    Vector3d u(quat.x(), quat.y(), quat.z());
    double qw = quat.w();
    const double* g = gbq + 7 * b;
    const double* gt = gbqd + 6 * b;
    Vector3d g_p(g[0], g[1], g[2]), g_qv(g[3], g[4], g[5]), g_vc(gt[0], gt[1], gt[2]), g_om(gt[3], gt[4], gt[5]);
    // dq = 1/2 (omega, 0) (x) q for a world rotation omega of the body: its transpose
    Vector3d g_rot = 0.5 * (qw * g_qv + u.cross(g_qv) - u * g[6]);
    Vector3d pos = M.translation();
    Vector3d c = pos + M.rotation() * p.body_com[b];
    const Chain& ch = s.chain[j];
    for (size_t kk = 0; kk < ch.dof.size(); ++kk) {
      int k = ch.dof[kk];
      Motion Sk(w.dk.J.col(k));
      Motion after = ch.parent_joint[kk] == 0 ? V : Motion(V - w.Vw[ch.parent_joint[kk]]);
      Motion dV = cross(Sk, after);
      Vector3d Jc = Sk.linear() + Sk.angular().cross(c);  // velocity of the COM point under dof k
      gq[k] += (Sk.linear() + Sk.angular().cross(pos)).dot(g_p) + Sk.angular().dot(g_rot) +
               dV.angular().dot(g_om) + (dV.linear() + dV.angular().cross(c) + V.angular().cross(Jc)).dot(g_vc);
      gv[k] += Sk.angular().dot(g_om) + Jc.dot(g_vc);
    }
  }
}

template <class F>
void parallel_worlds(int n, int threads, F&& fn) {
  threads = std::max(1, std::min(threads, n));
  if (threads == 1) {
    fn(0, 0, n);
    return;
  }
  std::vector<std::thread> pool;
  int per = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    int lo = t * per, hi = std::min(n, lo + per);
    if (lo < hi) pool.emplace_back([&, t, lo, hi] { fn(t, lo, hi); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace

extern "C" {

// njoints: pinocchio joints incl. the universe (0) and the free joint (1); joint i > 1 is a hinge.
// parent[i], axis[i] (hinges: unit axis in the joint frame), placement[i] = (R row-major 9, t 3) in the
// parent joint frame, inertia[i] = (mass, com 3, Ixx Ixy Iyy Ixz Iyz Izz about the com).
void* g1dyn_create(int njoints, const int* parent, const double* axis, const double* placement,
                   const double* inertia, const double* armature, const double* kp, const double* kd_pd,
                   const double* effort, int nspheres, const int* sph_joint, const double* sph_pos,
                   const double* sph_rad, const int* foot_start, double ke, double kd, double kf, double mu,
                   double dt, int substeps, int stable_pd, int implicit_contact, int implicit_spring,
                   int spring_normal_only, double gravity_z, int nbodies,
                   const int* body_joint, const double* body_com) {
  auto* s = new Sim();
  Model& m = s->model;
  for (int i = 1; i < njoints; ++i) {
    const double* P = placement + 12 * i;
    Matrix3d R;
    R << P[0], P[1], P[2], P[3], P[4], P[5], P[6], P[7], P[8];
    SE3 X(R, Vector3d(P[9], P[10], P[11]));
    JointIndex id;
    if (i == 1) {
      id = m.addJoint(parent[i], JointModelFreeFlyer(), X, "root");
    } else {
      Vector3d ax(axis[3 * i], axis[3 * i + 1], axis[3 * i + 2]);
      id = m.addJoint(parent[i], JointModelRevoluteUnaligned(ax), X, "j" + std::to_string(i));
    }
    m.appendBodyToJoint(id, inertia_row(inertia + 10 * i), SE3::Identity());
  }
  m.gravity.linear(Vector3d(0, 0, gravity_z));
  s->nq = m.nq;
  s->nv = m.nv;
  s->nj = m.njoints;
  Params& p = s->p;
  int nh = m.nv - 6;
  p.kp = Eigen::Map<const VectorXd>(kp, nh);
  p.kd_pd = Eigen::Map<const VectorXd>(kd_pd, nh);
  p.effort = Eigen::Map<const VectorXd>(effort, nh);
  p.armature = Eigen::Map<const VectorXd>(armature, m.nv);
  for (int k = 0; k < nspheres; ++k) {
    p.sph_joint.push_back(sph_joint[k]);
    p.sph_pos.emplace_back(sph_pos[3 * k], sph_pos[3 * k + 1], sph_pos[3 * k + 2]);
    p.sph_rad.push_back(sph_rad[k]);
  }
  for (int f = 0; f < 3; ++f) p.foot_start[f] = foot_start[f];
  for (int b = 0; b < nbodies; ++b) {
    p.body_joint.push_back(body_joint[b]);
    p.body_com.emplace_back(body_com[3 * b], body_com[3 * b + 1], body_com[3 * b + 2]);
  }
  p.ke = ke; p.kd = kd; p.kf = kf; p.mu = mu; p.dt = dt; p.substeps = substeps; p.stable_pd = stable_pd;
  p.implicit_contact = implicit_contact;
  p.implicit_spring = implicit_contact ? implicit_spring : 0;
  p.spring_normal_only = spring_normal_only;
  p.gravity = -gravity_z;
  // support chains (root first)
  s->chain.resize(m.njoints);
  for (int b = 1; b < m.njoints; ++b) {
    std::vector<int> joints;
    for (int j = b; j > 0; j = (int)m.parents[j]) joints.push_back(j);
    std::reverse(joints.begin(), joints.end());
    Chain& c = s->chain[b];
    for (size_t d = 0; d < joints.size(); ++d) {
      int j = joints[d];
      int idx = m.idx_vs[j], nvj = m.nvs[j];
      for (int k = 0; k < nvj; ++k) {
        c.dof.push_back(idx + k);
        c.depth.push_back((int)d);
        c.parent_joint.push_back(d == 0 ? 0 : joints[d - 1]);
        c.joint.push_back(j);
      }
    }
  }
  s->anc.resize(m.njoints);
  s->axis.assign(m.njoints, Vector3d::Zero());
  for (int b = 1; b < m.njoints; ++b) {
    for (int j = b; j > 0; j = (int)m.parents[j]) s->anc[b].push_back(j);
    if (b > 1) s->axis[b] = boost::get<JointModelRevoluteUnalignedTpl<double, 0>>(m.joints[b].toVariant()).axis;
  }
  return s;
}

void g1dyn_destroy(void* h) { delete static_cast<Sim*>(h); }

// Joint-range stops (lo, hi [29] rad, stiffness ke N m/rad, damping kd N m s/rad); not called: no stops.
void g1dyn_set_joint_limits(void* h, const double* lo, const double* hi, double ke, double kd) {
  Params& p = static_cast<Sim*>(h)->p;
  int nh = (int)p.kp.size();
  p.lim_lo = Eigen::Map<const VectorXd>(lo, nh);
  p.lim_hi = Eigen::Map<const VectorXd>(hi, nh);
  p.lim_ke = ke;
  p.lim_kd = kd;
}

void g1dyn_set_spring_theta(void* h, double theta) { static_cast<Sim*>(h)->p.spring_theta = theta; }

int g1dyn_nq(void* h) { return static_cast<Sim*>(h)->nq; }
int g1dyn_nv(void* h) { return static_cast<Sim*>(h)->nv; }

// One control step for n worlds. q0 [n, nq], v0 [n, nv], target [n, 29] in; traj_q [n, S+1, nq] and
// traj_v [n, S+1, nv] out (kept by the caller for backward); foot_fn, foot_peak, foot_pen [n, 2] out
// (normal force at the end, its max over substep ends, deepest penetration at the end).
// nsub [n] (nullable: S each): substeps world i runs, 0..S; its last state is traj[i, nsub[i]] and the outputs
// are of that state. onset [n, 2] out (nullable): per foot the first substep end k in 1..nsub[i] whose state
// has a normal force on the sole, -1 if none (BCG starts its branches at state k - 1, just before contact).
void g1dyn_forward(void* h, int n, const double* q0, const double* v0, const double* target, double* traj_q,
                   double* traj_v, double* foot_fn, double* foot_peak, double* foot_pen, double* body_q,
                   double* body_qd, const int* nsub, int* onset, int threads, const double* w_mu,
                   const double* w_kf, const double* w_kp, const double* w_kd, int ninert,
                   const int* inert_joint, const double* w_inert) {
  const Sim& s = *static_cast<Sim*>(h);
  const WorldArgs wa{w_mu, w_kf, w_kp, w_kd, ninert, inert_joint, w_inert};
  int S = s.p.substeps, nq = s.nq, nv = s.nv, nh = nv - 6;
  parallel_worlds(n, threads, [&](int, int lo, int hi) {
    Work w(s);
    VectorXd q(nq), v(nv), qn(nq), vn(nv);
    FootStats st;
    for (int i = lo; i < hi; ++i) {
      set_world(s, w, wa, i);
      int ns = nsub ? nsub[i] : S;
      q = Eigen::Map<const VectorXd>(q0 + (size_t)i * nq, nq);
      v = Eigen::Map<const VectorXd>(v0 + (size_t)i * nv, nv);
      q.segment<4>(3).normalize();
      double* tq = traj_q + (size_t)i * (S + 1) * nq;
      double* tv = traj_v + (size_t)i * (S + 1) * nv;
      Eigen::Map<VectorXd>(tq, nq) = q;
      Eigen::Map<VectorXd>(tv, nv) = v;
      double peak[2] = {0, 0};
      int first[2] = {-1, -1};
      for (int k = 0; k < ns; ++k) {
        substep_forward(s, w, q, v, target + (size_t)i * nh, qn, vn, st);
        if (k > 0) {
          for (int f = 0; f < 2; ++f) {
            peak[f] = std::max(peak[f], st.fn[f]);
            if (first[f] < 0 && st.fn[f] > 0.0) first[f] = k;  // st: the stats of state k (this substep's start)
          }
        }
        q = qn;
        v = vn;
        Eigen::Map<VectorXd>(tq + (size_t)(k + 1) * nq, nq) = q;
        Eigen::Map<VectorXd>(tv + (size_t)(k + 1) * nv, nv) = v;
      }
      kinematics(w, q, v);  // the final state: body outputs and foot stats
      size_t nb = s.p.body_joint.size();
      Eigen::Quaterniond q_root(q[6], q[3], q[4], q[5]);
      body_outputs(s, w, q_root, body_q + (size_t)i * nb * 7, body_qd + (size_t)i * nb * 6);
      contact_fext(s, w, st, false);
      for (int f = 0; f < 2; ++f) {
        if (ns > 0 && first[f] < 0 && st.fn[f] > 0.0) first[f] = ns;
        peak[f] = std::max(peak[f], st.fn[f]);
        foot_fn[2 * i + f] = st.fn[f];
        foot_peak[2 * i + f] = peak[f];
        foot_pen[2 * i + f] = std::max(0.0, st.pen[f]);
        if (onset) onset[2 * i + f] = first[f];
      }
    }
  });
}

// Reverse mode through one control step. gq_out [n, nv] (tangent at the last q), gv_out [n, nv] in;
// gq_in [n, nv] (tangent at the first q), gv_in [n, nv], g_target [n, 29] out. nsub as in g1dyn_forward.
void g1dyn_backward(void* h, int n, const double* traj_q, const double* traj_v, const double* target,
                    const double* gq_out, const double* gv_out, const double* g_body_q, const double* g_body_qd,
                    double* gq_in, double* gv_in, double* g_target, const int* nsub, int threads,
                    const double* w_mu, const double* w_kf, const double* w_kp, const double* w_kd, int ninert,
                    const int* inert_joint, const double* w_inert) {
  const Sim& s = *static_cast<Sim*>(h);
  const WorldArgs wa{w_mu, w_kf, w_kp, w_kd, ninert, inert_joint, w_inert};
  int S = s.p.substeps, nq = s.nq, nv = s.nv, nh = nv - 6;
  parallel_worlds(n, threads, [&](int, int lo, int hi) {
    Work w(s);
    VectorXd q(nq), v(nv), vn(nv), gq(nv), gv(nv);
    for (int i = lo; i < hi; ++i) {
      set_world(s, w, wa, i);
      int ns = nsub ? nsub[i] : S;
      const double* tq = traj_q + (size_t)i * (S + 1) * nq;
      const double* tv = traj_v + (size_t)i * (S + 1) * nv;
      gq = Eigen::Map<const VectorXd>(gq_out + (size_t)i * nv, nv);
      gv = Eigen::Map<const VectorXd>(gv_out + (size_t)i * nv, nv);
      double* gt = g_target + (size_t)i * nh;
      std::fill(gt, gt + nh, 0.0);
      if (g_body_q != nullptr) {  // the body outputs of the last state
        size_t nb = s.p.body_joint.size();
        q = Eigen::Map<const VectorXd>(tq + (size_t)ns * nq, nq);
        v = Eigen::Map<const VectorXd>(tv + (size_t)ns * nv, nv);
        kinematics(w, q, v);
        Eigen::Quaterniond q_root(q[6], q[3], q[4], q[5]);
        body_outputs_backward(s, w, q_root, g_body_q + (size_t)i * nb * 7, g_body_qd + (size_t)i * nb * 6, gq, gv);
      }
      for (int k = ns - 1; k >= 0; --k) {
        q = Eigen::Map<const VectorXd>(tq + (size_t)k * nq, nq);
        v = Eigen::Map<const VectorXd>(tv + (size_t)k * nv, nv);
        vn = Eigen::Map<const VectorXd>(tv + (size_t)(k + 1) * nv, nv);
        substep_backward(s, w, q, v, vn, target + (size_t)i * nh, gq, gv, gt);
      }
      Eigen::Map<VectorXd>(gq_in + (size_t)i * nv, nv) = gq;
      Eigen::Map<VectorXd>(gv_in + (size_t)i * nv, nv) = gv;
    }
  });
}

}  // extern "C"
