"""The lease (PROTOCOL.md section 10): written by a master, judged by the
runner on its own clock (no renewal seen for ttl_ms: expired)."""

import itertools
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from . import _fs, _names
from ._command import dumps, json_number
from .errors import MasterError

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

_counter = itertools.count(1)
_counter_lock = threading.Lock()


def check_ttl(ttl: Any) -> float:
    """A lease's ttl in seconds: a finite number from 1 ms (ttl_ms >= 1)
    whose milliseconds fit in 64 bits (the runner clamps it to 365 days),
    else UsageError (json_number)."""
    return json_number("ttl", ttl, lo=0.001, hi=9e15)


def write_lease(sfs: "_fs.SessionFS", ttl: float, lease_id: str, owner: str) -> Dict[str, Any]:
    """Write state/lease.json once and return what was written. Each write
    bumps ``counter`` so the runner sees a renewal; ``expires_at`` is for
    seed runners only."""
    ttl = check_ttl(ttl)
    with _counter_lock:
        n = next(_counter)
    body = {"protocol_version": _names.PROTOCOL_VERSION, "lease_id": lease_id, "ttl_ms": int(round(ttl * 1000)),
            "counter": n, "owner": owner, "expires_at": _names.now_iso(ttl)}  # RFC 3339, as the Go master writes it.
    try:
        sfs.write_atomic(*_names.LEASE, dumps(body))
    except OSError as e:
        raise MasterError("write lease: %s" % e) from e
    return body


class LeaseKeeper:
    """Renews a lease every ttl/3 from a daemon thread, so that work in the
    caller's thread cannot delay a renewal. Failed renewals are never
    swallowed: each is passed to on_error (default: a line on stderr) and
    kept in ``errors``; renewal goes on (a full disk may recover)."""

    def __init__(self, session: "Session", ttl: float, lease_id: str,
                 on_error: Optional[Callable[[BaseException], Any]] = None) -> None:
        self._s = session
        self.ttl = float(check_ttl(ttl))
        self.lease_id = lease_id
        self.errors: List[BaseException] = []
        self._on_error = on_error
        self._stop = threading.Event()
        write_lease(session.fs, self.ttl, lease_id, session.owner)  # The first write raises.
        self._thread = threading.Thread(target=self._loop, name="skillpilot-lease", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.ttl / 3.0):
            try:
                write_lease(self._s.fs, self.ttl, self.lease_id, self._s.owner)
            except (MasterError, OSError) as e:
                self.errors.append(e)
                if self._on_error is not None:
                    self._on_error(e)
                else:
                    print("skillpilot: renew lease: %s" % e, file=sys.stderr)

    def stop(self) -> None:
        """Stop renewing (the lease then expires after ttl)."""
        self._stop.set()
        self._thread.join()

    set = stop  # The pre-1.0 API returned a threading.Event.

    def is_set(self) -> bool:
        return self._stop.is_set()

    def check(self) -> None:
        """Raise the last renewal error, if any."""
        if self.errors:
            raise self.errors[-1]

    def __enter__(self) -> "LeaseKeeper":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
