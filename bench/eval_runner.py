"""The training evaluation's policy runner: N worlds in one BatchPolicyRunner call per control step (ours) against
one PolicyRunner per world (the baseline, how the evaluation ran before), in the same run.

    python bench/eval_runner.py [--policy policies/dance] [--worlds 4 8 12] [--steps 200] [--rounds 3]

Every 10 iterations a training runs its policy as the robot runs it in bcg_sim (docs/training.md, "What to
watch"): 4 whole-clip runs and 8 windows, through the node's runner (observation, leg odometry when the policy
observes its offset, inference, target clipping). This times that runner alone, on the clip's own frames as the
robots' states (the cost does not depend on them), so the simulator's share, the same on both sides, is left out;
bench/README.md has the whole evaluation measured with it. Both sides give the same targets (checked here, and
step by step in tests/test_policy_odometry.py). Rounds alternate baseline and ours, so a change of machine load
hits both; printed: ms per control step for all N worlds, median over rounds, and the ratio.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def states_from_clip(policy, n: int, steps: int, seed: int = 0):
    """[steps] robot states of n worlds [n, ...]: the clip's joints and pelvis orientation at n spread times,
    with encoder-sized noise (joint velocities and gyroscope zero)."""
    from bcg_sim.policy import RobotState

    ref, dt = policy.reference, policy.contract.control_dt
    rng = np.random.default_rng(seed)
    t0 = np.linspace(0.0, max(ref.duration - steps * dt, 0.0), n)
    out = []
    for k in range(steps):
        s = ref.sample(t0 + k * dt, aligned=False)
        q = s["joint_pos"] + rng.normal(0.0, 0.01, (n, 29))
        out.append(RobotState(q, np.zeros((n, 29)), s["root_quat_w"], np.zeros((n, 3))))
    return t0, out


def run_baseline(policy, t0, states) -> tuple[float, np.ndarray]:
    from bcg_policy_node.policy_runner import PolicyRunner
    from bcg_sim.policy import RobotState

    n = len(t0)
    world = lambda s, i: RobotState(*(x[i] for x in s[:4]))  # noqa: E731
    runners = [PolicyRunner(policy, copy.copy(policy.reference)) for _ in range(n)]
    for i, r in enumerate(runners):
        r.start(world(states[0], i), float(t0[i]))
    t = time.perf_counter()
    for s in states:
        targets = np.stack([r.step(world(s, i)) for i, r in enumerate(runners)])
    return time.perf_counter() - t, targets


def run_ours(policy, t0, states) -> tuple[float, np.ndarray]:
    from bcg_policy_node.policy_runner import BatchPolicyRunner

    runner = BatchPolicyRunner(policy, [copy.copy(policy.reference) for _ in t0])
    runner.start(states[0], t0)
    t = time.perf_counter()
    for s in states:
        targets, causes = runner.step(s)
    assert not any(causes), causes
    return time.perf_counter() - t, targets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", default=str(REPO / "policies" / "dance"))
    ap.add_argument("--worlds", type=int, nargs="+", default=[4, 8, 12])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    if args.steps < 1 or args.rounds < 1 or min(args.worlds) < 1:
        print("eval_runner: --steps, --rounds and --worlds must be >= 1", file=sys.stderr)
        return 2
    from bcg_sim.policy import load_policy

    policy = load_policy(args.policy)
    odometry = "ref_root_offset_xy" in policy.contract.slices()
    print(f"policy {args.policy} (leg odometry: {'yes' if odometry else 'no'}), {args.steps} control steps per round")
    print(f"{'worlds':>6}  {'baseline ms/step':>16}  {'ours ms/step':>12}  {'ratio':>6}")
    for n in args.worlds:
        t0, states = states_from_clip(policy, n, args.steps)
        base, ours = [], []
        for _ in range(args.rounds):
            tb, want = run_baseline(policy, t0, states)
            to, got = run_ours(policy, t0, states)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
            base.append(1e3 * tb / args.steps)
            ours.append(1e3 * to / args.steps)
        b, o = statistics.median(base), statistics.median(ours)
        print(f"{n:>6}  {b:>16.2f}  {o:>12.2f}  {b / o:>5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
