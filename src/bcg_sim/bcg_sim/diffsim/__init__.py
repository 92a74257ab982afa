"""bcg_sim.diffsim: differentiable batched G1 simulation with Bundled Contact Gradients, on one of two backends
(backend: Newton Featherstone on Warp, or native Pinocchio ABA with analytic derivatives). Modules: config
(SimConfig, config/sim.yaml), backend (make_simulator), model (Newton model + contact/PD tables), native (the
Pinocchio backend, csrc/), kernels (Warp kernels), state (bcg <-> Newton state conventions), bridge (torch autograd
Function per control step), bundle (BCG), env (batched env with reset/step/termination), world_params (per-world
physical constants: domain randomization). Docs: docs/sim.md."""

import os

import warp as wp

# Warp logs its start-up banner and every (cached) module load at INFO; that buries progress bars and results.
# BCG_WARP_VERBOSE=1 keeps them.
if os.environ.get("BCG_WARP_VERBOSE", "0") != "1":
    wp.config.log_level = wp.LOG_WARNING

from bcg_sim.diffsim.backend import make_simulator  # noqa: F401
from bcg_sim.diffsim.bridge import Simulator, StepOutput  # noqa: F401
from bcg_sim.diffsim.bundle import BCGStats, Bundler, bundle_mean, quat_mean_about, sample_ball  # noqa: F401
from bcg_sim.diffsim.config import (  # noqa: F401
    ActuationConfig,
    BCGConfig,
    ContactConfig,
    SimConfig,
    SolverConfig,
    TerminationConfig,
    load_sim_config,
    sim_config_from_dict,
)
from bcg_sim.diffsim.env import EnvStep, G1DiffEnv, motion_state  # noqa: F401
from bcg_sim.diffsim.state import SimState, from_newton, to_newton  # noqa: F401
from bcg_sim.diffsim.world_params import MASS_BODIES, WorldParams  # noqa: F401
