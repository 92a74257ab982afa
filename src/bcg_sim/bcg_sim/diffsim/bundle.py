"""Bundled Contact Gradients (BCG): average a stiff contact event over perturbed branch copies.

Rule (per world and foot): a **touchdown** is detected in a control step when the foot's peak normal force
over the step's substeps exceeds `bcg.trigger_force` after a whole control step whose peak stayed at or below
`bcg.rearm_force` (contact onset after flight; a bounce or chatter within a stance does not re-trigger).
The world must not already be running a bundle (then it is counted `busy`).

On a touchdown in step t of world i (foot f):
1. B branch copies of world i's state *at the start of step t* (before the impact) take a free chunk of the
   preallocated branch pool (pool_size // B simulators of B worlds, built once). If no chunk is free the
   trigger is counted as `overflow` and world i simply continues unbundled.
2. Each copy is perturbed: the foot point is displaced by dp ~ U(ball of radius sigma) [m] and its velocity by
   dv ~ U(ball of radius sigma_v) [m/s]. Mapping to generalized coordinates (`bcg.perturbation`):
   - "base": dp is added to the floating base position and dv to its linear (COM) velocity. A rigid
     translation moves every point of the robot, the foot included, by exactly dp (and every point's velocity
     by exactly dv), with no kinematic singularity -- but the whole robot moves, the other foot too.
   - "leg": only the contacting leg's 6 hinges move: dq_leg = J+ dp, dqd_leg = J+ dv, with J [3, 6] the
     translational Jacobian of that foot's sole centre w.r.t. its leg joints at the branch start (analytic,
     from one forward kinematics: column i = a_i x (p_sole - p_i)) and J+ = J^T (J J^T + lambda^2 I)^-1
     (lambda = `bcg.leg_damping`), so a straight knee stays bounded (|J+| <= 1/(2 lambda)). The base and the
     other leg are untouched. J is computed on the detached state: the map is a fixed linear map of the
     sampled noise, and the perturbation is additive noise on joint coordinates (gradients w.r.t. the
     bundled state pass through unchanged). The foot displacement is dp to first order (the velocity
     change is J J+ dv exactly), less the DLS shrinkage along the leg's weakest direction.
   With `antithetic`, perturbations come in +/- pairs, so their mean is exactly zero.
3. The branches re-run step t and the next H-1 control steps with the *same* PD targets as world i.
4. After H steps world i's state becomes the bundle mean: x_i + mean_k(x_k - x_i) for positions and
   velocities (x_i: world i's own unperturbed state), and for the root orientation (and every body
   orientation) the tangent-space mean about q_i: q_i * exp(mean_k log(q_i^-1 q_k)), sign-aligned, so it is
   quaternion-safe and returns q_i *bitwise* when all branches equal it. Gradients flow through the mean
   into the branches' rollouts; with sigma = sigma_v = 0 the result and its gradient equal the unbundled ones.

`Bundler` keeps the pool bookkeeping and runs the branches; the averaging maths are plain torch functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from bcg_sim.diffsim.config import BCGConfig

# ---------------------------------------------------------------------------------------------- maths


def sample_ball(n: int, dim: int, radius: float, generator: torch.Generator, antithetic: bool,
                device: torch.device | str = "cpu") -> torch.Tensor:
    """[n, dim] samples uniform in the ball of `radius` (zeros when radius == 0). With `antithetic`
    (n even), rows n/2.. are the negatives of rows ..n/2, so the sample mean is exactly zero."""
    if radius == 0.0:
        return torch.zeros(n, dim, device=device)
    m = n // 2 if antithetic else n
    d = torch.randn(m, dim, generator=generator)
    d = d / d.norm(dim=-1, keepdim=True)
    r = radius * torch.rand(m, 1, generator=generator) ** (1.0 / dim)
    x = d * r
    if antithetic:
        x = torch.cat([x, -x], dim=0)
    return x.to(device)


def _qmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product of x y z w quaternions [..., 4]."""
    ax, ay, az, aw = a.unbind(-1)
    bx, by, bz, bw = b.unbind(-1)
    return torch.stack([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ], dim=-1)


