"""Bundled Contact Gradients (BCG): average a stiff contact event over perturbed branch copies.

Rule (per world and foot): a **touchdown** is detected in a control step when the foot's peak normal force
over the step's substeps exceeds `bcg.trigger_force` after a whole control step whose peak stayed at or below
`bcg.rearm_force` (contact onset after flight; a bounce or chatter within a stance does not re-trigger).
The world must not already be running a bundle (then it is counted `busy`).

On a touchdown in step t of world i (foot f):
1. B branch copies of world i's state before the impact take a free chunk of the preallocated branch pool
   (pool_size // B simulators of B worlds, built once). If no chunk is free the trigger is counted as
   `overflow` and world i simply continues unbundled. "Before the impact" (`bcg.start`): the state at the
   start of step t ("step"), or the last substep state of step t before the foot's contact onset
   ("contact", native backend: the env re-runs world i's first j substeps of step t, differentiably, and the
   branches run the remaining S - j). Both end at the same control-step boundary, so the bundle spans the same
   contact; "contact" does not simulate B copies of the flight before it.
2. Each copy is perturbed: the foot point is displaced by dp ~ U(ball of radius sigma) [m] and its velocity by
   dv ~ U(ball of radius sigma_v) [m/s]. Mapping to generalized coordinates (`bcg.perturbation`):
   - "base": dp is added to the floating base position and dv to its linear (COM) velocity. A rigid
     translation moves every point of the robot, the foot included, by exactly dp (and every point's velocity
     by exactly dv), with no kinematic singularity -- but the whole robot moves, the other foot too.
   - "leg": only the contacting leg's 6 hinges move: dq_leg = J+ dp, dqd_leg = J+ dv, with J [3, 6] the
     translational Jacobian of that foot's sole centre w.r.t. its leg joints at the branch start (MuJoCo's
     mj_jac on the same G1) and J+ = J^T (J J^T + lambda^2 I)^-1
     (lambda = `bcg.leg_damping`), so a straight knee stays bounded (|J+| <= 1/(2 lambda)). The base and the
     other leg are untouched. J is computed on the detached state: the map is a fixed linear map of the
     sampled noise, and the perturbation is additive noise on joint coordinates (gradients w.r.t. the
     bundled state pass through unchanged). The foot displacement is dp to first order (the velocity
     change is J J+ dv exactly), less the DLS shrinkage along the leg's weakest direction.
   With `antithetic`, perturbations come in +/- pairs, so their mean is exactly zero.
3. The branches run (the rest of) step t and the next H-1 control steps with the *same* PD targets as world i.
4. After H steps world i's state becomes the bundle mean: x_i + mean_k(x_k - x_i) for positions and
   velocities (x_i: world i's own unperturbed state), and for the root orientation (and every body
   orientation) the tangent-space mean about q_i: q_i * exp(mean_k log(q_i^-1 q_k)), sign-aligned, so it is
   quaternion-safe and returns q_i *bitwise* when all branches equal it. Gradients flow through the mean
   into the branches' rollouts; with sigma = sigma_v = 0 the result and its gradient equal the unbundled ones.

`Bundler` keeps the pool bookkeeping and runs the branches; the averaging maths are plain torch functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import torch

from bcg_sim.diffsim.config import BCGConfig
from bcg_sim.quat import conjugate, exp_smooth, log_smooth, multiply, wxyz_to_xyzw, xyzw_to_wxyz

if TYPE_CHECKING:
    import numpy as np

# ---------------------------------------------------------------------------------------------- maths


def sample_ball(
    n: int, dim: int, radius: float, generator: torch.Generator, antithetic: bool, device: torch.device | str = "cpu"
) -> torch.Tensor:
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


def quat_mean_about(q_ref: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Mean of quaternions q [B, ..., 4] about q_ref [..., 4] (w x y z), carried by q only.

    Rotation: each q_k is sign-aligned with q_ref, mapped to the rotation vector of q_ref^-1 q_k, averaged
    and mapped back (tangent-space mean; safe for any sign and for spreads up to pi). Norm: the result is
    scaled by m / stopgrad(m), m = mean_k |q_k| -- exactly 1.0 in value, but it hands the radial part of the
    incoming gradient to the branches. q_ref enters as a constant, so every gradient reaches the branches;
    when every q_k == q_ref the result is q_ref bitwise and its gradient is the unbundled one."""
    ref = q_ref.detach()
    sign = torch.where((q * ref).sum(-1, keepdim=True) < 0, -1.0, 1.0)
    rel = multiply(conjugate(ref).expand_as(q), q * sign)
    rel = rel * torch.where(rel[..., :1] < 0, -1.0, 1.0)  # shortest arc
    rot = multiply(ref, exp_smooth(log_smooth(rel).mean(0)))
    m = q.norm(dim=-1, keepdim=True).mean(0)
    return rot * (m / m.detach())


