"""A reference-playback policy: an exported network whose PD targets are the reference's next frame.

action = ref_joint_pos_rel[first window frame] / action_scale, so target = default + scale * action = the
clip's joint angles one control step ahead. Open loop (no balance): it tracks a clip until it falls, which
makes it a policy-free probe of contact depth on a *moving* robot (touchdowns), for `bcg-experiment kappa-map
--playback MOTION` before any policy is trained.
"""

from __future__ import annotations

from pathlib import Path


def export_playback(motion_name: str, out_dir: str | Path, gains: str = "stand") -> Path:
    """Export the playback policy of clip `motion_name` (built-in name or motion file) to out_dir."""
    import torch

    import bcg_sim.motion
    from bcg_sim.policy import ReferenceTrack, default_contract, export_policy

    c = default_contract(reference_name=Path(motion_name).stem, gains=gains)
    sl = c.slices()["ref_joint_pos_rel"]
    inv_scale = 1.0 / torch.tensor(c.action_scale, dtype=torch.float32).reshape(1, -1)

    class Playback(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("inv_scale", inv_scale)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return obs[:, sl.start : sl.start + inv_scale.shape[1]] * self.inv_scale

    ref = ReferenceTrack.from_motion(bcg_sim.motion.load(motion_name))
    c.description = f"open-loop playback of {motion_name} (PD targets = next reference frame); not trained"
    return export_policy(Playback(), c, out_dir, ("onnx",), ref)