def _qconj(q: torch.Tensor) -> torch.Tensor:
    return torch.cat([-q[..., :3], q[..., 3:]], dim=-1)


_TINY = 1e-20  # keeps sqrt differentiable at exactly zero rotation without changing any float32 result


def quat_log(r: torch.Tensor) -> torch.Tensor:
    """Rotation vector [..., 3] of x y z w quaternions r (w >= 0 assumed)."""
    v, w = r[..., :3], r[..., 3:]
    n = torch.sqrt((v * v).sum(-1, keepdim=True) + _TINY)
    return v * (2.0 * torch.atan2(n, w) / n)


def quat_exp(rv: torch.Tensor) -> torch.Tensor:
    """x y z w quaternion [..., 4] of rotation vectors rv [..., 3]."""
    half = 0.5 * torch.sqrt((rv * rv).sum(-1, keepdim=True) + _TINY)
    return torch.cat([rv * (torch.sin(half) / (2.0 * half)), torch.cos(half)], dim=-1)


def quat_mean_about(q_ref: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Mean of quaternions q [B, ..., 4] about q_ref [..., 4] (x y z w), carried by q only.

    Rotation: each q_k is sign-aligned with q_ref, mapped to the rotation vector of q_ref^-1 q_k, averaged
    and mapped back (tangent-space mean; safe for any sign and for spreads up to pi). Norm: the result is
    scaled by m / stopgrad(m), m = mean_k |q_k| -- exactly 1.0 in value, but it hands the radial part of the
    incoming gradient to the branches. q_ref enters as a constant, so every gradient reaches the branches;
    when every q_k == q_ref the result is q_ref bitwise and its gradient is the unbundled one."""
    ref = q_ref.detach()
    sign = torch.where((q * ref).sum(-1, keepdim=True) < 0, -1.0, 1.0)
    rel = _qmul(_qconj(ref).expand_as(q), q * sign)
    rel = rel * torch.where(rel[..., 3:] < 0, -1.0, 1.0)  # shortest arc
    rot = _qmul(ref, quat_exp(quat_log(rel).mean(0)))
    m = q.norm(dim=-1, keepdim=True).mean(0)
    return rot * (m / m.detach())


def bundle_mean(main: torch.Tensor, branches: torch.Tensor, quat_slice: slice | None = None) -> torch.Tensor:
    """Mean of branch outcomes [B, ..., D] written as main [..., D] + mean deviation, main a constant
    (so the value is exactly main when the branches equal it, and all gradient flows into the branches);
    entries in `quat_slice` (x y z w) use `quat_mean_about`."""
    ref = main.detach()
    out = ref + (branches - ref).mean(0)
    if quat_slice is None:
        return out
    q = quat_mean_about(ref[..., quat_slice], branches[..., quat_slice])
    return torch.cat([out[..., : quat_slice.start], q, out[..., quat_slice.stop:]], dim=-1)

# ------------------------------------------------------------------------------------------- pool


@dataclass
class BCGStats:
    """Counters of one rollout (reset by `Bundler.reset_stats()` / env.new_rollout())."""

    triggers: int = 0  # touchdowns detected (bundled or not)
    triggers_per_foot: list[int] = field(default_factory=lambda: [0, 0])  # (left, right)
    bundles_started: int = 0
    bundles_completed: int = 0
    overflow: int = 0  # touchdowns not bundled because the pool had < B free slots
    busy: int = 0  # touchdowns not bundled because the world was already in a bundle
    cancelled: int = 0  # bundles dropped by a reset of their world
    pool_steps: int = 0  # control steps in which the pool ran
    pool_slots_used_max: int = 0
    pool_slot_steps: int = 0  # sum over pool steps of slots in use (mean use = this / pool_steps)
    spread_pos_sum: float = 0.0  # sum over completed bundles of the branches' root-position std [m]
    spread_vel_sum: float = 0.0  # ... of the branches' root-velocity std [m/s]

    @property
    def pool_use_mean(self) -> float:
        return self.pool_slot_steps / self.pool_steps if self.pool_steps else 0.0

    @property
    def branch_spread_pos(self) -> float:
        """Mean over completed bundles of the RMS distance of branch root positions from their mean [m]."""
        return self.spread_pos_sum / self.bundles_completed if self.bundles_completed else 0.0

    @property
    def branch_spread_vel(self) -> float:
        return self.spread_vel_sum / self.bundles_completed if self.bundles_completed else 0.0

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items()}
        d.update(pool_use_mean=self.pool_use_mean, branch_spread_pos=self.branch_spread_pos,
                 branch_spread_vel=self.branch_spread_vel)
        return d


@dataclass
class _Bundle:
    world: int
    foot: int
    chunk: int  # index of the B-world branch simulator it occupies
    q: torch.Tensor  # [B, Dq] branch states (graph-connected)
    qd: torch.Tensor  # [B, Dv]
    dp: torch.Tensor | None = None  # [B, 3] sampled foot displacements [m] (diagnostics / tests)
    dv: torch.Tensor | None = None  # [B, 3] sampled foot velocity changes [m/s]
    steps_done: int = 0


class LegJacobian:
    """Foot-local perturbation map of the G1 ("leg" mapping): for a world state q [36] (Newton layout) and a
    foot, the damped pseudo-inverse J+ [6, 3] of the translational Jacobian J [3, 6] of that foot's sole centre
    (mean of its sole-sphere centres, in the ankle-roll frame) w.r.t. the 6 hinges of its leg, and their
    coordinate / DoF indices.

    J is analytic from one forward kinematics of q: column i = a_i x (p_sole - p_i), with a_i the world axis
    and p_i the world origin of hinge i. J+ = J^T (J J^T + lambda^2 I)^-1 (lambda = bcg.leg_damping), so its
    gain is at most 1/(2 lambda) even at a straight knee. It is evaluated on the detached state: the map is a
    fixed linear map of the sampled noise (no gradient through J). Uses one preallocated 1-world Newton model
    and state on the CPU (built once; eval_fk per trigger, no allocation of Newton objects per step)."""

    def __init__(self, damping: float, variant: str = "29dof"):
        import newton
        import numpy as np

        from bcg_sim import g1
        from bcg_sim.diffsim.model import newton_builder

        self._newton, self._np = newton, np
        self.damping = float(damping)
        b = newton_builder(variant)
        self.model = b.finalize(device="cpu", requires_grad=False)
        self.state = self.model.state()
        body_names = [lbl.split("/")[-1] for lbl in b.body_label]
        self.foot_body = tuple(body_names.index(f) for f in g1.FOOT_BODIES)
        self.sole_b = g1.foot_sphere_positions().mean(0)  # sole centre in the ankle-roll frame [m]
        parent = self.model.joint_parent.numpy()
        self.child = child = self.model.joint_child.numpy()
        jtype = self.model.joint_type.numpy()
        q_start = self.model.joint_q_start.numpy()
        qd_start = self.model.joint_qd_start.numpy()
        self.X_c = self.model.joint_X_c.numpy().astype(np.float64)  # [J, 7] p, q xyzw
        self.axis = self.model.joint_axis.numpy().astype(np.float64)  # [D, 3] in the joint frame
        self.legs = []  # per foot: (joints (root -> foot), q indices [6], qd indices [6])
        for fb in self.foot_body:
            joints, body = [], fb
            while body >= 0:
                j = int(np.nonzero(child == body)[0][0])
                if jtype[j] == int(newton.JointType.REVOLUTE):
                    joints.append(j)
                body = int(parent[j])
            joints = joints[::-1]
            if len(joints) != 6:
                raise RuntimeError(f"leg of {body_names[fb]} has {len(joints)} hinges, expected 6")
            self.legs.append((joints, [int(q_start[j]) for j in joints], [int(qd_start[j]) for j in joints]))

    @staticmethod
    def _rotate(q, v):
        """Rotate v [..., 3] by x y z w quaternions q [..., 4] (numpy)."""
        import numpy as np
        u, w = q[..., :3], q[..., 3:]
        t = 2.0 * np.cross(u, v)
        return v + w * t + np.cross(u, t)

    def fk(self, q) -> tuple:
        """(body_q [30, 7], body_qd [30, 6]) of one world's state q [36] (qd zero), float64 numpy."""
        np = self._np
        qn = np.asarray(q.detach().cpu() if isinstance(q, torch.Tensor) else q, dtype=np.float32)
        self.state.joint_q.assign(qn)
        self.state.joint_qd.zero_()
        self._newton.eval_fk(self.model, self.state.joint_q, self.state.joint_qd, self.state)
        return self.state.body_q.numpy().astype(np.float64), self.state.body_qd.numpy().astype(np.float64)

    def sole_points(self, q) -> "np.ndarray":
        """[2, 3] world positions of the (left, right) sole centres of state q [36] [m]."""
        bq, _ = self.fk(q)
        return self._np.stack([bq[fb, :3] + self._rotate(bq[fb, 3:], self.sole_b) for fb in self.foot_body])

    def jacobian(self, q, foot: int) -> "np.ndarray":
        """[3, 6] d p_sole / d q_leg of `foot` at state q [36] (world frame, float64)."""
        np = self._np
        bq, _ = self.fk(q)
        fb = self.foot_body[foot]
        p = bq[fb, :3] + self._rotate(bq[fb, 3:], self.sole_b)
        joints, _, dofs = self.legs[foot]
        cols = []
        for j, d in zip(joints, dofs):
            Xb = bq[int(self.child[j])]
            # joint frame in world = X_child * X_c[j]
            rot = _np_qmul(Xb[3:], self.X_c[j, 3:])
            origin = Xb[:3] + self._rotate(Xb[3:], self.X_c[j, :3])
            a = self._rotate(rot, self.axis[d])
            cols.append(np.cross(a, p - origin))
        return np.stack(cols, axis=1)

    def __call__(self, q, foot: int) -> tuple[torch.Tensor, list[int], list[int]]:
        """(J+ [6, 3] float32 on q's device, q indices [6], qd indices [6]) of `foot`'s leg at state q."""
        np = self._np
        J = self.jacobian(q, foot)
        P = J.T @ np.linalg.inv(J @ J.T + self.damping ** 2 * np.eye(3))
        _, qi, di = self.legs[foot]
        return torch.as_tensor(P, dtype=torch.float32, device=q.device), qi, di


def _np_qmul(a, b):
    """Hamilton product of x y z w quaternions (numpy, 1-D)."""
    import numpy as np
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


# Branch stepper: (chunk, target [B, J], q [B, Dq], qd [B, Dv]) -> tuple of outputs [B, ...]; outputs[0] and
# outputs[1] are the next (q, qd); further outputs (e.g. body poses) are averaged too.
Stepper = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...]]


