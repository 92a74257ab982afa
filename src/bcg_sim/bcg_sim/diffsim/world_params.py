"""Per-world physical constants of the dynamics: domain randomization inside the differentiable simulator.

Every world of a `G1DiffEnv` may run its own friction coefficient and friction slope, PD gains and pelvis / torso
mass and COM (`env.set_world_params(ids, params)`); the rest of the robot and the contact law are the sim config's.
They are constants of the dynamics: nothing is differentiated with respect to them, and the reverse mode with
respect to state and actions stays exact under them. Only the native backend runs them; the newton backend refuses any
non-nominal value (`ConfigError`). The identity (`WorldParams.nominal(n)`) is the sim config's model itself, bit for
bit. bcg_train's task draws them per episode from task.randomize (docs/training.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from bcg_sim.diffsim.model import NUM_JOINTS

# Bodies whose mass and COM may differ per world: the two heaviest links, where a payload, a battery or a
# misplaced COM of the real robot sits (BeyondMimic randomizes the torso's COM).
MASS_BODIES = ("pelvis", "torso_link")


@dataclass
class WorldParams:
    """Per-world constants, rows = worlds (float64, CPU). Scales are relative to the sim config's model."""

    friction_scale: torch.Tensor  # [N] multiplies contact.friction_mu (the Coulomb cap of every sphere)
    kp_scale: torch.Tensor  # [N, 29] multiplies each joint's PD stiffness (motor order)
    kd_scale: torch.Tensor  # [N, 29] multiplies each joint's PD damping
    mass_scale: torch.Tensor  # [N, len(MASS_BODIES)] multiplies the body's mass and its rotational inertia
    com_offset_b: torch.Tensor  # [N, len(MASS_BODIES), 3] [m] added to the body's COM, body frame
    # [N] multiplies contact.kf, the slope of the regularised friction below its cap (how fast a loaded sole
    # creeps: f_t = -kf v_t); below 1 the feet slip more under the same tangential load
    friction_slope_scale: torch.Tensor

    @staticmethod
    def nominal(n: int) -> WorldParams:
        """n worlds with the sim config's own model."""
        k = len(MASS_BODIES)
        d = torch.float64
        return WorldParams(
            torch.ones(n, dtype=d),
            torch.ones(n, NUM_JOINTS, dtype=d),
            torch.ones(n, NUM_JOINTS, dtype=d),
            torch.ones(n, k, dtype=d),
            torch.zeros(n, k, 3, dtype=d),
            torch.ones(n, dtype=d),
        )

    @staticmethod
    def draw(
        n: int,
        generator: torch.Generator,
        friction_scale,
        kp_scale,
        kd_scale,
        pelvis_mass_scale,
        torso_mass_scale,
        torso_com_offset,
        friction_slope_scale=(1.0, 1.0),
    ) -> WorldParams:
        """n worlds uniform in [min, max] scale ranges: one friction scale per world (one floor under both feet),
        kp / kd scales per joint and world (a real G1's gain errors are per motor: three motor types, each
        joint's own friction and temperature), pelvis and torso mass scales, and a torso COM offset in
        +-torso_com_offset [m] (3), then one friction slope scale per world -- drawn only when its range is not
        [1, 1], so that a draw without it keeps the random stream it had. In this order from `generator`:
        reproducible per seed."""
        d = torch.float64

        def uniform(r, *shape):
            return r[0] + (r[1] - r[0]) * torch.rand(*shape, generator=generator, dtype=d)

        p = WorldParams.nominal(n)
        p.friction_scale = uniform(friction_scale, n)
        p.kp_scale = uniform(kp_scale, n, NUM_JOINTS)
        p.kd_scale = uniform(kd_scale, n, NUM_JOINTS)
        p.mass_scale[:, MASS_BODIES.index("pelvis")] = uniform(pelvis_mass_scale, n)
        p.mass_scale[:, MASS_BODIES.index("torso_link")] = uniform(torso_mass_scale, n)
        unit = 2 * torch.rand(n, 3, generator=generator, dtype=d) - 1  # uniform in [-1, 1]
        p.com_offset_b[:, MASS_BODIES.index("torso_link")] = unit * torch.as_tensor(torso_com_offset, dtype=d)
        if list(friction_slope_scale) != [1.0, 1.0]:
            p.friction_slope_scale = uniform(friction_slope_scale, n)
        return p

    @property
    def num_worlds(self) -> int:
        return int(self.friction_scale.shape[0])

    def is_nominal(self) -> bool:
        """Every world has the sim config's model."""
        return bool(
            (self.friction_scale == 1).all()
            and (self.kp_scale == 1).all()
            and (self.kd_scale == 1).all()
            and (self.mass_scale == 1).all()
            and (self.com_offset_b == 0).all()
            and (self.friction_slope_scale == 1).all()
        )

    def take(self, rows) -> WorldParams:
        """The rows `rows` ([M] indices) as a WorldParams of M worlds."""
        rows = torch.as_tensor(rows, dtype=torch.long).reshape(-1)
        return WorldParams(*(getattr(self, f.name)[rows] for f in fields(self)))

    def put(self, rows, other: WorldParams) -> None:
        """Rows `rows` ([M] indices) <- other's M worlds (in place)."""
        rows = torch.as_tensor(rows, dtype=torch.long).reshape(-1)
        if other.num_worlds != rows.numel():
            raise ValueError(f"WorldParams.put: {other.num_worlds} worlds for {rows.numel()} rows")
        for f in fields(self):
            getattr(self, f.name)[rows] = getattr(other, f.name).to(torch.float64)

    def clone(self) -> WorldParams:
        return WorldParams(*(getattr(self, f.name).clone() for f in fields(self)))

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @staticmethod
    def from_dict(d: dict) -> WorldParams:
        n = torch.as_tensor(d["friction_scale"]).shape[0]
        d = {"friction_slope_scale": torch.ones(n), **d}  # checkpoints written before it existed: nominal
        return WorldParams(**{f.name: torch.as_tensor(d[f.name], dtype=torch.float64) for f in fields(WorldParams)})
