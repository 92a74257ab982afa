"""bcg-policy: small tools around policy artifacts.

bcg-policy export-hold -o DIR [--formats onnx torchscript] [--ref-horizon K]
    a "hold the default pose" policy (zero action) for bring-up
bcg-policy info DIR      print the contract summary and a timing of act()
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def hold_module(n_obs: int):
    """A torch module that always outputs the zero action (targets = default pose), [B, n_obs] -> [B, 29].
    The output still depends on the input graph-wise (0 * obs) so exporters keep the batch dimension."""
    import torch

    class Hold(torch.nn.Module):
        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return obs[:, :1] * 0.0 + torch.zeros(1, 29, dtype=obs.dtype)

    return Hold()


def export_hold(out_dir: str, formats=("onnx", "torchscript"), ref_horizon: int | None = None):
    from bcg_sim.policy.artifact import export_policy
    from bcg_sim.policy.contract import default_contract

    # Stand gains: a zero action leaves nothing to balance the robot, so the PD itself must hold it up.
    contract = default_contract(ref_horizon=ref_horizon, reference_name="stand", gains="stand")
    contract.description = "hold the default pose (zero action); bring-up policy, not trained"
    return export_policy(hold_module(contract.n_obs), contract, out_dir, formats)


def _info(path: str, runtime: str) -> None:
    from bcg_sim.policy.artifact import load_policy

    p = load_policy(path, runtime=runtime)
    c = p.contract
    print(
        f"{p.path}: runtime {p.runtime}, n_obs {c.n_obs}, control_dt {c.control_dt} s, "
        f"reference {c.reference.name!r} ({p.reference.num_frames} frames, {p.reference.duration:.2f} s)"
    )
    for name, s in c.slices().items():
        src = ""
        if name == "ref_root_offset_xy":
            pose = c.observation.root_source == "pose"
            src = " (pelvis from a pose source, /odometry)" if pose else " (leg odometry)"
        print(f"  obs[{s.start}:{s.stop}] {name}{src}")
    obs = np.zeros(c.n_obs, dtype=np.float32)
    times = [p.timed_act(obs)[1] for _ in range(200)]
    print(f"act(): median {1e3 * float(np.median(times)):.3f} ms, max {1e3 * max(times):.3f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="bcg-policy", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("export-hold", help="export the hold-default-pose policy")
    h.add_argument("-o", "--out", required=True, help="artifact folder to write")
    h.add_argument(
        "--formats",
        nargs="+",
        default=["onnx", "torchscript"],
        choices=["onnx", "torchscript"],
        help="network formats to write (default: onnx torchscript)",
    )
    h.add_argument("--ref-horizon", type=int, default=None, help="K (default: config/policy_contract.yaml)")
    i = sub.add_parser("info", help="summarize and time an artifact")
    i.add_argument("path")
    i.add_argument(
        "--runtime",
        default="auto",
        choices=["auto", "onnx", "torchscript"],
        help="network runtime (default auto: ONNX when present, else TorchScript)",
    )
    args = ap.parse_args(argv)
    from bcg_sim.config import ConfigError
    from bcg_sim.policy.contract import ArtifactError

    try:
        if args.cmd == "export-hold":
            out = export_hold(args.out, tuple(args.formats), args.ref_horizon)
            print(f"wrote {out}")
        else:
            _info(args.path, args.runtime)
    except (ArtifactError, ConfigError, OSError) as exc:
        print(f"bcg-policy: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