def bundle_mean(main: torch.Tensor, branches: torch.Tensor, quat_slice: slice | None = None) -> torch.Tensor:
    """Mean of branch outcomes [B, ..., D] written as main [..., D] + mean deviation, main a constant
    (so the value is exactly main when the branches equal it, and all gradient flows into the branches);
    entries in `quat_slice` (a quaternion in Newton's x y z w) use `quat_mean_about`."""
    ref = main.detach()
    out = ref + (branches - ref).mean(0)
    if quat_slice is None:
        return out
    q = quat_mean_about(xyzw_to_wxyz(ref[..., quat_slice]), xyzw_to_wxyz(branches[..., quat_slice]))
    return torch.cat([out[..., : quat_slice.start], wxyz_to_xyzw(q), out[..., quat_slice.stop :]], dim=-1)


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
    start_substeps: int = 0  # sum over started bundles of their branch start's substep in the step (bcg.start)
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
        d.update(
            pool_use_mean=self.pool_use_mean,
            branch_spread_pos=self.branch_spread_pos,
            branch_spread_vel=self.branch_spread_vel,
        )
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
    skip: int = 0  # substeps of step t the main world ran before the branch start (bcg.start "contact")


class LegJacobian:
    """Foot-local perturbation map of the G1 ("leg" mapping): for a world state q [36] (Newton layout) and a
    foot, the damped pseudo-inverse J+ [6, 3] of the translational Jacobian J [3, 6] of that foot's sole centre
    (mean of its sole-sphere centres, in the ankle-roll frame) w.r.t. the 6 hinges of its leg, and their
    coordinate / DoF indices.

    J comes from MuJoCo's kinematics of the same G1 (`bcg_sim.g1.load_mujoco`: mj_kinematics, mj_comPos,
    mj_jac at the sole centre): ~20 us per trigger, against ~5 ms for Newton's eval_fk launched from Python,
    which was a quarter of BCG's cost in the SHAC-shaped bench. J+ = J^T (J J^T + lambda^2 I)^-1
    (lambda = bcg.leg_damping), so its gain is at most 1/(2 lambda) even at a straight knee. It is evaluated
    on the detached state: the map is a fixed linear map of the sampled noise (no gradient through J)."""

    def __init__(self, damping: float, variant: str = "29dof"):
        import mujoco
        import numpy as np

        from bcg_sim import g1

        self._mj, self._np = mujoco, np
        self.damping = float(damping)
        self.model = m = g1.load_mujoco(variant, floor=False)
        self.data = mujoco.MjData(m)
        self.foot_body = tuple(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f) for f in g1.FOOT_BODIES)
        self.sole_b = g1.foot_sphere_positions().mean(0)  # sole centre in the ankle-roll frame [m]
        # The pelvis' centre of mass in its frame [m]: Newton's root velocity is that point's (state.to_newton).
        self.root_com_b = np.array(m.body_ipos[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "pelvis")])
        self.legs = []  # per foot: (MuJoCo dof addresses (root -> foot), Newton q indices [6], qd indices [6])
        for fb in self.foot_body:
            dofs, body = [], fb
            while body > 0:
                for j in range(m.body_jntadr[body], m.body_jntadr[body] + m.body_jntnum[body]):
                    if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE:
                        dofs.append(int(m.jnt_dofadr[j]))
                body = int(m.body_parentid[body])
            dofs = dofs[::-1]
            if len(dofs) != 6:
                raise RuntimeError(
                    f"leg of {g1.FOOT_BODIES[self.foot_body.index(fb)]} has {len(dofs)} hinges, expected 6"
                )
            # Newton layout: q = (pos, quat x y z w, hinges), qd = (6 root DoF, hinges); MuJoCo's qpos = (pos,
            # quat w x y z, hinges), qvel = (6 root DoF, hinges): a hinge's MuJoCo dof d is Newton q d + 1, qd d.
            self.legs.append((dofs, [d + 1 for d in dofs], list(dofs)))

    def _kinematics(self, q) -> None:
        np, mj = self._np, self._mj
        q = np.asarray(q.detach().cpu() if isinstance(q, torch.Tensor) else q, dtype=np.float64)
        self.data.qpos[:3] = q[:3]
        self.data.qpos[3:7] = q[[6, 3, 4, 5]]  # x y z w -> w x y z
        self.data.qpos[7:] = q[7:]
        mj.mj_kinematics(self.model, self.data)

    def _sole(self, foot: int) -> "np.ndarray":
        fb = self.foot_body[foot]
        return self.data.xpos[fb] + self.data.xmat[fb].reshape(3, 3) @ self.sole_b

    def sole_points(self, q) -> "np.ndarray":
        """[2, 3] world positions of the (left, right) sole centres of state q [36] [m]."""
        self._kinematics(q)
        return self._np.stack([self._sole(0), self._sole(1)])

    def jacobian(self, q, foot: int) -> "np.ndarray":
        """[3, 6] d p_sole / d q_leg of `foot` at state q [36] (world frame, float64)."""
        np, mj = self._np, self._mj
        self._kinematics(q)
        mj.mj_comPos(self.model, self.data)
        jacp = np.zeros((3, self.model.nv))
        mj.mj_jac(self.model, self.data, jacp, None, self._sole(foot), self.foot_body[foot])
        return jacp[:, self.legs[foot][0]]

    def __call__(self, q, foot: int) -> tuple[torch.Tensor, list[int], list[int]]:
        """(J+ [6, 3] float32 on q's device, q indices [6], qd indices [6]) of `foot`'s leg at state q."""
        np = self._np
        J = self.jacobian(q, foot)
        P = J.T @ np.linalg.inv(J @ J.T + self.damping**2 * np.eye(3))
        _, qi, di = self.legs[foot]
        return torch.as_tensor(P, dtype=torch.float32, device=q.device), qi, di


