"""Polling and liveness for every wait of the Python master.

Liveness follows PROTOCOL.md section 8, the same rule as the Go master:
the runner is dead at once when its phase is ``stopped`` or, on a local
filesystem only, when its flock is free; otherwise it is alive while its
heartbeat counter moves within ``2 x interval_ms + 250 ms`` measured on this
host's clock. No timestamp written by another host is compared with ours.
A counter that stands still for longer is late, not dead: a request or a
wait gives up only once no live runner has been seen for the grace
(``grace_of``), the same for both.
"""

import time
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional

from . import _fs, _names
from .errors import RunnerNotAlive

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

#: Default dead grace: how long a request or a wait goes on without seeing a
#: live runner (unless ten heartbeat intervals are longer: grace_of).
DEFAULT_WAIT_FOR_RUNNER = 10.0

#: How often a wait re-reads state.json and heartbeat.json at most.
LIVENESS_PERIOD = 0.1

#: When a wait first looks: a look cannot end a wait before its grace has
#: passed, so a short command's wait never pays for one.
FIRST_LOOK = 0.02

#: Replaces the grace when the runner stopped on purpose (state.json's
#: phase stopped and, on a local filesystem, its lock free): such a runner
#: does not come back by itself, so a wait for a result, output or a reply
#: ends within about a second instead of the grace (the Go master's
#: stoppedGrace). The second lets a runner being started on the
#: session right now write its state first. ready(), how a caller waits for
#: a runner to be started again, keeps the whole grace.
STOPPED_GRACE = 1.0


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


def interval_of(hb: Optional[Dict[str, Any]]) -> float:
    """The heartbeat interval in seconds (1 s when not known), at least 0.1 s."""
    iv = (hb or {}).get("interval_ms")
    if not isinstance(iv, (int, float)) or isinstance(iv, bool) or iv <= 0:
        iv = 1000
    return max(float(iv), 100.0) / 1000.0


def window_of(hb: Optional[Dict[str, Any]]) -> float:
    """Two heartbeat periods plus 250 ms: the counter must move within it."""
    return 2 * interval_of(hb) + 0.25


def grace_of(base: Optional[float], interval: float = 1.0) -> float:
    """The one grace of requests and waits (PROTOCOL.md section 8, "Giving
    up"), as the Go master's Grace: base seconds (None or <= 0: 10 s or ten
    heartbeat intervals, whichever is longer), never less than one
    liveness window."""
    interval = max(interval, 0.1)
    if base is None or base <= 0:
        base = max(DEFAULT_WAIT_FOR_RUNNER, 10 * interval)
    return max(float(base), 2 * interval + 0.25)


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
    definite: bool  # when not alive: dead for certain (stopped, no state, a free lock)
    reason: str
    state: Dict[str, Any]
    late: bool = False  # when not alive: the counter has not moved for more than the window
    interval: float = 1.0  # the heartbeat's interval in seconds
    stopped: bool = False  # the runner stopped on purpose (phase stopped, its lock free): it will not come back by itself


class Liveness:
    """Watches the runner during one request or wait. ``check()`` raises
    RunnerNotAlive once no live runner has been seen for the grace
    (grace_of: ``grace`` seconds, None for the default, and the heartbeat's
    interval), measured from the start of the wait or the last sign of
    life; a runner that stopped on purpose ends it after STOPPED_GRACE
    already (unless stopped_ends is False: ready()). It looks at the files
    at most every 100 ms."""

    def __init__(self, session: "Session", grace: Optional[float], stopped_ends: bool = True) -> None:
        self.s = session
        self.base = grace
        self.stopped_ends = stopped_ends
        self.grace = grace_of(grace)
        self.last_alive = time.monotonic()
        self.next_look = self.last_alive + min(FIRST_LOOK, self.grace / 2)
        self.last = Look(False, False, "no look yet", {})

    def check(self) -> None:
        now = time.monotonic()
        if now < self.next_look:
            return
        self.next_look = now + LIVENESS_PERIOD
        self.judge(now, self.s._observe_liveness())

    def judge(self, now: float, look: Look) -> None:
        """Record one look taken at now; raise RunnerNotAlive when no live
        runner has been seen for the grace."""
        self.last = look
        if look.alive:
            self.last_alive = now
            return
        self.grace = grace_of(self.base, look.interval)
        gone = now - self.last_alive
        if self.stopped_ends and look.stopped and gone >= min(STOPPED_GRACE, self.grace):
            raise RunnerNotAlive("runner not alive: %s" % look.reason,
                                 context={"reason": look.reason, "grace_ms": int(round(self.grace * 1000))})
        if gone > self.grace:
            raise RunnerNotAlive("runner not alive: %s; no live runner seen for %.1fs (raise with wait_for_runner)"
                                 % (look.reason, gone),
                                 context={"reason": look.reason, "grace_ms": int(round(self.grace * 1000))})


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
    stopped or, on a local filesystem, the runner's flock is free; late
    when the counter has not moved for more than the window (not dead: a
    request or wait decides by its grace); a counter not seen moving yet
    is an indefinite "not alive"."""
    state = sfs.read_json_quiet(*_names.STATE)
    hb = sfs.read_json_quiet(*_names.HEARTBEAT)
    st = state or {}
    if state is None and hb is None:
        return Look(False, True, "no runner has written state yet", st)
    if is_stopped(state, hb):
        # On purpose when no runner holds the lock (on NFS the lock cannot
        # be probed: state.json alone, which a new runner rewrites at its
        # start).
        return Look(False, True, stopped_reason(state), st,
                    stopped=network or not sfs.lock_held(*_names.LOCK))
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
    window, iv = window_of(hb), interval_of(hb)
    if seen.moved and age <= window:
        return Look(True, False, "heartbeat counter moved", st, interval=iv)
    if age > window:  # Late, not dead: only the grace of a request or wait decides.
        return Look(False, False, "heartbeat counter has not moved for %.1fs" % age, st, late=True, interval=iv)
    return Look(False, False, "heartbeat counter not seen moving yet", st, interval=iv)
