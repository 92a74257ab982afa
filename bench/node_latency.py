"""Node latency: LowState -> LowCmd through the real policy node and through a minimal relay (the baseline),
over DDS on loopback, in the same run.

    python bench/node_latency.py [--seconds 15] [--hidden 512 256 128] [--rt-priority 0] [--executor events]
                                 [--param NAME:=VALUE ...] [--node-cpus 1 --robot-cpus 0]

A robot stand-in (this process) publishes LowState at 500 Hz with absolute deadlines. While measuring, every
LowState carries a marker in `mode_machine` (cycling 1..250), which the answering node copies into each LowCmd
it sends, so each LowCmd names the newest LowState that node had. Until then mode_machine stays at the G1's 5:
the policy node refuses to leave ZERO_TORQUE while mode_machine changes (a source conflict), and in RUN it
only logs and counts the changes. Two answering nodes, each in its own process, one at a
time (never both alive, they would share the 2 cores):

- ours: the policy node (`python -m bcg_policy_node.policy_node`, config/policy_node.yaml) running an
  untrained exported MLP policy (ONNX) in RUN: it answers each LowState with one control tick from its
  subscription callback (one thread, `--executor`); the policy runs every 20 ms.
- baseline: bench/relay_node.py, a minimal rclpy node with the policy node's QoS and message types that
  answers every LowState from its subscription callback (marker copied, CRC set with the same crc module).
  The floor that rclpy + Fast DDS + Python give on this machine.

Order: baseline (half the time), ours, baseline (other half), so a change of machine load during the run
hits both sides; the two baseline halves are pooled (and printed separately as a check).

Measured (ms):
- state -> next LowCmd: LowState publish -> arrival of the first LowCmd carrying its marker.
- state -> new policy targets (ours): LowState publish -> the LowCmd whose targets changed (a policy step,
  every 20 ms) and that was computed from that LowState: observation + inference + CRC + DDS.
- LowCmd period: spacing of LowCmd arrivals (500 Hz nominal); both nodes answer LowStates, so it follows
  the stand-in's LowState period (the next row) plus the answer's jitter.
- PolicyRunner.step: observation, ONNX inference, clipping, timed in this process on the same artifact;
  plus the policy node's own loop statistics from /diagnostics.
With `--node-cpus C --robot-cpus R` the answering node (ours: its `cpu_affinity` parameter; the relay: its
process mask, set before it starts) runs on C and this process (the robot stand-in and its DDS threads) on R:
on the robot the LowState comes from the robot's own computer, not from a process sharing the node's cores.
Prints a markdown table with the ratio ours / baseline (paste into bench/README.md with the command line).
"""

from __future__ import annotations

import argparse
import os
import signal
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
START_TIMEOUT_S = 60.0  # a node that is not answering (or not in RUN) by then is an error
WARMUP_S = 0.5  # answered but not recorded after the node is ready (first DDS samples, caches)
G1_MODE_MACHINE = 5  # mode_machine before the measurement starts


def log(text: str) -> None:
    print(f"[node_latency {time.strftime('%H:%M:%S')}] {text}", flush=True)


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


def _timeit(fn, n: int) -> np.ndarray:
    out = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        fn()
        out[i] = time.perf_counter() - t0
    return out


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
    return _timeit(lambda: runner.step(state), n)


