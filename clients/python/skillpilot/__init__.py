"""SkillPilot master for Python 3.8+ (standard library only).

Talks to a SkillPilot runner through its session directory, following
PROTOCOL.md: seq allocation by exclusive create in seq/, atomic writes
(temp file + rename, mode 0600), results in result/, control requests in
the ctl/ mailbox, liveness by the heartbeat counter on this host's clock::

    from skillpilot import Session, CommandFailed
    s = Session("/path/to/session")
    res = s.run("puts hello; expr 6*7", timeout=60)
    print(res["status"], res.get("value"), s.output(res))

    # answer a prompt of a running command
    sub = s.submit("write_design top.v")
    s.send(sub.cmd_id, "y\n", expect=r"Overwrite\? \(y/n\) ")

Every exception is a MasterError with a stable ``code`` and the ``master``
CLI's ``exit_code`` (see skillpilot.errors). Every wait notices a dead
runner: RunnerNotAlive after ``wait_for_runner`` seconds (default 10)
without a live runner, or within about a second when the runner stopped
on purpose; a command still queued then stays queued for a later runner
unless ``Session.withdraw`` takes it back.
"""

from ._names import PROTOCOL_VERSION, new_id
from .errors import (AlreadyFinished, AlreadyWithdrawn, Cancelled, CannotServe, CommandFailed, CommandTimeout, ExpectTimeout, Idle,
                     MasterError, NothingToDo, NotQueued, NotRunning, RefusedEcho, RequestRejected, ResultError, RunnerNotAlive,
                     SessionMissing, StaleRequest, UnknownCmdID, Pruned, UsageError, WaitTimeout)
from ._lease import LeaseKeeper
from .session import Match, Session, Submitted
from .pool import pool_pick, pool_submit, pool_wait

__version__ = "1.0.0"

new_cmd_id = new_id

__all__ = [
    "Session", "Submitted", "Match", "LeaseKeeper", "PROTOCOL_VERSION", "new_cmd_id",
    "MasterError", "UsageError", "SessionMissing", "RunnerNotAlive", "CannotServe", "StaleRequest", "WaitTimeout",
    "UnknownCmdID", "Pruned", "NothingToDo", "NotRunning", "NotQueued", "AlreadyFinished", "AlreadyWithdrawn", "Idle", "RequestRejected",
    "ExpectTimeout", "RefusedEcho", "ResultError", "CommandFailed", "CommandTimeout", "Cancelled", "__version__",
    "pool_pick", "pool_submit", "pool_wait",
]
