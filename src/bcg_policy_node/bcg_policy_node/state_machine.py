"""The policy node's state machine, free of ROS so it can be reasoned about (and tested) alone.

    WAIT --first valid LowState--> ZERO_TORQUE --START (or auto after N s)--> MOVE_TO_DEFAULT --after T s-->
    HOLD --START--> RUN --STOP--> MOVE_TO_DEFAULT --> HOLD
    any mode except WAIT --fault or DAMP--> DAMPING --RESET (state fresh)--> ZERO_TORQUE

WAIT sends nothing (the robot has never been commanded and mode_machine is unknown); every other mode
sends a LowCmd every control tick. The node refuses RESET while the state is stale and RESET or START from
ZERO_TORQUE right after a /lowstate source conflict (policy_node.py). DAMPING is latched: only RESET leaves it. Every
transition is recorded
with its cause and reported through `on_transition`.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np


class Mode(str, enum.Enum):
    WAIT = "WAIT"
    ZERO_TORQUE = "ZERO_TORQUE"
    MOVE_TO_DEFAULT = "MOVE_TO_DEFAULT"
    HOLD = "HOLD"
    RUN = "RUN"
    DAMPING = "DAMPING"


class Event(str, enum.Enum):
    START = "start"  # ZERO_TORQUE -> MOVE_TO_DEFAULT, HOLD -> RUN
    STOP = "stop"  # RUN -> MOVE_TO_DEFAULT (back to the default pose, then HOLD)
    DAMP = "damp"  # e-stop: any commanded mode -> DAMPING
    RESET = "reset"  # DAMPING -> ZERO_TORQUE


ACTIVE = (Mode.MOVE_TO_DEFAULT, Mode.HOLD, Mode.RUN)  # modes with stiff PD: tilt/limit checks apply
ALLOWED = {  # event -> modes it is accepted in
    Event.START: (Mode.ZERO_TORQUE, Mode.HOLD),
    Event.STOP: (Mode.RUN,),
    Event.DAMP: (Mode.ZERO_TORQUE, Mode.MOVE_TO_DEFAULT, Mode.HOLD, Mode.RUN),
    Event.RESET: (Mode.DAMPING,),
}


@dataclass(frozen=True)
class Transition:
    time: float  # s, node clock (steady wall clock, or /clock under use_sim_time)
    src: Mode
    dst: Mode
    cause: str


class CommandKind(str, enum.Enum):
    """What the node sends on a tick."""

    NONE = "none"  # nothing: the robot has never been commanded (WAIT)
    ZERO = "zero"  # zero torque: kp = kd = 0
    DAMP = "damp"  # kp 0 and the damping kd on every joint
    PD = "pd"  # position targets q with gains kp, kd


@dataclass
class Targets:
    """What to send this tick: a command kind, with q, kp, kd [29] for CommandKind.PD."""

    kind: CommandKind
    q: np.ndarray | None = None
    kp: np.ndarray | None = None
    kd: np.ndarray | None = None


def smoothstep(x: float) -> float:
    """0 -> 1 with zero slope at both ends (no velocity step at the start or end of a move)."""
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


@dataclass
class StateMachine:
    default_q: np.ndarray  # [29] rad, the contract's default pose
    kp: np.ndarray  # [29] N m/rad, the policy's PD gains (RUN)
    kd: np.ndarray  # [29] N m s/rad
    stand_kp: np.ndarray  # [29] bring-up gains for MOVE_TO_DEFAULT and HOLD (bcg_sim.g1.stand_gains):
    stand_kd: np.ndarray  # the policy's gains are too soft to hold the robot up without a policy balancing it
    move_duration_s: float
    on_transition: Callable[[Transition], None] = lambda t: None
    mode: Mode = Mode.WAIT
    since: float = 0.0  # s, when the current mode began
    last_fault: str = ""
    history: deque = field(default_factory=lambda: deque(maxlen=50))
    _move_from: np.ndarray | None = None

    def go(self, now: float, dst: Mode, cause: str, measured_q: np.ndarray | None = None) -> None:
        """Enter `dst` now because of `cause` (measured_q [29] starts a MOVE_TO_DEFAULT)."""
        if dst == Mode.MOVE_TO_DEFAULT:
            if measured_q is None:
                raise ValueError("MOVE_TO_DEFAULT needs the measured pose to start from")
            self._move_from = np.array(measured_q, dtype=np.float64)
        t = Transition(now, self.mode, dst, cause)
        self.mode, self.since = dst, now
        self.history.append(t)
        self.on_transition(t)

    def fault(self, now: float, cause: str) -> None:
        """Go to DAMPING for `cause` (no-op in WAIT: nothing was ever commanded; and in DAMPING: latched)."""
        if self.mode in (Mode.WAIT, Mode.DAMPING):
            return
        self.last_fault = cause
        self.go(now, Mode.DAMPING, f"fault: {cause}")

    def accepts(self, event: Event) -> bool:
        return self.mode in ALLOWED[event]

    def handle(self, now: float, event: Event, source: str, measured_q: np.ndarray | None) -> bool:
        """Apply an operator event; False (and no change) when the current mode does not take it."""
        if not self.accepts(event):
            return False
        cause = f"{event.value} from {source}"
        if event == Event.DAMP:
            self.last_fault = cause
            self.go(now, Mode.DAMPING, cause)
        elif event == Event.RESET:
            self.go(now, Mode.ZERO_TORQUE, cause)
        elif event == Event.STOP or (event == Event.START and self.mode == Mode.ZERO_TORQUE):
            self.go(now, Mode.MOVE_TO_DEFAULT, cause, measured_q)
        elif event == Event.START and self.mode == Mode.HOLD:
            self.go(now, Mode.RUN, cause)
        return True

    def targets(self, now: float, policy_q: np.ndarray | None = None) -> Targets:
        """Targets for this tick in the current mode (RUN uses the latest policy targets `policy_q`).
        Also ends a finished MOVE_TO_DEFAULT (-> HOLD)."""
        m = self.mode
        if m == Mode.WAIT:
            return Targets(CommandKind.NONE)
        if m == Mode.ZERO_TORQUE:
            return Targets(CommandKind.ZERO)
        if m == Mode.DAMPING:
            return Targets(CommandKind.DAMP)
        if m == Mode.MOVE_TO_DEFAULT:
            s = smoothstep((now - self.since) / self.move_duration_s) if self.move_duration_s > 0 else 1.0
            q = self._move_from + (self.default_q - self._move_from) * s
            if s >= 1.0:
                self.go(now, Mode.HOLD, f"reached the default pose after {now - self.since:.2f} s")
            return Targets(CommandKind.PD, q, self.stand_kp, self.stand_kd)
        if m == Mode.HOLD:
            return Targets(CommandKind.PD, self.default_q, self.stand_kp, self.stand_kd)
        if policy_q is None:
            raise RuntimeError("RUN without policy targets")
        return Targets(CommandKind.PD, policy_q, self.kp, self.kd)