def message_costs(n: int = 1000) -> dict[str, float]:
    """Median wall time [us] of the per-message Python work, timed in this process."""
    from rclpy.serialization import deserialize_message, serialize_message

    from bcg_policy_node import lowlevel as ll
    from bcg_policy_node.crc import lowcmd_crc
    from bcg_sim.g1.joints import JOINTS_29
    from unitree_hg.msg import LowCmd, LowState

    q = np.array([j.default for j in JOINTS_29])
    st = ll.make_lowstate(q, np.zeros(29), [1, 0, 0, 0], np.zeros(3), mode_machine=5)
    cmd = ll.make_lowcmd(q, 1.0, 1.0, mode_machine=5)
    st_cdr, cmd_cdr = serialize_message(st), serialize_message(cmd)
    # rclpy's take/publish convert between the C message and Python objects like (de)serialize_message.
    return {
        k: 1e6 * float(np.median(_timeit(f, n)))
        for k, f in (
            ("rclpy LowState -> Python (deserialize_message)", lambda: deserialize_message(st_cdr, LowState)),
            ("rclpy LowCmd -> Python", lambda: deserialize_message(cmd_cdr, LowCmd)),
            ("rclpy LowCmd from Python (serialize_message)", lambda: serialize_message(cmd)),
            ("rclpy LowState from Python", lambda: serialize_message(st)),
            ("lowstate_to_state (CRC check + conversion)", lambda: ll.lowstate_to_state(st)),
            (
                "lowstate_cdr_to_state (the node's path: raw CDR bytes, CRC check + conversion)",
                lambda: ll.lowstate_cdr_to_state(st_cdr),
            ),
            ("fill_lowcmd (targets + CRC)", lambda: ll.fill_lowcmd(cmd, q, 1.0, 1.0, mode_machine=5)),
            ("lowcmd_crc", lambda: lowcmd_crc(cmd)),
            (
                "fill_lowstate (stand-in, + CRC)",
                lambda: ll.fill_lowstate(st, q, np.zeros(29), [1, 0, 0, 0], np.zeros(3), mode_machine=5),
            ),
        )
    }


class Robot:
    """Publishes marked LowStates at 500 Hz and timestamps the LowCmds that come back."""

    def __init__(self, node, ll, q: np.ndarray) -> None:
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

        from unitree_hg.msg import LowCmd, LowState

        self.ll, self.q = ll, q
        self.msg = LowState()
        self.pub = node.create_publisher(
            LowState,
            "/lowstate",
            QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST),
        )
        node.create_subscription(LowCmd, "/lowcmd", self._on_cmd, 50)
        self._lock = threading.Lock()
        self._seq = 0
        self.reset()

    def reset(self) -> None:
        """Forget everything sent and received (a new phase with a new answering node)."""
        with self._lock:
            self.sent: dict[int, float] = {}  # marker -> publish time of the latest LowState with it
            self.answered: set[int] = set()
            self.buttons: tuple[str, ...] = ()
            self.recording = False
            self.received = 0  # LowCmds seen this phase, recorded or not
            self.n_sent = 0  # LowStates published while recording
            self.to_next: list[float] = []
            self.to_policy: list[float] = []
            self.arrivals: list[float] = []
            self.publishes: list[float] = []
            self._last_q: np.ndarray | None = None
            self.marking = False  # markers in mode_machine (else the G1's own value)

    def publish(self) -> None:
        marker = 1 + self._seq % MARKERS if self.marking else G1_MODE_MACHINE
        self._seq += 1
        # A slow 0.02 rad sway: the observation changes every step, so every policy step changes the targets.
        q = self.q + 0.02 * np.sin(2 * np.pi * self._seq / RATE_HZ)
        self.ll.fill_lowstate(
            self.msg,
            q,
            np.zeros(29),
            [1.0, 0, 0, 0],
            np.zeros(3),
            mode_machine=marker,
            tick=2 * self._seq,
            wireless_remote=self.ll.encode_remote(self.buttons),
        )
        with self._lock:
            self.answered.discard(marker)
            now = time.perf_counter()
            self.sent[marker] = now
            if self.recording:
                self.n_sent += 1
                self.publishes.append(now)
        self.pub.publish(self.msg)

    def _on_cmd(self, msg) -> None:
        now = time.perf_counter()
        q = np.array([m.q for m in msg.motor_cmd[:29]])
        m = msg.mode_machine
        with self._lock:
            changed = self._last_q is not None and not np.array_equal(q, self._last_q)
            self._last_q = q
            self.received += 1
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

    def results(self) -> dict[str, list[float] | int]:
        with self._lock:
            return {
                "to_next": list(self.to_next),
                "to_policy": list(self.to_policy),
                "cmd_period": list(np.diff(self.arrivals)),
                "state_period": list(np.diff(self.publishes)),
                "n_sent": self.n_sent,
            }


