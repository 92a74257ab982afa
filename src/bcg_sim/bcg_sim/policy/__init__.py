"""The policy artifact and the observation/action contract: the seam between training and deployment.

- `PolicyContract` (policy.yaml): joint order, default pose, gains, action scale, observation layout and
  normalization, control period, reference clip.
- `build_observation`: the one observation builder (numpy or batched torch).
- `ReferenceTrack`: the reference clip, sampled in windows of the next K control steps.
- `export_policy` / `load_policy` -> `Policy.act(obs) -> action`; every artifact problem raises `ArtifactError`.
"""

from bcg_sim.policy.artifact import Policy, PolicyLoadError, export_policy, load_policy  # noqa: F401
from bcg_sim.policy.contract import (  # noqa: F401
    METADATA_VERSION,
    ArtifactError,
    ObservationSpec,
    ObsSlice,
    PolicyContract,
    PolicyContractError,
    ReferenceSpec,
    default_contract,
)
from bcg_sim.policy.observation import (  # noqa: F401
    FEATURES,
    OPTIONAL_FEATURES,
    STANDARD_LAYOUT,
    ReferenceWindow,
    RobotState,
    build_observation,
    projected_gravity,
)
from bcg_sim.policy.reference import ReferenceTrack  # noqa: F401