# Branch stepper: (chunk, target [B, J], q [B, Dq], qd [B, Dv]) -> tuple of outputs [B, ...]; outputs[0] and
# outputs[1] are the next (q, qd); further outputs (e.g. body poses) are averaged too.
Stepper = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...]]
# Batched branch stepper: (target [M, J], q [M, Dq], qd [M, Dv], substeps [M] ints or None, worlds [M]) -> outputs
# [M, ...] for the M = k B branch worlds of every active bundle at once (worlds are independent, so the result is
# the per-chunk one); substeps: how many substeps each world runs (None: a whole control step); worlds: the main
# world each branch belongs to (its per-world physical constants are the branch's).
BatchStepper = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, "torch.Tensor | None", torch.Tensor], tuple[torch.Tensor, ...]
]


class Bundler:
    """Branch-pool bookkeeping and averaging for BCG over any stepper with Newton-style state layout.

    The pool of `cfg.pool_size` branch worlds is split into pool_size // B chunks of B worlds (one
    preallocated simulator each), so a control step only simulates the chunks in use. quat_slices[k] is the
    x y z w slice of output k (None: all linear); `root_pos` / `root_lin_vel` are the slices of q / qd
    holding the base position and linear velocity.
    """

    def __init__(
        self,
        cfg: BCGConfig,
        step_chunk: Stepper,
        quat_slices: tuple[slice | None, ...],
        root_pos: slice = slice(0, 3),
        root_lin_vel: slice = slice(0, 3),
        leg_map: Callable | None = None,
        step_batch: BatchStepper | None = None,
        substeps: int = 1,
    ):
        self.cfg = cfg
        # "leg" mapping: (q_start [Dq], foot) -> (J+ [n, 3], q indices [n], qd indices [n]); the G1's by default
        self.leg_map = leg_map
        if cfg.perturbation == "leg" and leg_map is None:
            self.leg_map = LegJacobian(cfg.leg_damping)
        self.step_chunk = step_chunk
        self.step_batch = step_batch  # when given, every active bundle runs in one call instead of per chunk
        self.substeps = substeps  # S, substeps per control step (a branch's first step runs S - skip)
        self.num_chunks = cfg.pool_size // cfg.branches
        self.quat_slices = quat_slices
        self.root_pos, self.root_lin_vel = root_pos, root_lin_vel
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.free = list(range(self.num_chunks))
        self.bundles: dict[int, _Bundle] = {}
        self._admitted: dict[int, int] = {}  # world -> chunk held between admit() and start()
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
        self.free = sorted(self.free + list(self._admitted.values()))
        self._admitted.clear()

    def _release(self, b: _Bundle) -> None:
        self.free.append(b.chunk)
        self.free.sort()

    def trigger(self, world: int, foot: int, q_start: torch.Tensor, qd_start: torch.Tensor, skip: int = 0) -> bool:
        """A touchdown of `foot` in `world`; q_start [Dq], qd_start [Dv] are its state before the impact (at the
        start of the step, or `skip` substeps into it). Returns True when a bundle was started."""
        if not self.admit(world, foot):
            return False
        self.start(world, foot, q_start, qd_start, skip)
        return True

    def admit(self, world: int, foot: int) -> bool:
        """Count a touchdown and say whether it can start a bundle (the world is not in one, a chunk is free);
        an admitted touchdown holds its chunk until `start`. Lets the caller compute the branch start (a
        partial step) for admitted touchdowns only."""
        st = self.stats
        st.triggers += 1
        st.triggers_per_foot[foot] += 1
        if world in self.bundles or world in self._admitted:
            st.busy += 1
            return False
        if not self.free:
            st.overflow += 1
            return False
        self._admitted[world] = self.free.pop(0)
        return True

    def start(self, world: int, foot: int, q_start: torch.Tensor, qd_start: torch.Tensor, skip: int = 0) -> None:
        """Start the bundle of an admitted touchdown: B perturbed copies of (q_start [Dq], qd_start [Dv])."""
        st, B = self.stats, self.cfg.branches
        if not 0 <= skip < self.substeps:
            raise ValueError(f"Bundler.start: skip must be in [0, {self.substeps}), got {skip}")
        if skip and self.step_batch is None:
            raise ValueError("Bundler.start: a branch start inside a control step needs a batch stepper")
        chunk = self._admitted.pop(world)
        dp = sample_ball(B, 3, self.cfg.sigma, self.gen, self.cfg.antithetic, q_start.device)
        dv = sample_ball(B, 3, self.cfg.sigma_v, self.gen, self.cfg.antithetic, q_start.device)
        # The offsets carry no gradient: the branches are q_start + offset in one autograd op each (adding 0.0
        # leaves every other coordinate bitwise as it was).
        off_q = torch.zeros(B, q_start.shape[-1], device=q_start.device)
        off_qd = torch.zeros(B, qd_start.shape[-1], device=q_start.device)
        if self.cfg.perturbation == "leg":
            P, qi, di = self.leg_map(q_start.detach(), foot)
            off_q[:, qi], off_qd[:, di] = dp @ P.T, dv @ P.T
        else:
            off_q[:, self.root_pos], off_qd[:, self.root_lin_vel] = dp, dv
        q, qd = q_start + off_q, qd_start + off_qd
        self.bundles[world] = _Bundle(world, foot, chunk, q, qd, dp, dv, skip=skip)
        st.bundles_started += 1
        st.start_substeps += skip

    def _step_branches(self, target: torch.Tensor, items: list[tuple[int, _Bundle]]) -> list[tuple[torch.Tensor, ...]]:
        """One control step of each bundle's B branches under its world's target; per bundle its outputs."""
        B = self.cfg.branches
        if self.step_batch is None:
            return [self.step_chunk(b.chunk, target[w].expand(B, -1), b.q, b.qd) for w, b in items]
        worlds = torch.as_tensor([w for w, _ in items], device=target.device)
        skips = [b.skip if b.steps_done == 0 else 0 for _, b in items]  # only a bundle's first step is partial
        substeps = None
        if any(skips):
            substeps = torch.as_tensor([self.substeps - k for k in skips]).repeat_interleave(B)
        out = self.step_batch(
            target[worlds].repeat_interleave(B, 0),
            torch.cat([b.q for _, b in items]),
            torch.cat([b.qd for _, b in items]),
            substeps,
            worlds.repeat_interleave(B),
        )
        return [tuple(o[k * B : (k + 1) * B] for o in out) for k in range(len(items))]

    def step_and_merge(
        self, target: torch.Tensor, main_out: tuple[torch.Tensor, ...]
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
        items = list(self.bundles.items())
        done: dict[int, tuple[torch.Tensor, ...]] = {}  # world -> its branches' outputs, bundles merging now
        for (w, b), out in zip(items, self._step_branches(target, items)):
            b.q, b.qd = out[0], out[1]
            b.steps_done += 1
            if b.steps_done < self.cfg.horizon:
                continue
            done[w] = out
            del self.bundles[w]
            self._release(b)
        if not done:
            return main_out, []
        # Every bundle merging in this step at once: outputs [B, m, ...] of the m worlds against main [m, ...].
        worlds = sorted(done)
        idx = torch.as_tensor(worlds, device=main_out[0].device)
        branches = [torch.stack([done[w][k] for w in worlds], dim=1) for k in range(len(main_out))]
        pos, vel = branches[0][..., self.root_pos].detach(), branches[1][..., self.root_lin_vel].detach()
        st.spread_pos_sum += float((pos - pos.mean(0)).pow(2).sum(-1).mean(0).sqrt().sum())
        st.spread_vel_sum += float((vel - vel.mean(0)).pow(2).sum(-1).mean(0).sqrt().sum())
        st.bundles_completed += len(worlds)
        new_out = tuple(
            main.index_put((idx,), bundle_mean(main[idx], o, qs))  # out of place: other worlds
            for main, o, qs in zip(main_out, branches, self.quat_slices)
        )  # keep their graph
        return new_out, worlds
