"""Polling and liveness for every wait of the Python master.

Liveness follows PROTOCOL.md section 8, the same rule as the Go master:
the runner is dead at once when its phase is ``stopped`` or, on a local
filesystem only, when its flock is free; otherwise it is alive while its
heartbeat counter moves within ``2 x interval_ms + 250 ms`` measured on this
host's clock. No timestamp written by another host is compared with ours.
"""

import time
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional

from . import _fs, _names
from .errors import RunnerNotAlive

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

#: Default dead grace: how long a wait goes on without seeing a live runner.
DEFAULT_WAIT_FOR_RUNNER = 10.0

#: How often a wait re-reads state.json and heartbeat.json at most.
LIVENESS_PERIOD = 0.1

#: When a wait first looks: a look cannot end a wait before its grace has
#: passed, so a short command's wait never pays for one.
FIRST_LOOK = 0.02


class Backoff:
    """Adaptive polling: the first re-check comes after ``first`` seconds
    and each idle one waits twice as long, up to ``ceiling``. A result that
    is ready within a millisecond is seen within a millisecond; an idle
    waiter costs one look every ``ceiling`` seconds."""

    def __init__(self, ceiling: float = 0.1, first: float = 0.001) -> None:
        self.first = min(first, ceiling)
        self.ceiling = ceiling
        self.delay = self.first

    def sleep(self, deadline: Optional[float] = None, watch: Any = None) -> None:
        """Sleep the current delay (bounded by deadline); with a watch
        (a _watch.DirWatch), wake as soon as it sees a change."""
        d = self.delay
        if deadline is not None:
            d = max(0.0, min(d, deadline - time.monotonic()))
        if watch is not None:
            watch.sleep(d)
        else:
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


class Look(NamedTuple):
    """One liveness judgment made without waiting (the Go master's look)."""

    alive: bool  # the heartbeat counter was seen moving within the window
    definite: bool  # when not alive: the verdict needs no further watching
    reason: str
    state: Dict[str, Any]


class Liveness:
    """Watches the runner during one wait. ``check()`` raises
    RunnerNotAlive once no live runner has been seen for ``grace`` seconds,
    measured from the start of the wait or the last sign of life. It looks
    at the files at most every 100 ms."""

    def __init__(self, session: "Session", grace: Optional[float]) -> None:
        self.s = session
        self.grace = DEFAULT_WAIT_FOR_RUNNER if grace is None or grace <= 0 else float(grace)
        self.last_alive = time.monotonic()
        self.next_look = self.last_alive + min(FIRST_LOOK, self.grace / 2)
        self.last = Look(False, False, "no look yet", {})

    def check(self) -> None:
        now = time.monotonic()
        if now < self.next_look:
            return
        self.next_look = now + LIVENESS_PERIOD
        self.last = self.s._observe_liveness()
        if self.last.alive:
            self.last_alive = now
            return
        gone = now - self.last_alive
        if gone > self.grace:
            raise RunnerNotAlive("runner not alive: %s; no live runner seen for %.1fs (raise with wait_for_runner)"
                                 % (self.last.reason, gone))


class HeartbeatSeen:
    """The last heartbeat counter a Session saw, when (our clock), and
    whether it had moved from the one seen before."""

    def __init__(self) -> None:
        self.counter: Any = None
        self.at: Optional[float] = None
        self.moved = False


def observe(sfs: "_fs.SessionFS", network: bool, seen: HeartbeatSeen) -> Look:
    """One look at the runner by the documented rule, remembering the
    counter in seen: alive when the counter moved within the window on our
    clock; dead at once (definite) when there is no state, the phase is
    stopped or, on a local filesystem, the runner's flock is free; a
    counter not seen moving yet is an indefinite "not alive"."""
    state = sfs.read_json_quiet(*_names.STATE)
    hb = sfs.read_json_quiet(*_names.HEARTBEAT)
    st = state or {}
    if state is None and hb is None:
        return Look(False, True, "no runner has written state yet", st)
    if is_stopped(state, hb):
        return Look(False, True, stopped_reason(state), st)
    if not network and not sfs.lock_held(*_names.LOCK):
        return Look(False, True, "the runner's lock is free", st)
    if hb is None:
        return Look(False, False, "no heartbeat yet", st)
    now = time.monotonic()
    # The runner's session_id with the counter: a new runner counts from
    # the start again and may reach the number the previous one stopped at.
    counter = (hb.get("session_id"), hb.get("counter"))
    if seen.at is None or counter != seen.counter:
        seen.moved = seen.at is not None
        seen.counter, seen.at = counter, now
    age = now - seen.at
    window = window_of(hb)
    if seen.moved and age <= window:
        return Look(True, False, "heartbeat counter moved", st)
    if age > window:
        return Look(False, True, "heartbeat counter has not moved for %.1fs" % age, st)
    return Look(False, False, "heartbeat counter not seen moving yet", st)
