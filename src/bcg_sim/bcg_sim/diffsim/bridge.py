"""Torch <-> Newton bridge: one `torch.autograd.Function` per control step.

Each differentiable control step owns a preallocated `_StepBuffers`: one wp.Tape per substep, `substeps + 1`
Newton States and `substeps` Controls. A tape replays whatever is in the arrays it recorded at backward time,
so steps must not share arrays; torch's graph chains the steps (10 steps of 4 substeps give the state of 1 step
of 40 bitwise and its gradient to 1e-7). Buffers are reused across rollouts: `Simulator.new_rollout()` starts again
from the first,
and a backward through a step whose buffers were since reused raises.

Per substep, on its own tape: contact wrench (kernels.contact_wrench) -> PD torque (kernels.pd_torque) ->
Featherstone step. Outside the tape: per-foot contact diagnostics (kernels.foot_contact_stats).
Backward re-runs each substep's forward before replaying its tape, because SolverFeatherstone keeps its
mass matrix / Jacobian / Cholesky factor in solver-owned arrays that every step overwrites (without this,
every replayed substep would use the matrices of the last step simulated: 0.5-5 % gradient errors over a
40-substep control step in the air, more in contact). Cost: one extra forward per backward.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import newton
import torch
import warp as wp
from torch.autograd.function import once_differentiable

from bcg_sim.config import ConfigError
from bcg_sim.diffsim import kernels
from bcg_sim.diffsim.config import SimConfig
from bcg_sim.diffsim.model import COORDS_PER_WORLD, DOFS_PER_WORLD, NUM_JOINTS, G1Model, build_model


@dataclass
class StepOutput:
    """Result of one control step for N worlds (Newton layout; `bcg_sim.diffsim.state` converts).

    joint_q [N, 36], joint_qd [N, 35], body_q [N, 30, 7] (p_w, q_wb x y z w), body_qd [N, 30, 6]
    (v of each body COM in world, omega_w) are differentiable. Contact diagnostics are not:
    foot_force [N, 2] total normal force on (left, right) sole at the end of the step [N];
    foot_force_peak [N, 2] its maximum over the step's substeps [N]; foot_penetration [N, 2] deepest sole
    sphere penetration at the end of the step [m]. foot_onset [N, 2] (native backend; None on newton): the
    first substep end k (1..S) whose state has a normal force on the sole, -1 if none -- where BCG starts a
    touchdown's branches (state k - 1).
    """

    joint_q: torch.Tensor
    joint_qd: torch.Tensor
    body_q: torch.Tensor
    body_qd: torch.Tensor
    foot_force: torch.Tensor
    foot_force_peak: torch.Tensor
    foot_penetration: torch.Tensor
    foot_onset: torch.Tensor | None = None


class _StepBuffers:
    """Everything one recorded control step touches, allocated once."""

    def __init__(self, m: G1Model, substeps: int, requires_grad: bool):
        model = m.model
        self.states = [model.state(requires_grad=requires_grad) for _ in range(substeps + 1)]
        self.controls = [model.control(requires_grad=requires_grad) for _ in range(substeps)]
        self.target = wp.zeros((m.num_worlds, NUM_JOINTS), dtype=float, device=m.device, requires_grad=requires_grad)
        # One tape per substep: backward replays them last to first, re-running each substep's forward
        # first (see _SimStep.backward).
        self.tapes = [wp.Tape() for _ in range(substeps)] if requires_grad else None
        self.generation = -1
        first, last = self.states[0], self.states[-1]
        n = m.num_worlds
        # torch views sharing memory with the Warp arrays (no copies)
        self.q_in = wp.to_torch(first.joint_q, requires_grad=False).view(n, COORDS_PER_WORLD)
        self.qd_in = wp.to_torch(first.joint_qd, requires_grad=False).view(n, DOFS_PER_WORLD)
        self.target_t = wp.to_torch(self.target, requires_grad=False)
        self.q_out = wp.to_torch(last.joint_q, requires_grad=False).view(n, COORDS_PER_WORLD)
        self.qd_out = wp.to_torch(last.joint_qd, requires_grad=False).view(n, DOFS_PER_WORLD)
        self.body_q = wp.to_torch(last.body_q, requires_grad=False).view(n, m.bodies_per_world, 7)
        self.body_qd = wp.to_torch(last.body_qd, requires_grad=False).view(n, m.bodies_per_world, 6)


class Simulator:
    """N G1 worlds on Newton Featherstone (use_tile_gemm) with bcg's contact law and PD, stepped one
    control period at a time from torch tensors. See `step()`."""

    def __init__(self, cfg: SimConfig, num_worlds: int):
        cfg.validate()
        if cfg.backend != "newton":
            raise ConfigError(
                f"sim config: backend: bridge.Simulator is the newton backend, the config says "
                f"{cfg.backend!r}; use make_simulator(cfg, n) or cfg.with_backend('newton')"
            )
        self.cfg = cfg
        self.substeps = cfg.substeps
        self.m = build_model(cfg, num_worlds, requires_grad=True)
        self.num_worlds = num_worlds
        self.device = cfg.device
        c = cfg.contact
        self._contact_args = (float(c.ke), float(c.kd), float(c.kf), float(c.friction_mu))
        self.solver = newton.solvers.SolverFeatherstone(
            self.m.model, use_tile_gemm=cfg.solver.use_tile_gemm, angular_damping=cfg.solver.angular_damping
        )
        self._tape_buffers: list[_StepBuffers] = []  # grown lazily up to cfg.max_tape_steps
        self._slot = 0
        self._generation = 0
        self._scratch: _StepBuffers | None = None  # forward-only steps (no tape)
        n = num_worlds
        self._foot_force = wp.zeros((n, 2), dtype=float, device=self.device)
        self._foot_pen = wp.zeros((n, 2), dtype=float, device=self.device)
        self._foot_peak = wp.zeros((n, 2), dtype=float, device=self.device)

    # ------------------------------------------------------------------ public
    def new_rollout(self) -> None:
        """Start recording from the first buffer again. Gradients of steps recorded before this call can
        no longer be computed (their backward raises)."""
        self._slot = 0
        self._generation += 1

    def default_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Newton (joint_q [N, 36], joint_qd [N, 35]) of the default standing pose, at rest."""
        q = torch.as_tensor(self.m.default_joint_q, dtype=torch.float32, device=self.torch_device)
        q = q.expand(self.num_worlds, -1).clone()
        return q, torch.zeros(self.num_worlds, DOFS_PER_WORLD, device=self.torch_device)

    @property
    def torch_device(self) -> torch.device:
        """The torch device of every tensor this simulator takes and returns (config `device`)."""
        return torch.device(self.device)

    def step(self, target_q: torch.Tensor, joint_q: torch.Tensor, joint_qd: torch.Tensor) -> StepOutput:
        """Advance all worlds by one control period (cfg.substeps Featherstone steps).

        target_q [N, 29] PD position targets [rad]; joint_q [N, 36], joint_qd [N, 35] Newton layout.
        Records a tape (and returns differentiable tensors) when grad mode is on and any input requires
        grad; otherwise runs forward only on scratch buffers.
        """
        n = self.num_worlds
        for name, t, shape in (
            ("target_q", target_q, (n, NUM_JOINTS)),
            ("joint_q", joint_q, (n, COORDS_PER_WORLD)),
            ("joint_qd", joint_qd, (n, DOFS_PER_WORLD)),
        ):
            if tuple(t.shape) != shape:
                raise ValueError(f"Simulator.step: {name} has shape {tuple(t.shape)}, expected {shape}")
        differentiable = torch.is_grad_enabled() and any(t.requires_grad for t in (target_q, joint_q, joint_qd))
        if differentiable:
            q, qd, bq, bqd = _SimStep.apply(self, target_q, joint_q, joint_qd)
        else:
            buf = self._forward(self._scratch_buffers(), target_q, joint_q, joint_qd, record=False)
            q, qd, bq, bqd = (buf.q_out.clone(), buf.qd_out.clone(), buf.body_q.clone(), buf.body_qd.clone())
        return StepOutput(
            joint_q=q,
            joint_qd=qd,
            body_q=bq,
            body_qd=bqd,
            foot_force=wp.to_torch(self._foot_force).clone(),
            foot_force_peak=wp.to_torch(self._foot_peak).clone(),
            foot_penetration=wp.to_torch(self._foot_pen).clone(),
        )

    # ------------------------------------------------------------------ internals
    def _scratch_buffers(self) -> _StepBuffers:
        if self._scratch is None:
            self._scratch = _StepBuffers(self.m, self.substeps, requires_grad=False)
        return self._scratch

    def _next_tape_buffers(self) -> _StepBuffers:
        if self._slot >= self.cfg.max_tape_steps:
            raise RuntimeError(
                f"rollout recorded {self._slot} differentiable control steps, the limit max_tape_steps="
                f"{self.cfg.max_tape_steps}; call new_rollout() (after backward) or raise the limit"
            )
        if self._slot == len(self._tape_buffers):
            self._tape_buffers.append(_StepBuffers(self.m, self.substeps, requires_grad=True))
        buf = self._tape_buffers[self._slot]
        self._slot += 1
        buf.generation = self._generation * 1_000_003 + self._slot
        return buf

    def _forward(self, buf: _StepBuffers, target_q, joint_q, joint_qd, record: bool) -> _StepBuffers:
        with _on_torch_stream(self.device):
            return self._forward_on_stream(buf, target_q, joint_q, joint_qd, record)

    def _forward_on_stream(self, buf: _StepBuffers, target_q, joint_q, joint_qd, record: bool) -> _StepBuffers:
        with torch.no_grad():
            buf.q_in.copy_(joint_q)
            buf.qd_in.copy_(joint_qd)
            buf.target_t.copy_(target_q)
        self._foot_peak.zero_()
        if record:
            for tape in buf.tapes:
                tape.reset()
        s0 = buf.states[0]
        with _maybe(buf.tapes[0] if record else None):
            # body poses/twists of the input state (its joint coordinates came from torch)
            newton.eval_fk(self.m.model, s0.joint_q, s0.joint_qd, s0)
        m, n = self.m, self.num_worlds
        for i in range(self.substeps):
            self._substep(buf, i, buf.tapes[i] if record else None)
            s_out = buf.states[i + 1]
            wp.launch(
                kernels.foot_contact_stats,
                dim=(n, 2),
                inputs=[
                    s_out.body_q,
                    s_out.body_qd,
                    m.model.body_com,
                    m.foot_body_arr,
                    m.foot_sphere_start,
                    m.sphere_pos_b,
                    m.sphere_radius,
                    m.bodies_per_world,
                    *self._contact_args[:2],
                ],
                outputs=[self._foot_force, self._foot_pen, self._foot_peak],
                device=self.device,
            )
        return buf

    def _substep(self, buf: _StepBuffers, i: int, tape: wp.Tape | None) -> None:
        """Substep i of a control step: contact wrench -> PD torque -> Featherstone step (on `tape` if given)."""
        m, model, n = self.m, self.m.model, self.num_worlds
        ke, kd, kf, mu = self._contact_args
        s_in, s_out, ctrl = buf.states[i], buf.states[i + 1], buf.controls[i]
        with _maybe(tape):
            wp.launch(
                kernels.contact_wrench,
                dim=(n, m.contact_body.shape[0]),
                inputs=[
                    s_in.body_q,
                    s_in.body_qd,
                    model.body_com,
                    m.contact_body,
                    m.sphere_start,
                    m.sphere_pos_b,
                    m.sphere_radius,
                    m.bodies_per_world,
                    ke,
                    kd,
                    kf,
                    mu,
                ],
                outputs=[s_in.body_f],
                device=self.device,
            )
            wp.launch(
                kernels.pd_torque,
                dim=(n, DOFS_PER_WORLD),
                inputs=[
                    s_in.joint_q,
                    s_in.joint_qd,
                    buf.target,
                    m.kp,
                    m.kd,
                    m.effort_limit,
                    COORDS_PER_WORLD,
                    DOFS_PER_WORLD,
                ],
                outputs=[ctrl.joint_f],
                device=self.device,
            )
            self.solver.step(s_in, s_out, ctrl, None, self.cfg.sim_dt)