class NodeProcess:
    """An answering node in its own process; its output goes to a log file."""

    def __init__(self, name: str, cmd: list[str], log_path: Path, cpus: set[int] | None = None) -> None:
        self.name, self.log_path = name, log_path
        self.reported = False  # its exit status was already part of an error
        self._log = open(log_path, "w")
        # the child would inherit this process's mask (the stand-in's CPUs): give it its own before exec
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO, preexec_fn=pin)

    def check_alive(self) -> None:
        rc = self.proc.poll()
        if rc is not None:
            self.reported = True
            raise RuntimeError(
                f"{self.name} (pid {self.proc.pid}) exited with status {rc} during the bench; "
                f"log {self.log_path}:\n{self.tail()}"
            )

    def tail(self, n: int = 20) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join("    " + s for s in lines[-n:])

    def stop(self) -> int | None:
        """SIGINT (the policy node sends its shutdown damping, then exits), SIGKILL after 10 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not exit 10 s after SIGINT; killing pid {self.proc.pid}")
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode


def run_phase(
    robot: Robot,
    diag: dict[str, str],
    name: str,
    cmd: list[str],
    log_path: Path,
    policy: bool,
    seconds: float,
    cpus: set[int] | None = None,
) -> dict:
    """Start `cmd` and drive it: publish LowState at 500 Hz until it answers (policy node: until it reaches
    RUN, pressing `start` on the wireless remote in HOLD), record for `seconds`, stop it."""
    time.sleep(0.2)  # LowCmds still in flight from the previous phase's node (it has exited) land before reset
    robot.reset()
    diag.clear()
    proc = NodeProcess(name, cmd, log_path, cpus)
    t0 = time.perf_counter()
    next_t = t0
    phase = "start"
    t_rec = t_press = t_ready = next_progress = 0.0
    try:
        while True:
            now = time.perf_counter()
            proc.check_alive()
            if phase == "start" and policy and diag.get("mode") == "HOLD":
                robot.buttons, phase, t_press = ("start",), "pressing", now  # HOLD -> RUN
            elif phase == "pressing" and now - t_press > 0.1:
                robot.buttons, phase = (), "settle"
            elif (phase == "settle" and diag.get("mode") == "RUN") or (
                phase == "start" and not policy and robot.received > 0
            ):
                phase, t_ready = "warmup", now
                with robot._lock:
                    robot.marking = True
                log(
                    f"{name}: {'in RUN' if policy else 'answering'} {now - t0:.1f} s after start; "
                    f"recording {seconds:.1f} s"
                )
            elif phase == "warmup" and now - t_ready > WARMUP_S:
                with robot._lock:
                    robot.recording = True
                phase, t_rec, next_progress = "measure", now, now + 5.0
            elif phase == "measure":
                if policy and diag.get("mode", "RUN") != "RUN":
                    raise RuntimeError(
                        f"{name} left RUN during the measurement (mode {diag.get('mode')}, "
                        f"last fault {diag.get('last_fault')}); log {proc.log_path}:\n{proc.tail()}"
                    )
                if now >= next_progress:
                    r = robot.results()
                    log(
                        f"{name}: {now - t_rec:.0f}/{seconds:g} s, {len(r['to_next'])} of {r['n_sent']} "
                        f"LowStates answered"
                    )
                    next_progress += 5.0
                if now - t_rec > seconds:
                    break
            if phase in ("start", "pressing", "settle") and now - t0 > START_TIMEOUT_S:
                what = f"reach RUN (mode {diag.get('mode')})" if policy else "answer a LowState"
                raise RuntimeError(
                    f"{name} did not {what} within {START_TIMEOUT_S:.0f} s; log {proc.log_path}:\n{proc.tail()}"
                )
            robot.publish()
            next_t += 1.0 / RATE_HZ
            time.sleep(max(0.0, next_t - time.perf_counter()))
        with robot._lock:
            robot.recording = False
        if policy:  # one more diagnostics message from RUN (its loop statistics), LowState still flowing
            t_end = time.perf_counter() + 1.2
            while time.perf_counter() < t_end:
                robot.publish()
                next_t += 1.0 / RATE_HZ
                time.sleep(max(0.0, next_t - time.perf_counter()))
        res = robot.results()
        res["diag"] = dict(diag)
        return res
    finally:
        with robot._lock:
            robot.recording = False
        rc = proc.stop()
        if rc not in (0, None) and not proc.reported:
            log(f"{name} exited with status {rc}; log {proc.log_path}:\n{proc.tail()}")


# Floor probes: what a loop that does nothing else gets from this machine on the node's CPUs, in the same run.
PROBE_CODE = """
import json, sys, time
kind, seconds, period = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
t0 = last = nxt = time.perf_counter()
gaps, n = [], 0
while last - t0 < seconds:
    if kind == "timer":  # sleep to absolute deadlines, as a 500 Hz loop that waits for its next tick
        nxt += period
        time.sleep(max(0.0, nxt - time.perf_counter()))
    now = time.perf_counter()
    n += 1
    if now - last > 2 * period:
        gaps.append(now - last)
    last = now
