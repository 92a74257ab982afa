"""What the policy node watches besides the robot's state: its control loop's timing (`LoopStats`), the Python
garbage collector (`GcMonitor`) and whether the LowStates can come from one healthy robot (`SourceMonitor`).
Each `summary()` feeds /diagnostics."""

from __future__ import annotations

import gc
import time
from collections import deque

import numpy as np

from bcg_policy_node import lowlevel as ll


class LoopStats:
    """Control-loop timing over the last N ticks: period (tick to tick) and compute time, in s of the
    node's clock. An overrun is a tick more than one period late (gap > 2 periods)."""

    def __init__(self, nominal_s: float, n: int = 2000):
        self.nominal = nominal_s
        self.period = deque(maxlen=n)
        self.compute = deque(maxlen=n)
        self.policy = deque(maxlen=n // 10)
        self.overruns = 0
        self.fallback_ticks = 0  # ticks of the fallback timer (LowState late)
        self._last: float | None = None
        # Warm-up at start-up: numpy's first percentile imports numpy.ma (~15 ms), which otherwise landed in
        # the first /diagnostics tick (a 34 ms tick gap, measured).
        np.percentile(np.zeros(2), [50, 99])

    def tick(self, now: float) -> None:
        if self._last is not None:
            gap = now - self._last
            self.period.append(gap)
            if gap > 2 * self.nominal:
                self.overruns += 1
        self._last = now

    def summary(self) -> dict[str, float]:
        def pct(d, q):  # one np.percentile call per deque (this runs inside a control tick, at 1 Hz)
            return 1e3 * np.percentile(np.asarray(d), q) if d else np.full(len(q), np.nan)

        p50, p99, pmax = pct(self.period, [50, 99, 100])
        (c99,), (pol99,) = pct(self.compute, [99]), pct(self.policy, [99])
        return {
            "period_p50_ms": float(p50),
            "period_p99_ms": float(p99),
            "period_max_ms": float(pmax),
            "compute_p99_ms": float(c99),
            "policy_p99_ms": float(pol99),
            "overruns": float(self.overruns),
            "fallback_ticks": float(self.fallback_ticks),
        }


class GcMonitor:
    """Python garbage-collector activity in this process after start-up (gc.callbacks): collections per
    generation and the longest pause, so a tick gap can be told apart from a collection. Costs two calls per
    collection."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.pause_max_s = 0.0
        self.frozen = 0  # objects moved to the permanent generation at start-up (gc.get_freeze_count() walks
        #                  that whole list, ~5 ms for 43k objects: counted once, never per diagnostics message)
        self._t0 = 0.0

    def start(self) -> None:
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.collections[info["generation"]] += 1
            self.pause_max_s = max(self.pause_max_s, time.perf_counter() - self._t0)

    def close(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def summary(self) -> dict[str, str]:
        return {
            "gc_collections": "/".join(map(str, self.collections)),  # generations 0/1/2
            "gc_pause_max_ms": f"{1e3 * self.pause_max_s:.3f}",
            "gc_frozen_objects": str(self.frozen),
        }


class SourceMonitor:
    """Flags LowStates that cannot come from one healthy robot: mode_machine changing between messages,
    tick not increasing. `conflict(state)` returns the cause or None and remembers the state."""

    def __init__(self) -> None:
        self.mode_machine: int | None = None
        self.tick: int | None = None
        self.counts = {"mode_machine_changes": 0, "tick_regressions": 0}
        self.last = ""

    def conflict(self, state: ll.RobotState) -> str | None:
        cause = None
        if self.mode_machine is not None and state.mode_machine != self.mode_machine:
            self.counts["mode_machine_changes"] += 1
            cause = f"mode_machine changed {self.mode_machine} -> {state.mode_machine} (a second /lowstate publisher?)"
        elif self.tick is not None and state.tick <= self.tick:
            self.counts["tick_regressions"] += 1
            cause = f"LowState tick did not increase ({self.tick} -> {state.tick})"
        self.mode_machine, self.tick = state.mode_machine, state.tick
        if cause:
            self.last = cause
        return cause