def _on_torch_stream(device: str):
    """On CUDA, run Warp work on torch's current stream, so torch copies into/out of the shared buffers and
    Warp kernels are ordered without explicit synchronisation. On CPU there is nothing to order."""
    if device.startswith("cuda"):
        return wp.ScopedStream(wp.stream_from_torch(torch.cuda.current_stream(device)))
    return contextlib.nullcontext()


class _maybe:
    """`with tape:` when recording, a no-op otherwise."""

    def __init__(self, tape):
        self.tape = tape

    def __enter__(self):
        if self.tape is not None:
            self.tape.__enter__()

    def __exit__(self, *exc):
        if self.tape is not None:
            self.tape.__exit__(*exc)


class _SimStep(torch.autograd.Function):
    """(target_q, joint_q, joint_qd) -> (joint_q', joint_qd', body_q', body_qd') for one control step."""

    @staticmethod
    def forward(ctx, sim: Simulator, target_q, joint_q, joint_qd):
        buf = sim._forward(sim._next_tape_buffers(), target_q, joint_q, joint_qd, record=True)
        ctx.sim, ctx.buf, ctx.generation = sim, buf, buf.generation
        return buf.q_out.clone(), buf.qd_out.clone(), buf.body_q.clone(), buf.body_qd.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, g_q, g_qd, g_bq, g_bqd):
        buf: _StepBuffers = ctx.buf
        if buf.generation != ctx.generation:
            raise RuntimeError(
                "backward through a bcg_sim control step whose buffers were reused by a later "
                "rollout: call backward before Simulator.new_rollout() / env.new_rollout()"
            )
        last, first = buf.states[-1], buf.states[0]
        # Seed the output adjoints in place (torch views of the Warp .grad buffers), then replay the tape.
        for arr, g in ((last.joint_q, g_q), (last.joint_qd, g_qd), (last.body_q, g_bq), (last.body_qd, g_bqd)):
            if g is not None:
                wp.to_torch(arr.grad, requires_grad=False).view(-1).copy_(g.reshape(-1))
        # SolverFeatherstone keeps its mass matrix, Jacobian and Cholesky factor (M, J, P, H, L) in solver-
        # owned arrays that every step overwrites, so a replayed tape would read the values of whatever step
        # ran last. Re-running substep i's forward (deterministic: same values into the same arrays) right
        # before replaying its tape makes each adjoint see its own substep's matrices.
        sim: Simulator = ctx.sim
        with _on_torch_stream(sim.device):
            for i in reversed(range(sim.substeps)):
                sim._substep(buf, i, None)
                buf.tapes[i].backward()
            out = (
                wp.to_torch(buf.target.grad).clone(),
                wp.to_torch(first.joint_q.grad).view_as(buf.q_in).clone(),
                wp.to_torch(first.joint_qd.grad).view_as(buf.qd_in).clone(),
            )
            for tape in buf.tapes:
                tape.zero()
        return (None, *out)
