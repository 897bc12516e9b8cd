"""Polling and liveness for every wait of the Python master.

Liveness follows PROTOCOL.md section 8, the same rule as the Go master:
the runner is dead at once when its phase is ``stopped`` or, on a local
filesystem only, when its flock is free; otherwise it is alive while its
heartbeat counter moves within ``2 x interval_ms + 250 ms`` measured on this
host's clock. No timestamp written by another host is compared with ours.
"""

import os
import time
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from . import _fs, _names
from .errors import RunnerNotAlive

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

#: Default dead grace: how long a wait goes on without seeing a live runner.
DEFAULT_WAIT_FOR_RUNNER = 10.0

#: How often a wait re-reads state.json and heartbeat.json at most.
LIVENESS_PERIOD = 0.1


class Backoff:
    """Adaptive polling: the first re-check comes after ``first`` seconds
    and each idle one waits twice as long, up to ``ceiling``. A result that
    is ready within a millisecond is seen within a millisecond; an idle
    waiter costs one look every ``ceiling`` seconds."""

    def __init__(self, ceiling: float = 0.1, first: float = 0.001) -> None:
        self.first = min(first, ceiling)
        self.ceiling = ceiling
        self.delay = self.first

    def sleep(self, deadline: Optional[float] = None) -> None:
        d = self.delay
        if deadline is not None:
            d = max(0.0, min(d, deadline - time.monotonic()))
        time.sleep(d)
        self.delay = min(self.delay * 2, self.ceiling)

    def reset(self) -> None:
        self.delay = self.first


def window_of(hb: Optional[Dict[str, Any]]) -> float:
    """Two heartbeat periods plus 250 ms: the counter must move within it."""
    iv = (hb or {}).get("interval_ms")
    if not isinstance(iv, (int, float)) or isinstance(iv, bool) or iv <= 0:
        iv = 1000
    return 2 * max(float(iv), 100.0) / 1000.0 + 0.25


def is_stopped(state: Optional[Dict[str, Any]], hb: Optional[Dict[str, Any]]) -> bool:
    return (state or {}).get("phase") == "stopped" or (hb or {}).get("phase") == "stopped"


def stopped_reason(state: Optional[Dict[str, Any]]) -> str:
    st = state or {}
    why = st.get("reason") or ""
    err = st.get("error")
    if isinstance(err, dict) and err.get("message") and err.get("message") not in why:
        why = (why + ": " if why else "") + str(err.get("message"))
    return "the runner stopped" + (" (%s)" % why if why else "")


class Liveness:
    """Watches the runner during one wait. ``check()`` raises
    RunnerNotAlive once no live runner has been seen for ``grace`` seconds
    (measured from the start of the wait or the last sign of life)."""

    def __init__(self, session: "Session", grace: Optional[float]) -> None:
        self.s = session
        self.grace = DEFAULT_WAIT_FOR_RUNNER if grace is None else float(grace)
        self.last_alive = time.monotonic()
        self.next_look = 0.0
        self.reason = "no runner seen yet"

    def check(self) -> None:
        now = time.monotonic()
        if now < self.next_look:
            return
        self.next_look = now + LIVENESS_PERIOD
        alive, reason = self.s._observe_liveness()
        if alive:
            self.last_alive = now
            return
        if alive is None:  # Cannot tell yet: neither a sign of life nor of death.
            return
        self.reason = reason
        if now - self.last_alive > self.grace:
            raise RunnerNotAlive("runner not alive: %s; no live runner seen for %.1fs (wait_for_runner=%gs)"
                                 % (reason, now - self.last_alive, self.grace))


class HeartbeatSeen:
    """The last heartbeat counter a Session saw and when (our clock)."""

    def __init__(self) -> None:
        self.counter: Any = None
        self.at: Optional[float] = None

    def update(self, counter: Any, now: float) -> bool:
        """Record counter; True if it moved since the previous look."""
        if self.at is not None and counter == self.counter:
            return False
        moved = self.at is not None
        self.counter, self.at = counter, now
        return moved


def observe(session_dir: str, network: bool, seen: HeartbeatSeen) -> Tuple[Optional[bool], str]:
    """One non-blocking look at the runner. Returns (True, why) on a sign of
    life, (False, why) when it is dead by the rule, (None, why) when this
    look cannot tell yet (a first look, or the counter still within its
    window)."""
    state = _fs.read_json_quiet(os.path.join(session_dir, _names.FILE_STATE))
    hb = _fs.read_json_quiet(os.path.join(session_dir, _names.FILE_HEARTBEAT))
    if state is None and hb is None:
        return False, "no runner has written state yet"
    if is_stopped(state, hb):
        return False, stopped_reason(state)
    if not network and not _fs.lock_held(os.path.join(session_dir, _names.FILE_LOCK)):
        return False, "the runner's lock is free"
    now = time.monotonic()
    if seen.update((hb or {}).get("counter"), now):
        return True, "heartbeat counter moved"
    assert seen.at is not None
    if now - seen.at > window_of(hb):
        return False, "heartbeat counter has not moved for %.1fs" % (now - seen.at)
    return None, "heartbeat counter not seen moving yet"
