"""Robot state in bcg's public convention, and its (differentiable) conversion to Newton's.

bcg (public):  root_pos_w [N, 3] pelvis origin [m]; root_quat_w [N, 4] pelvis orientation, **w x y z**;
               root_lin_vel_w [N, 3] velocity of the pelvis origin, world [m/s]; root_ang_vel_w [N, 3] world
               [rad/s]; joint_pos / joint_vel [N, 29] motor order [rad, rad/s].  Same as `bcg_sim.motion`.
Newton:        joint_q [N, 36] = (p_w, q **x y z w**, 29 joints); joint_qd [N, 35] = (v of the pelvis
               *COM* in world, omega_w, 29 joint rates).
The conversion happens here and only here, with torch ops, so gradients pass through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bcg_sim.diffsim.kernels import FREE_COORDS, FREE_DOFS
from bcg_sim.quat import rotate, wxyz_to_xyzw, xyzw_to_wxyz


@dataclass
class SimState:
    """One state per world, bcg convention (see module docstring). Tensors may carry autograd history."""

    root_pos_w: torch.Tensor  # [N, 3]
    root_quat_w: torch.Tensor  # [N, 4] w x y z
    root_lin_vel_w: torch.Tensor  # [N, 3]
    root_ang_vel_w: torch.Tensor  # [N, 3]
    joint_pos: torch.Tensor  # [N, 29]
    joint_vel: torch.Tensor  # [N, 29]

    @property
    def num_worlds(self) -> int:
        return int(self.root_pos_w.shape[0])

    def detach(self) -> SimState:
        return SimState(*(t.detach() for t in self.as_tuple()))

    def as_tuple(self) -> tuple[torch.Tensor, ...]:
        return (
            self.root_pos_w,
            self.root_quat_w,
            self.root_lin_vel_w,
            self.root_ang_vel_w,
            self.joint_pos,
            self.joint_vel,
        )


def to_newton(s: SimState, root_com_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """bcg state -> (joint_q [N, 36], joint_qd [N, 35]) in Newton's layout. root_com_b: [3] pelvis COM."""
    q = s.root_quat_w / s.root_quat_w.norm(dim=-1, keepdim=True)
    com_offset_w = rotate(q, root_com_b.expand_as(s.root_pos_w))
    v_com = s.root_lin_vel_w + torch.cross(s.root_ang_vel_w, com_offset_w, dim=-1)
    joint_q = torch.cat([s.root_pos_w, wxyz_to_xyzw(q), s.joint_pos], dim=-1)
    joint_qd = torch.cat([v_com, s.root_ang_vel_w, s.joint_vel], dim=-1)
    return joint_q, joint_qd


def from_newton(joint_q: torch.Tensor, joint_qd: torch.Tensor, root_com_b: torch.Tensor) -> SimState:
    """Newton (joint_q [N, 36], joint_qd [N, 35]) -> bcg state."""
    quat = xyzw_to_wxyz(joint_q[:, 3:FREE_COORDS])
    omega = joint_qd[:, 3:FREE_DOFS]
    com_offset_w = rotate(quat, root_com_b.expand(joint_q.shape[0], 3))
    v_origin = joint_qd[:, 0:3] - torch.cross(omega, com_offset_w, dim=-1)
    return SimState(
        root_pos_w=joint_q[:, 0:3],
        root_quat_w=quat,
        root_lin_vel_w=v_origin,
        root_ang_vel_w=omega,
        joint_pos=joint_q[:, FREE_COORDS:],
        joint_vel=joint_qd[:, FREE_DOFS:],
    )