class Bundler:
    """Branch-pool bookkeeping and averaging for BCG over any stepper with Newton-style state layout.

    The pool of `cfg.pool_size` branch worlds is split into pool_size // B chunks of B worlds (one
    preallocated simulator each), so a control step only simulates the chunks in use. quat_slices[k] is the
    x y z w slice of output k (None: all linear); `root_pos` / `root_lin_vel` are the slices of q / qd
    holding the base position and linear velocity.
    """

    def __init__(self, cfg: BCGConfig, step_chunk: Stepper, quat_slices: tuple[slice | None, ...],
                 root_pos: slice = slice(0, 3), root_lin_vel: slice = slice(0, 3),
                 leg_map: Callable | None = None):
        self.cfg = cfg
        # "leg" mapping: (q_start [Dq], foot) -> (J+ [n, 3], q indices [n], qd indices [n]); the G1's by default
        self.leg_map = leg_map
        if cfg.perturbation == "leg" and leg_map is None:
            self.leg_map = LegJacobian(cfg.leg_damping)
        self.step_chunk = step_chunk
        self.num_chunks = cfg.pool_size // cfg.branches
        self.quat_slices = quat_slices
        self.root_pos, self.root_lin_vel = root_pos, root_lin_vel
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.free = list(range(self.num_chunks))
        self.bundles: dict[int, _Bundle] = {}
        self.stats = BCGStats()

    def reset_stats(self) -> None:
        self.stats = BCGStats()

    def active_worlds(self) -> set[int]:
        return set(self.bundles)

    def cancel(self, worlds) -> None:
        """Drop the bundles of these worlds (e.g. on reset) and free their chunks."""
        for w in list(worlds):
            b = self.bundles.pop(int(w), None)
            if b is not None:
                self._release(b)
                self.stats.cancelled += 1

    def clear(self) -> None:
        """Drop every bundle without counting (start of a new rollout)."""
        for b in list(self.bundles.values()):
            self._release(b)
        self.bundles.clear()

    def _release(self, b: _Bundle) -> None:
        self.free.append(b.chunk)
        self.free.sort()

    def trigger(self, world: int, foot: int, q_start: torch.Tensor, qd_start: torch.Tensor) -> bool:
        """A touchdown of `foot` in `world`; q_start [Dq], qd_start [Dv] are its state at the start of the
        step. Returns True when a bundle was started."""
        st, B = self.stats, self.cfg.branches
        st.triggers += 1
        st.triggers_per_foot[foot] += 1
        if world in self.bundles:
            st.busy += 1
            return False
        if not self.free:
            st.overflow += 1
            return False
        chunk = self.free.pop(0)
        dp = sample_ball(B, 3, self.cfg.sigma, self.gen, self.cfg.antithetic, q_start.device)
        dv = sample_ball(B, 3, self.cfg.sigma_v, self.gen, self.cfg.antithetic, q_start.device)
        q = q_start.expand(B, -1).clone()
        qd = qd_start.expand(B, -1).clone()
        if self.cfg.perturbation == "leg":
            P, qi, di = self.leg_map(q_start.detach(), foot)
            q[:, qi] = q_start[qi] + dp @ P.T
            qd[:, di] = qd_start[di] + dv @ P.T
        else:
            q[:, self.root_pos] = q_start[self.root_pos] + dp
            qd[:, self.root_lin_vel] = qd_start[self.root_lin_vel] + dv
        self.bundles[world] = _Bundle(world, foot, chunk, q, qd, dp, dv)
        st.bundles_started += 1
        return True

    def step_and_merge(self, target: torch.Tensor, main_out: tuple[torch.Tensor, ...]
                       ) -> tuple[tuple[torch.Tensor, ...], list[int]]:
        """Run every active bundle's branches one control step with its world's PD target (target [N, J]),
        then replace the outputs of worlds whose bundle reached H steps by the bundle mean.

        main_out: the main rollout's outputs (q [N, Dq], qd [N, Dv], ...). Returns (outputs, merged worlds).
        """
        if not self.bundles:
            return main_out, []
        st, B = self.stats, self.cfg.branches
        st.pool_steps += 1
        st.pool_slot_steps += B * len(self.bundles)
        st.pool_slots_used_max = max(st.pool_slots_used_max, B * len(self.bundles))
        replace: dict[int, tuple[torch.Tensor, ...]] = {}
        for w, b in list(self.bundles.items()):
            out = self.step_chunk(b.chunk, target[w].expand(B, -1), b.q, b.qd)
            b.q, b.qd = out[0], out[1]
            b.steps_done += 1
            if b.steps_done < self.cfg.horizon:
                continue
            replace[w] = tuple(bundle_mean(main[w], o, qs) for main, o, qs in zip(main_out, out, self.quat_slices))
            pos, vel = out[0][:, self.root_pos].detach(), out[1][:, self.root_lin_vel].detach()
            st.spread_pos_sum += float((pos - pos.mean(0)).pow(2).sum(-1).mean().sqrt())
            st.spread_vel_sum += float((vel - vel.mean(0)).pow(2).sum(-1).mean().sqrt())
            st.bundles_completed += 1
            del self.bundles[w]
            self._release(b)
        if not replace:
            return main_out, []
        worlds = sorted(replace)
        idx = torch.as_tensor(worlds, device=main_out[0].device)
        new_out = []
        for k, main in enumerate(main_out):
            rows = torch.stack([replace[w][k] for w in worlds])
            new_out.append(main.index_put((idx,), rows))  # out of place: other worlds keep their graph
        return tuple(new_out), worlds
