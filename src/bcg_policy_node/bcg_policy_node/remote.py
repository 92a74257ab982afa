"""The G1's wireless remote as operator events: button chords (parameters remote_start, remote_stop, ...)."""

from __future__ import annotations

from bcg_policy_node import lowlevel as ll
from bcg_policy_node.state_machine import Event


class RemoteMapper:
    """Wireless-remote buttons -> operator events. A chord ("L2+B") fires when all its buttons are held and
    one of them was pressed in this message; priority damp > stop > reset > start."""

    ORDER = (Event.DAMP, Event.STOP, Event.RESET, Event.START)

    def __init__(self, chords: dict[Event, list[str]]):
        self._chords = {}
        for event, specs in chords.items():
            sets = [frozenset(s.split("+")) for s in specs]
            for s in sets:
                unknown = s - set(ll.BUTTONS)
                if unknown:
                    raise ValueError(f"remote_{event.value}: unknown button(s) {sorted(unknown)}; known {ll.BUTTONS}")
            self._chords[event] = sets
        self._held: frozenset[str] = frozenset()

    def update(self, remote: ll.RemoteState) -> Event | None:
        pressed = remote.buttons - self._held
        self._held = remote.buttons
        if not pressed:
            return None
        for event in self.ORDER:
            if any(c <= remote.buttons and c & pressed for c in self._chords.get(event, ())):
                return event
        return None
