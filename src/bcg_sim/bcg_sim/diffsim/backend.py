"""One constructor for both simulator backends (config `backend`): the rest of bcg sees the `SimulatorBackend`
protocol.

- "newton": `bridge.Simulator`, Newton's Featherstone on Warp (CPU and CUDA), per-substep tapes.
- "native": `native.NativeSimulator`, Pinocchio's articulated-body algorithm with analytic derivatives (CPU),
  ~50x the Newton path's fwd+bwd throughput here (bench/README.md).
Both take and return Newton's state layout and pass the same tests (tests/test_diffsim.py runs both).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch

from bcg_sim.diffsim.config import SimConfig

if TYPE_CHECKING:
    from bcg_sim.diffsim.bridge import StepOutput
    from bcg_sim.diffsim.model import G1Model


class SimulatorBackend(Protocol):
    """N G1 worlds stepped one control period at a time, in Newton's state layout (joint_q [N, 36] with the
    root quaternion x y z w, joint_qd [N, 35]); differentiable when grad mode is on and an input requires it."""

    num_worlds: int
    m: G1Model  # the model's tables (joints, bodies, contact spheres, PD gains)

    @property
    def torch_device(self) -> torch.device:
        """The device of every tensor the simulator takes and returns."""
        ...

    def new_rollout(self) -> None:
        """Steps recorded before this call belong to a finished rollout."""
        ...

    def default_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(joint_q, joint_qd) of the default standing pose at rest."""
        ...

    def step(self, target_q: torch.Tensor, joint_q: torch.Tensor, joint_qd: torch.Tensor) -> StepOutput:
        """One control period: PD targets target_q [N, 29] [rad] from (joint_q, joint_qd)."""
        ...


def make_simulator(cfg: SimConfig, num_worlds: int) -> SimulatorBackend:
    """The configured backend's simulator of `num_worlds` G1 worlds."""
    if cfg.backend == "native":
        from bcg_sim.diffsim.native import NativeSimulator

        return NativeSimulator(cfg, num_worlds)
    from bcg_sim.diffsim.bridge import Simulator

    return Simulator(cfg, num_worlds)


def make_branch_pool(cfg: SimConfig) -> tuple[list, object | None]:
    """BCG's branch simulators: (chunk simulators, batch simulator). The native backend steps every active
    bundle in one call (one simulator of any batch size; no chunk simulators): one call's fixed cost instead of
    one per bundle. The newton backend keeps pool_size // B preallocated simulators of B worlds (its tapes and
    buffers are sized per simulator) and steps each active chunk on its own."""
    b = cfg.bcg
    if cfg.backend == "native":
        from bcg_sim.diffsim.native import NativeSimulator

        return [], NativeSimulator(cfg, b.pool_size, any_batch=True)
    return [make_simulator(cfg, b.branches) for _ in range(b.pool_size // b.branches)], None
