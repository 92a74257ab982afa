"""Where and how the policy node's threads run: CPU pinning (`cpu_affinity`), the executor thread's priority
(`rt_priority`, `nice`) and the rclpy executor (`executor`)."""

from __future__ import annotations

import os
from typing import Literal, get_args

from rclpy.executors import SingleThreadedExecutor

from bcg_sim.config import ConfigError, checker

Executor = Literal["events", "single_threaded"]
EXECUTORS: tuple[str, ...] = get_args(Executor)


def parse_cpu_list(text: str | int) -> set[int]:
    """CPU numbers of a Linux cpu-list string ("1", "2-3", "0,2-3"; a ROS parameter "1" arrives as int 1);
    "" = no pinning (empty set)."""
    text, need = str(text), checker()
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        ok = lo.strip().isdigit() and (hi.strip().isdigit() or not hi)
        need(ok, "cpu_affinity", f"must be a cpu list like '1', '2-3' or '0,2', got {text!r}")
        a, b = int(lo), int(hi or lo)
        need(b >= a, "cpu_affinity", f"bad range {part!r} in {text!r}")
        cpus.update(range(a, b + 1))
    return cpus


def pin_process(cpus: set[int]) -> None:
    """Pin every thread of this process (the executor and the DDS threads started before) to `cpus`; threads
    started later inherit the calling thread's mask. Raises OSError when a CPU is not available."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass


def pin_threads(cpu_affinity: str | int, logger) -> None:
    """Pin the process' threads to `cpu_affinity` (empty: leave them). On the robot's computer this keeps
    the control thread on cores other work does not use (with isolcpus); on a shared machine it keeps
    the node away from the cores that run the robot (or its stand-in). An unavailable CPU is an error:
    a silently unpinned node would be measured as if it were pinned."""
    cpus = parse_cpu_list(cpu_affinity)
    if not cpus:
        return
    avail = os.sched_getaffinity(0)
    if not cpus <= avail:
        raise ConfigError(
            f"cpu_affinity {cpu_affinity}: CPU(s) {sorted(cpus - avail)} not available "
            f"to this process (available {sorted(avail)})"
        )
    pin_process(cpus)
    logger.info(f"threads pinned to CPU(s) {sorted(cpus)}")


def raise_priority(rt_priority: int, nice: int, logger) -> None:
    """SCHED_FIFO for the calling (executor) thread when rt_priority > 0 (needs CAP_SYS_NICE / rtprio);
    else its nice value when `nice` != 0 (below 0 needs CAP_SYS_NICE or RLIMIT_NICE). Either way only this
    thread: the DDS threads, started before, keep theirs."""
    if rt_priority <= 0:
        if nice:
            try:  # Linux: PRIO_PROCESS with who=0 is the calling thread
                os.setpriority(os.PRIO_PROCESS, 0, nice)
                logger.info(f"executor thread runs at nice {nice}")
            except (PermissionError, OSError, AttributeError) as exc:
                logger.warning(f"nice {nice} not applied ({exc}); running at nice {os.getpriority(os.PRIO_PROCESS, 0)}")
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(rt_priority))
        logger.info(f"executor thread runs SCHED_FIFO priority {rt_priority}")
    except (PermissionError, OSError, AttributeError) as exc:
        logger.warning(f"rt_priority {rt_priority} not applied ({exc}); running with normal scheduling")


def make_executor(kind: str):
    """rclpy executor by name ("events": rclpy.experimental.EventsExecutor; "single_threaded")."""
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    return SingleThreadedExecutor()
