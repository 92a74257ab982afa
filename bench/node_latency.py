"""Node latency: LowState -> LowCmd through the real policy node, over DDS on loopback.

    python bench/node_latency.py [--seconds 20] [--hidden 512 256 128] [--rt-priority 0]

A robot stand-in (this process) publishes LowState at 500 Hz with absolute deadlines; the policy node
(`python -m bcg_policy_node.policy_node`, config/policy_node.yaml, its own process) runs an untrained
exported MLP policy (ONNX) in RUN. Every LowState carries a marker in `mode_machine` (cycling 1..250),
which the node copies into each LowCmd it sends, so each LowCmd names the newest LowState the node had.

Measured (ms):
- state -> next LowCmd: LowState publish -> arrival of the first LowCmd carrying its marker. The node
  streams LowCmd at 500 Hz from its own loop, so this includes waiting for the next tick (0..2 ms).
- state -> new policy targets: LowState publish -> the LowCmd whose targets changed (a policy step, every
  20 ms) and that was computed from that LowState: observation + inference + CRC + DDS, plus tick wait.
- LowCmd period: spacing of LowCmd arrivals (500 Hz nominal).
- policy step: PolicyRunner.step (observation, ONNX inference, clipping) timed in this process on the
  same artifact, and the node's own control-tick compute/policy p99 from /diagnostics.
Prints a markdown table (paste into bench/README.md with the command line).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RATE_HZ = 500.0
MARKERS = 250  # mode_machine values used as markers (uint8; 0 kept out)


def export_mlp(out: Path, hidden: list[int]) -> Path:
    """An untrained MLP policy artifact (default contract), [B, n_obs] -> [B, 29], small output scale."""
    import torch

    from bcg_sim.policy import default_contract, export_policy

    torch.manual_seed(0)
    c = default_contract(reference_name="stand")
    dims = [c.n_obs, *hidden, 29]
    layers: list[torch.nn.Module] = []
    for a, b in zip(dims[:-1], dims[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ELU()]
    net = torch.nn.Sequential(*layers[:-1])
    with torch.no_grad():
        net[-1].weight.mul_(0.01)  # keep targets near the default pose (it is a latency bench, not a walk)
    c.description = f"untrained MLP {dims} for bench/node_latency.py"
    return export_policy(net, c, out, ("onnx",))


def policy_step_times(artifact: Path, n: int = 2000) -> np.ndarray:
    """PolicyRunner.step wall times [s] on a standing state (same code the node runs per policy step)."""
    from bcg_policy_node import lowlevel as ll
    from bcg_policy_node.policy_runner import PolicyRunner
    from bcg_sim.g1.joints import JOINTS_29
    from bcg_sim.policy import load_policy

    runner = PolicyRunner(load_policy(artifact, runtime="onnx"))
    q = np.array([j.default for j in JOINTS_29])
    state = ll.lowstate_to_state(ll.make_lowstate(q, np.zeros(29), [1, 0, 0, 0], np.zeros(3), mode_machine=5))
    runner.start(state)
    out = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        runner.step(state)
        out[i] = time.perf_counter() - t0
    return out


class Robot:
    """Publishes marked LowStates at 500 Hz and timestamps the LowCmds that come back."""

    def __init__(self, node, ll, q: np.ndarray) -> None:
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from unitree_hg.msg import LowCmd, LowState

        self.ll, self.q = ll, q
        self.msg = LowState()
        self.pub = node.create_publisher(LowState, "/lowstate", QoSProfile(
            depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST))
        node.create_subscription(LowCmd, "/lowcmd", self._on_cmd, 50)
        self.sent: dict[int, float] = {}  # marker -> publish time of the latest LowState with it
        self.answered: set[int] = set()
        self.buttons: tuple[str, ...] = ()
        self.recording = False
        self.to_next: list[float] = []
        self.to_policy: list[float] = []
        self.arrivals: list[float] = []
        self._last_q: np.ndarray | None = None
        self._seq = 0
        self._lock = threading.Lock()

    def publish(self) -> None:
        marker = 1 + self._seq % MARKERS
        self._seq += 1
        # A slow 0.02 rad sway: the observation changes every step, so every policy step changes the targets.
        q = self.q + 0.02 * np.sin(2 * np.pi * self._seq / RATE_HZ)
        self.ll.fill_lowstate(self.msg, q, np.zeros(29), [1.0, 0, 0, 0], np.zeros(3), mode_machine=marker,
                              tick=2 * self._seq, wireless_remote=self.ll.encode_remote(self.buttons))
        with self._lock:
            self.answered.discard(marker)
            self.sent[marker] = time.perf_counter()
        self.pub.publish(self.msg)

    def _on_cmd(self, msg) -> None:
        now = time.perf_counter()
        q = np.array([m.q for m in msg.motor_cmd[:29]])
        changed = self._last_q is not None and not np.array_equal(q, self._last_q)
        self._last_q = q
        m = msg.mode_machine
        with self._lock:
            sent = self.sent.get(m)
            first = m not in self.answered
            self.answered.add(m)
        if not self.recording or sent is None:
            return
        self.arrivals.append(now)
        if first:
            self.to_next.append(now - sent)
        if changed:
            self.to_policy.append(now - sent)


def _pct(x, q) -> float:
    return 1e3 * float(np.percentile(np.asarray(x), q))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="measurement time in RUN")
    ap.add_argument("--hidden", type=int, nargs="+", default=[512, 256, 128], help="MLP hidden sizes")
    ap.add_argument("--rt-priority", type=int, default=0, help="policy node rt_priority parameter (0 = off)")
    args = ap.parse_args(argv)

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor

    from bcg_policy_node import lowlevel as ll
    from bcg_sim.g1.joints import JOINTS_29

    os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    tmp = Path(tempfile.mkdtemp(prefix="bcg_latency_"))
    artifact = export_mlp(tmp / "mlp", args.hidden)
    steps = policy_step_times(artifact)
    node_args = ["--ros-args", "--params-file", str(REPO / "config" / "policy_node.yaml"),
                 "-p", f"policy_path:={artifact}", "-p", "zero_torque_auto_start_s:=1.0",
                 "-p", "move_to_default_s:=0.2", "-p", "policy_runtime:=onnx"]
    if args.rt_priority:
        node_args += ["-p", f"rt_priority:={args.rt_priority}"]
    log = open(tmp / "policy_node.log", "w")
    proc = subprocess.Popen([sys.executable, "-u", "-m", "bcg_policy_node.policy_node", *node_args],
                            stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    rclpy.init()
    node = rclpy.create_node("latency_robot")
    robot = Robot(node, ll, np.array([j.default for j in JOINTS_29]))
    diag: dict[str, str] = {}
    node.create_subscription(DiagnosticArray, "/diagnostics",
                             lambda m: diag.update({kv.key: kv.value for s in m.status for kv in s.values}), 10)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    try:
        t_start = time.perf_counter()
        next_t = t_start
        phase = "start"
        while True:
            now = time.perf_counter()
            elapsed = now - t_start
            if phase == "start" and diag.get("mode") == "HOLD":
                robot.buttons, phase, t_press = ("start",), "pressing", now  # HOLD -> RUN
            elif phase == "pressing" and now - t_press > 0.1:
                robot.buttons, phase = (), "settle"
            elif phase == "settle" and diag.get("mode") == "RUN":
                robot.recording, phase, t_rec = True, "measure", now
            elif phase == "measure" and now - t_rec > args.seconds:
                break
            if elapsed > 60 and phase != "measure":
                raise SystemExit(f"policy node never reached RUN (mode {diag.get('mode')}); log {log.name}")
            robot.publish()
            next_t += 1.0 / RATE_HZ
            time.sleep(max(0.0, next_t - time.perf_counter()))
        time.sleep(1.2)  # one more diagnostics message from RUN
    finally:
        proc.send_signal(2)
        proc.wait(10)
        executor.shutdown(timeout_sec=1.0)
        rclpy.try_shutdown()
    period = np.diff(robot.arrivals)
    rows = [
        ("state -> next LowCmd", robot.to_next),
        ("state -> new policy targets", robot.to_policy),
        ("LowCmd period", period),
        ("PolicyRunner.step (bench process)", steps),
    ]
    print(f"\npolicy: untrained MLP {args.hidden} (ONNX, 1 thread); {args.seconds:.0f} s in RUN; "
          f"{len(robot.to_next)} LowStates answered; machine: {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| measure | n | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    for name, x in rows:
        print(f"| {name} | {len(x)} | {_pct(x, 50):.3f} | {_pct(x, 99):.3f} | {_pct(x, 100):.3f} |")
    keys = ("compute_p99_ms", "policy_p99_ms", "period_p50_ms", "period_p99_ms", "period_max_ms", "overruns")
    print("\npolicy node /diagnostics (its loop, last 2000 ticks): "
          + ", ".join(f"{k} {diag.get(k, '?')}" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
