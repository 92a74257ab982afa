"""One constructor for both simulator backends (config `backend`): the rest of bcg sees one `Simulator` API.

- "newton": `bridge.Simulator`, Newton's Featherstone on Warp (CPU and CUDA), per-substep tapes.
- "native": `native.NativeSimulator`, Pinocchio's articulated-body algorithm with analytic derivatives (CPU),
  ~50x the Newton path's fwd+bwd throughput here (bench/README.md).
Both take and return Newton's state layout and pass the same tests (tests/test_diffsim.py runs both).
"""

from __future__ import annotations

from bcg_sim.diffsim.config import SimConfig


def make_simulator(cfg: SimConfig, num_worlds: int):
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