print(json.dumps({"ticks": n, "overruns": len(gaps), "max_gap_ms": 1e3 * max(gaps, default=0.0)}))
"""


def run_probe(robot: Robot, kind: str, seconds: float, cpus: set[int] | None) -> dict:
    """A floor probe in its own process (on the node's CPUs) while the stand-in keeps publishing LowState:
    'spin' reads the clock in a busy loop (every gap > 2 periods is the process not running at all:
    preemption, or the hypervisor taking the virtual CPU), 'timer' sleeps to 500 Hz deadlines (plus the
    wake-up latency an event-driven node also pays). Overruns counted as the policy node counts them."""
    import json

    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.Popen(
        [sys.executable, "-c", PROBE_CODE, kind, str(seconds), str(1.0 / RATE_HZ)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=pin,
    )
    next_t = time.perf_counter()
    while proc.poll() is None:
        robot.publish()
        next_t += 1.0 / RATE_HZ
        time.sleep(max(0.0, next_t - time.perf_counter()))
    out = proc.stdout.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} probe exited with status {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def d_overruns(res: dict) -> str:
    return res["diag"].get("overruns", "?")


def _pct(x, q) -> float:
    return 1e3 * float(np.percentile(np.asarray(x), q)) if len(x) else float("nan")


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _steal_s() -> float:
    """CPU time [s] the hypervisor gave to others since boot (/proc/stat 'steal'), all CPUs; 0 if unknown."""
    try:
        fields = open("/proc/stat").readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--seconds",
        type=float,
        default=15.0,
        help="measurement time per side: ours in RUN, and the baseline (two halves, before and "
        "after ours); the whole run takes about 2 x seconds + 20 s",
    )
    ap.add_argument("--hidden", type=int, nargs="+", default=[512, 256, 128], help="MLP hidden sizes")
    ap.add_argument("--rt-priority", type=int, default=0, help="policy node rt_priority parameter (0 = off)")
    ap.add_argument("--executor", choices=("events", "single_threaded"), default="events", help="policy node executor")
    ap.add_argument(
        "--stale-timeout-s",
        type=float,
        default=None,
        help="policy node stale_timeout_s (default: config/policy_node.yaml's); under extra CPU load "
        "the stand-in itself stalls past 50 ms and the node rightly damps, ending the bench",
    )
    ap.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME:=VALUE",
        help="extra policy node parameter override (repeatable), e.g. --param gc_freeze:=false",
    )
    ap.add_argument(
        "--node-cpus",
        default="",
        metavar="CPULIST",
        help="pin the answering node (ours and the relay alike) to these CPUs, e.g. 1 (default: any)",
    )
    ap.add_argument(
        "--robot-cpus",
        default="",
        metavar="CPULIST",
        help="pin this process, the robot stand-in, to these CPUs, e.g. 0 (default: any)",
    )
    args = ap.parse_args(argv)
    if args.seconds <= 0:
        ap.error("--seconds must be > 0")
    from bcg_policy_node.scheduling import parse_cpu_list, pin_process

    try:
        node_cpus, robot_cpus = parse_cpu_list(args.node_cpus), parse_cpu_list(args.robot_cpus)
    except ValueError as exc:
        ap.error(str(exc).replace("cpu_affinity", "--node-cpus/--robot-cpus"))
    for flag, cpus in (("--node-cpus", node_cpus), ("--robot-cpus", robot_cpus)):
        if not cpus <= os.sched_getaffinity(0):
            ap.error(f"{flag}: CPU(s) {sorted(cpus - os.sched_getaffinity(0))} not available here")
    if robot_cpus:
        pin_process(robot_cpus)  # before rclpy starts its DDS threads, which inherit the mask

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor

    from bcg_policy_node import lowlevel as ll
    from bcg_sim.g1.joints import JOINTS_29

    t_run = time.perf_counter()
    load_start, steal_start = _load(), _steal_s()
    log(f"start: {os.cpu_count()} CPUs, {load_start}; {args.seconds:g} s per side")
    os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))  # the children inherit it
    tmp = Path(tempfile.mkdtemp(prefix="bcg_latency_"))
    artifact = export_mlp(tmp / "mlp", args.hidden)
    steps = policy_step_times(artifact)
    costs = message_costs()
    log(f"policy artifact {artifact}; PolicyRunner.step p50 {_pct(steps, 50):.3f} ms; logs in {tmp}")

    node_args = [
        "--ros-args",
        "--params-file",
        str(REPO / "config" / "policy_node.yaml"),
        "-p",
        f"policy_path:={artifact}",
        "-p",
        "zero_torque_auto_start_s:=1.0",
        "-p",
        "move_to_default_s:=0.2",
        "-p",
        "policy_runtime:=onnx",
        "-p",
        f"executor:={args.executor}",
    ]
    if args.rt_priority:
        node_args += ["-p", f"rt_priority:={args.rt_priority}"]
    if node_cpus:
        node_args += ["-p", f"cpu_affinity:={args.node_cpus}"]
    if args.stale_timeout_s is not None:
        node_args += ["-p", f"stale_timeout_s:={args.stale_timeout_s}"]
    for p in args.param:
        if ":=" not in p:
            ap.error(f"--param {p!r}: want NAME:=VALUE")
        node_args += ["-p", p]
    ours_cmd = [sys.executable, "-u", "-m", "bcg_policy_node.policy_node", *node_args]
    relay_cmd = [sys.executable, "-u", str(REPO / "bench" / "relay_node.py")]

    rclpy.init(args=[])  # not sys.argv: the bench's own options (--param a:=b) are no ROS arguments
    node = rclpy.create_node("latency_robot")
    robot = Robot(node, ll, np.array([j.default for j in JOINTS_29]))
    diag: dict[str, str] = {}
    node.create_subscription(
        DiagnosticArray,
        "/diagnostics",
        lambda m: diag.update({kv.key: kv.value for s in m.status for kv in s.values}),
        10,
    )
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    half = args.seconds / 2
    try:
        log("baseline (relay), first half")
        base1 = run_phase(robot, diag, "relay", relay_cmd, tmp / "relay_1.log", False, half, node_cpus)
        log("ours (policy node)")
        ours = run_phase(robot, diag, "policy node", ours_cmd, tmp / "policy_node.log", True, args.seconds, node_cpus)
        log("baseline (relay), second half")
        base2 = run_phase(robot, diag, "relay", relay_cmd, tmp / "relay_2.log", False, half, node_cpus)
        probes = {}
        for kind in ("spin", "timer"):
            log(f"floor probe: {kind} loop on the node's CPUs, {half:g} s")
            probes[kind] = run_probe(robot, kind, half, node_cpus)
    except RuntimeError as exc:
        log(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        log("interrupted (node processes stopped)")
        return 130
    finally:
        executor.shutdown(timeout_sec=1.0)
        rclpy.try_shutdown()
    load_end = _load()

    base = {k: base1[k] + base2[k] for k in ("to_next", "state_period", "cmd_period", "n_sent")}
    ours_next, base_next = ours["to_next"], base["to_next"]
    pinning = (
        f"node on CPU(s) {args.node_cpus or 'any'}, stand-in on CPU(s) {args.robot_cpus or 'any'}; "
        if node_cpus or robot_cpus
        else ""
    )
    print(
        f"\npolicy: untrained MLP {args.hidden} (ONNX, 1 thread), {args.executor} executor; {pinning}"
        f"{args.seconds:g} s per side; steal (CPU time the hypervisor took) {_steal_s() - steal_start:.1f} s; "
        f"ours answered {len(ours_next)} of {ours['n_sent']} LowStates, baseline {len(base_next)} of "
        f"{base['n_sent']}; machine: {os.cpu_count()} CPUs, {load_start} at start, {load_end} at end; "
        f"whole run {time.perf_counter() - t_run:.0f} s\n"
    )
    print(
        "| measure | ours n | ours p50 ms | ours p99 ms | ours max ms | baseline n | baseline p50 ms "
        "| baseline p99 ms | baseline max ms | ratio p50 | ratio p99 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def row(name, x, b=None, ratio=True):
        s = f"| {name} | {len(x)} | {_pct(x, 50):.3f} | {_pct(x, 99):.3f} | {_pct(x, 100):.3f} "
        if b is None:
            return s + "| – | – | – | – | – | – |"
        s += f"| {len(b)} | {_pct(b, 50):.3f} | {_pct(b, 99):.3f} | {_pct(b, 100):.3f} "
        if not ratio:
            return s + "| – | – |"
        return s + f"| {_pct(x, 50) / _pct(b, 50):.2f} | {_pct(x, 99) / _pct(b, 99):.2f} |"

    print(row("state -> next LowCmd", ours_next, base_next))
    print(row("state -> new policy targets (vs baseline state -> LowCmd)", ours["to_policy"], base_next))
    print(row("LowCmd period (arrival spacing)", ours["cmd_period"], base["cmd_period"], ratio=False))
    print(row("LowState period (stand-in)", ours["state_period"], base["state_period"], ratio=False))
    print(row("PolicyRunner.step (bench process)", steps))
    print(
        f"\nbaseline halves (before / after ours): state -> LowCmd p50 {_pct(base1['to_next'], 50):.3f} / "
        f"{_pct(base2['to_next'], 50):.3f} ms, p99 {_pct(base1['to_next'], 99):.3f} / "
        f"{_pct(base2['to_next'], 99):.3f} ms"
    )
    d = ours["diag"]
    keys = (
        "compute_p99_ms",
        "policy_p99_ms",
        "period_p50_ms",
        "period_p99_ms",
        "period_max_ms",
        "overruns",
        "fallback_ticks",
        "lowstate",
        "rejected",
        "lowcmd",
        "mode_machine_changes",
    )
    n_ours = max(1, ours["n_sent"])
    print(
        f"goals: ours answered {100 * len(ours_next) / n_ours:.1f} % (>= 95 %), p99 ratio "
        f"{_pct(ours_next, 99) / _pct(base_next, 99):.2f} (<= 2), overruns {d_overruns(ours)} (0)"
    )
    ours_s = ours["n_sent"] / RATE_HZ  # the node's overruns include its ~3 s of start-up before the recording
    print(
        "floor on the node's CPUs, same run, overruns as the node counts them (gap > 2 periods): "
        + "; ".join(
            f"{k} loop {p['overruns']} in {half:g} s (max gap {p['max_gap_ms']:.1f} ms)" for k, p in probes.items()
        )
        + f"; ours {d_overruns(ours)} over its whole life (~{ours_s + 4:.0f} s)"
    )
    print(
        "policy node /diagnostics (tick timing over its last 2000 ticks; overruns = ticks more than one period "
        "late, and message counts, since its start): " + ", ".join(f"{k} {d.get(k, '?')}" for k in keys)
    )
    print("per-message work, median in this process (no contention from the nodes yet):")
    for k, v in costs.items():
        print(f"  {k}: {v:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
