"""Exceptions of the SkillPilot Python master.

Every exception is a :class:`MasterError` with a stable ``code`` (the same
strings as the Go master's ``--json`` error codes) and an ``exit_code`` (the
same numbers as the ``master`` CLI), so a script can branch on the class,
log the code, or ``sys.exit(e.exit_code)`` and behave like the CLI:

====================  =====================  ====
class                 code                   exit
====================  =====================  ====
CommandFailed         command_failed         1
UsageError            usage                  2
WaitTimeout           wait_timeout           3
ExpectTimeout         expect_timeout         3
CommandTimeout        command_timeout        3
Cancelled             cancelled              4
SessionMissing        session_missing        5
RunnerNotAlive        runner_not_alive       5
CannotServe           cannot_serve           5
StaleRequest          stale                  5
UnknownCmdID          unknown_cmd_id         6
NotRunning            not_running            7
NotQueued             not_queued             7
AlreadyFinished       already_finished       7
AlreadyWithdrawn      already_withdrawn      7
Idle                  idle                   7
Pruned                pruned                 8
RequestRejected       rejected               10
RefusedEcho           refused_echo           10
MasterError           io_error               10
====================  =====================  ====
"""

from typing import Any, Dict, Optional

__all__ = [
    "MasterError", "UsageError", "SessionMissing", "RunnerNotAlive", "CannotServe", "StaleRequest", "WaitTimeout",
    "UnknownCmdID", "Pruned", "NothingToDo", "NotRunning", "NotQueued", "AlreadyFinished", "AlreadyWithdrawn", "Idle", "RequestRejected",
    "ExpectTimeout", "RefusedEcho", "ResultError", "CommandFailed", "CommandTimeout", "Cancelled", "EXIT_OK", "EXIT_INTERRUPTED",
]

EXIT_OK = 0
EXIT_INTERRUPTED = 130


class MasterError(Exception):
    """Base class: an I/O or internal error unless a subclass says otherwise.
    ``context`` is a dict of the facts beside code and message (the cmd_id,
    the directory, the grace, the resume_cursor), the same keys as the Go
    master's ErrorContext (PROTOCOL.md section 19, "Errors carry
    context"); empty when there is nothing to say."""

    code = "io_error"
    exit_code = 10

    def __init__(self, *args: Any, context: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(*args)
        self.context: Dict[str, Any] = dict(context or {})


class UsageError(MasterError, ValueError):
    """A call or command line that cannot be carried out as given."""

    code = "usage"
    exit_code = 2


class SessionMissing(MasterError):
    """The directory is not a session (it has no queue/)."""

    code = "session_missing"
    exit_code = 5


class RunnerNotAlive(MasterError):
    """No live runner was seen for the dead grace (``wait_for_runner``), or
    the runner stopped, or it gave up and cannot serve."""

    code = "runner_not_alive"
    exit_code = 5


class CannotServe(MasterError):
    """A runner is alive but cannot run commands (phase error: its tool
    does not start or its init script fails)."""

    code = "cannot_serve"
    exit_code = 5


class StaleRequest(RunnerNotAlive):
    """The runner answered ``stale``: the request was meant for an earlier
    runner of the session (its session_id differs), so nothing was done."""

    code = "stale"


class WaitTimeout(MasterError):
    """The caller's own wait ended before the answer arrived. The command
    (or request) may still be carried out later."""

    code = "wait_timeout"
    exit_code = 3


class ExpectTimeout(WaitTimeout):
    """send: the expected output did not appear within the expect timeout
    (on the runner's clock); nothing was sent. ``.reply`` holds the reply."""

    code = "expect_timeout"


class UnknownCmdID(MasterError, LookupError):
    """No command with this cmd_id exists in the session."""

    code = "unknown_cmd_id"
    exit_code = 6


class Pruned(MasterError, LookupError):
    """The command ran and had its result, and the session's retention has
    removed its files since (PROTOCOL.md section 23): its result and output
    cannot be read any more. Context: cmd_id, status (the status it ended
    with)."""

    code = "pruned"
    exit_code = 8


class NothingToDo(MasterError):
    """The request named nothing the runner could act on (exit 7)."""

    code = "nothing_to_do"
    exit_code = 7

    def __init__(self, message: str, reply: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.reply = reply


class NotRunning(NothingToDo):
    """send or signal named a command that is not running."""

    code = "not_running"


class NotQueued(NothingToDo):
    """withdraw named a command a runner has already claimed (it is
    running: cancel it instead)."""

    code = "not_queued"


class AlreadyFinished(NothingToDo):
    """cancel or withdraw named a command that already has its result."""

    code = "already_finished"


class AlreadyWithdrawn(NothingToDo):
    """withdraw named a command an earlier withdraw took back (it is in
    withdrawn/; it never runs)."""

    code = "already_withdrawn"


class Idle(NothingToDo):
    """cancel of the current command while nothing runs."""

    code = "idle"


class RequestRejected(MasterError):
    """The runner rejected the request as invalid; nothing was done."""

    code = "rejected"

    def __init__(self, message: str, reply: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.reply = reply


class RefusedEcho(RequestRejected):
    """send: a secret was refused because the tool's terminal echoes input
    (it would have been printed into the session); nothing was sent."""

    code = "refused_echo"


class ResultError(MasterError):
    """A result whose status is not ok; ``.result`` holds it. Its context
    is the result's ``error.context`` as the runner wrote it (the file, the
    field, the limit, the timeout: PROTOCOL.md section 7), then cmd_id,
    status and exit_reason, which win."""

    def __init__(self, result: Dict[str, Any]) -> None:
        err = result.get("error") or {}
        if not isinstance(err, dict):
            err = {}
        msg = err.get("message") or result.get("exit_reason")
        runner_ctx = err.get("context")
        ctx: Dict[str, Any] = dict(runner_ctx) if isinstance(runner_ctx, dict) else {}
        ctx.update({"cmd_id": result.get("cmd_id"), "status": result.get("status")})
        if result.get("exit_reason"):
            ctx["exit_reason"] = result["exit_reason"]
        super().__init__("command %s: %s: %s" % (result.get("cmd_id"), result.get("status"), msg), context=ctx)
        self.result = result


class CommandFailed(ResultError):
    """status error: a Tcl error, a non-zero shell status, a tool that died."""

    code = "command_failed"
    exit_code = 1


class CommandTimeout(ResultError):
    """status timeout: the runner ended the command at its timeout."""

    code = "command_timeout"
    exit_code = 3


class Cancelled(ResultError):
    """status cancelled: a cancel request, an expired lease or a force stop."""

    code = "cancelled"
    exit_code = 4


def result_error(result: Dict[str, Any]) -> ResultError:
    """The exception for a result whose status is not ok."""
    cls = {"timeout": CommandTimeout, "cancelled": Cancelled}.get(str(result.get("status")), CommandFailed)
    return cls(result)


def exit_code_of_status(status: str) -> int:
    """The CLI exit code of a result status."""
    return {"ok": 0, "error": 1, "timeout": 3, "cancelled": 4}.get(status, 1)
