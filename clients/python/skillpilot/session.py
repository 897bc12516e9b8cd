"""Session: the Python master's handle on a session directory."""

import base64
import os
import re
import socket
import stat
import time
from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

from . import _fs, _names, _status, _watch
from ._command import CANCEL_POLICIES, command_fields, dumps, json_number  # noqa: F401 (CANCEL_POLICIES: session.CANCEL_POLICIES)
from ._names import KINDS, valid_kind
from ._lease import LeaseKeeper, write_lease
from ._wait import Backoff, HeartbeatSeen, Liveness, Look, grace_of, observe, window_of
from .errors import (AlreadyFinished, AlreadyWithdrawn, CannotServe, ExpectTimeout, Idle, MasterError, NotQueued, NotRunning, RefusedEcho,
                     RequestRejected, RunnerNotAlive, SessionMissing, StaleRequest, UnknownCmdID, UsageError, Pruned,
                     WaitTimeout, result_error)

Result = Dict[str, Any]

SIGNALS = ("INT", "QUIT", "TSTP", "CONT", "HUP", "USR1", "USR2", "TERM", "KILL")


class _Submitted(NamedTuple):
    cmd_id: str
    name: str


class Submitted(_Submitted):
    """A queued command. Unpacks as ``cmd_id, name`` (the pre-1.0 API);
    ``resume_cursor`` is the spool size just before it was queued, so its
    output comes after it (PROTOCOL.md section 19, "Cursors": the same
    name in every master's submit reply)."""

    resume_cursor: int

    def __new__(cls, cmd_id: str, name: str, resume_cursor: int = 0) -> "Submitted":
        self = super().__new__(cls, cmd_id, name)
        self.resume_cursor = resume_cursor
        return self

    @property
    def seq(self) -> int:
        parsed = _names.parse_name(self.name)
        return parsed[0] if parsed else -1


class Match(NamedTuple):
    """What wait_for found in the spool: byte offsets [start, end), the
    matched bytes, and where the next wait_for should start. to_dict()
    gives the waitfor reply shape of every master (PROTOCOL.md section 19,
    "Cursors"); a timeout raises WaitTimeout with only ``resume_cursor``."""

    start: int
    end: int
    text: bytes
    resume_cursor: int

    def to_dict(self) -> Dict[str, Any]:
        """{"matched", "match_text", "match_span": {"start", "end"},
        "resume_cursor"}, as the Go master's Match marshals."""
        return {"matched": True, "match_text": self.text.decode("utf-8", "replace"),
                "match_span": {"start": self.start, "end": self.end}, "resume_cursor": self.resume_cursor}


class Session:
    """A handle on a session directory (PROTOCOL.md).

    ``poll`` is the longest pause between two looks while waiting (polling
    starts at 1 ms and doubles up to it). ``wait_for_runner`` is the dead
    grace of every request and wait: how long it goes on while no live
    runner is seen before raising RunnerNotAlive (None: 10 s, or ten
    heartbeat intervals when longer; never under one liveness window; each
    call can override it).
    A Session may be shared by threads only for reading; give each thread
    that submits or waits its own Session.
    """

    def __init__(self, directory: str, poll: float = 0.1, *, wait_for_runner: Optional[float] = None) -> None:
        self.fs = _fs.SessionFS(_fs.abspath(directory))
        self.dir = self.fs.root
        self.fs.revalidate()
        self.fs.parent().revalidate()
        if not self.fs.is_dir(_names.DIR_QUEUE):
            raise SessionMissing("not a session directory (no queue/): %s" % directory, context={"dir": directory})
        try:
            self.fs.mkdir_master(_names.DIR_SEQ)  # A session made by an older runner.
        except OSError as e:
            raise MasterError("create %s: %s" % (self.fs.path(_names.DIR_SEQ), e)) from e
        if poll <= 0:
            raise UsageError("poll must be positive")
        self.poll = poll
        self.wait_for_runner = wait_for_runner
        self.filesystem, self.network = self.fs.fs_type()
        self.fs.local = not self.network
        self.owner = "python-master@%s:%d" % (socket.gethostname(), os.getpid())
        self._hb_seen = HeartbeatSeen()
        self._hb_look = Look(False, False, "no look yet", {})
        self._kind: Optional[str] = None
        self._result_watch: Optional[_watch.DirWatch] = None
        self._result_watch_tried = False

    def close(self) -> None:
        """Release what the Session holds (the watch its waits share). A
        Session stays usable: its next wait watches again."""
        w, self._result_watch, self._result_watch_tried = self._result_watch, None, False
        if w is not None:
            w.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _watch_results(self) -> Optional[_watch.DirWatch]:
        """The inotify watch on result/ that every wait of this Session
        shares (as the Go master's one watcher per Session), or None on a
        network filesystem (inotify sees no other host's changes) or where
        inotify cannot be had: then waits poll as before."""
        if not self._result_watch_tried:
            self._result_watch_tried = True
            if not self.network and self.fs.is_plain_dir(_names.DIR_RESULT):
                try:
                    self._result_watch = _watch.DirWatch(self.fs.path(_names.DIR_RESULT))
                except OSError:
                    self._result_watch = None
        return self._result_watch

    def _backoff(self) -> Backoff:
        return Backoff(ceiling=self.poll)

    def _grace(self, wait_for_runner: Optional[float]) -> Optional[float]:
        return self.wait_for_runner if wait_for_runner is None else wait_for_runner

    # --- commands ---------------------------------------------------------

    def submit(self, payload: str, kind: Optional[str] = None, timeout: Optional[float] = None,
               cancel_policy: Optional[str] = None, cmd_id: Optional[str] = None,
               trace_id: Optional[str] = None, labels: Optional[Dict[str, str]] = None,
               max_output_bytes: Optional[int] = None) -> Submitted:
        """Queue a command and return (cmd_id, name). ``kind`` defaults to
        the runner's (state.json), else tcl; ``timeout`` is in seconds (None
        or 0: the runner's default). ``max_output_bytes`` is the command's
        output budget (None or 0: the runner's --max-output-bytes; PROTOCOL.md
        section 6.3). ``trace_id`` and ``labels`` are carried
        into the result, the events, status and the report (PROTOCOL.md
        section 4). A command is queued even when no runner is alive: a
        later runner serves it. The returned Submitted has its
        resume_cursor (the spool size before it was queued)."""
        if not isinstance(payload, str):
            raise UsageError("payload must be a str")
        fields = command_fields(self._default_kind() if kind is None else kind, timeout, cancel_policy, cmd_id,
                                trace_id, labels, max_output_bytes)
        cmd_id = fields["cmd_id"]
        seq = _names.reserve_seq(self.fs)
        cursor = self._spool_size_quiet()  # Before the command is queued: its output comes after.
        cmd: Dict[str, Any] = {"protocol_version": _names.PROTOCOL_VERSION, "seq": seq, "payload": payload, **fields,
                               "submitted_at": _names.now_iso(), "submitter": self.owner}
        name = _names.command_name(seq, cmd_id)
        try:
            self.fs.write_atomic(_names.DIR_QUEUE, name, dumps(cmd))
        except OSError as e:
            raise MasterError("write command %s: %s" % (name, e)) from e
        finally:
            _names.write_hint(self.fs, seq)  # After the command: the runner sees it one write sooner.
        return Submitted(cmd_id, name, cursor)

    def _default_kind(self) -> str:
        """The kind of the session's runner (state.json), else tcl; read
        once per Session, as the Go master does."""
        if self._kind is None:
            kind = (self._state() or {}).get("kind")
            if not valid_kind(kind):
                return "tcl"
            self._kind = kind
        return self._kind

    def _find(self, cmd_id: str) -> str:
        """The file name of the command whose cmd_id is exactly cmd_id, the
        lowest seq of queue/, inflight/ and result/ (_find_in)."""
        n = self._find_in(cmd_id, (_names.DIR_QUEUE, _names.DIR_INFLIGHT, _names.DIR_RESULT))
        if n is not None:
            return n
        gone = self._pruned(None, cmd_id)
        if gone is not None:
            raise gone
        w = self._find_in(cmd_id, (_names.DIR_WITHDRAWN,))
        if w is not None:
            raise UnknownCmdID("%s was withdrawn (withdrawn/%s): it never runs and gets no result" % (cmd_id, w),
                               context={"cmd_id": cmd_id})
        raise UnknownCmdID("no command %s in this session" % cmd_id, context={"cmd_id": cmd_id})

    def _pruned_below(self, name: str, seq: int, cmd_id: str) -> Optional[Pruned]:
        """Pruned when result name, found by a lookup of cmd_id, is the
        duplicate_cmd_id refusal of a retry whose original (a lower seq)
        the retention removed: the cmd_id names the original."""
        try:
            r = self.fs.read_json(_names.DIR_RESULT, name)
        except MasterError:
            return None
        err = (r or {}).get("error") or {}
        if err.get("code") != "duplicate_cmd_id" or (err.get("context") or {}).get("pruned") is not True:
            return None
        return self._pruned(None, cmd_id, below=seq)

    def _pruned(self, name: Optional[str], cmd_id: str, below: Optional[int] = None) -> Optional[Pruned]:
        """The Pruned error of a command the session's pruned index holds
        (by file name, else by cmd_id; with below, only at a lower seq), or
        None."""
        data = b""
        for sub, f in _names.PRUNED_FILES:
            try:
                b = self.fs.read(sub, f, _names.MAX_PRUNED) or b""
            except MasterError:
                continue
            data += b[:b.rfind(b"\n") + 1]  # Each file's torn last line left out before joining.
        hit = _names.find_pruned(data, name, cmd_id)
        if hit is None:
            return None
        if below is not None and (_names.parse_name(hit[0]) or (below, ""))[0] >= below:
            return None
        n, status, end = hit
        cid = (_names.parse_name(n) or (0, cmd_id))[1]
        ended = "" if end == "-" else " at " + end
        return Pruned("pruned: command %s ended %s%s, and the session's retention has removed its result and output since "
                      "(log/pruned.log): they cannot be read any more" % (cid, status, ended),
                      context={"cmd_id": cid, "status": status})

    def _gone(self, name: str) -> Optional[MasterError]:
        """The error of a wait for command file name that can never end
        with a result (the Go master's Command.gone): Pruned when it is
        neither queued nor running nor has a result and the pruned index
        holds it (looked at in the order a command moves, then the result
        once more); UnknownCmdID when a withdraw took it back (withdrawn/,
        PROTOCOL.md section 19); else None."""
        for d in (_names.DIR_QUEUE, _names.DIR_INFLIGHT, _names.DIR_RESULT):
            if self._exists(d, name):
                return None
        gone = self._pruned(name, "")
        if gone is not None and not self._exists(_names.DIR_RESULT, name):
            return gone
        if self._exists(_names.DIR_WITHDRAWN, name) and not self._exists(_names.DIR_RESULT, name):
            cmd_id = (_names.parse_name(name) or (0, name))[1]
            return UnknownCmdID("%s was withdrawn (withdrawn/%s): it never runs and gets no result" % (cmd_id, name),
                                context={"cmd_id": cmd_id})
        return None

    def _resolve(self, name_or_id: str) -> str:
        """The command file name a reference names (_names.parse_ref: a
        cmd_id, a command file's name or a path ending in one)."""
        name, cmd_id = _names.parse_ref(name_or_id)
        return name if name is not None else self._find(cmd_id)

    def _find_in(self, cmd_id: str, dirs: "Tuple[str, ...]") -> Optional[str]:
        """The command file of cmd_id with the lowest seq in dirs, or None.
        Each is listed once, in the order a command moves through them, so
        one that moves meanwhile is still found; all of them, not only up
        to the first that has one: a retry under an answered cmd_id, queued
        behind a backlog, must not hide the command that ran (PROTOCOL.md
        section 19, "Naming a command")."""
        best = None  # (seq, name, dir)
        for d in dirs:
            self.fs.revalidate(d)
            try:
                names = self.fs.list(d)
            except (OSError, MasterError):
                continue
            for n in names:
                parsed = _names.parse_name(n)
                if parsed is not None and parsed[1] == cmd_id and (best is None or parsed[0] < best[0]):
                    best = (parsed[0], n, d)
        if best is None:
            return None
        seq, n, d = best
        if d == _names.DIR_RESULT:
            gone = self._pruned_below(n, seq, cmd_id)
            if gone is not None:
                raise gone
        return n

    def result(self, name_or_id: str) -> Optional[Result]:
        """The command's result, or None while it has none."""
        name = self._resolve(name_or_id)
        self.fs.revalidate(_names.DIR_RESULT)
        return self.fs.read_json(_names.DIR_RESULT, name)

    def wait(self, name_or_id: str, timeout: Optional[float] = None, check: bool = True,
             wait_for_runner: Optional[float] = None) -> Result:
        """Wait for the command's result. With check, a status other than ok
        raises CommandFailed, CommandTimeout or Cancelled (``.result`` holds
        the result). ``timeout`` (seconds, None: no limit) raises
        WaitTimeout; no live runner for ``wait_for_runner`` seconds (about
        a second when the runner stopped on purpose) raises RunnerNotAlive
        (context: cmd_id, reason, grace_ms). The command then stays queued
        for a later runner, and the error says so; withdraw() takes it
        back."""
        name = self._resolve(name_or_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        live = Liveness(self, self._grace(wait_for_runner))
        backoff = self._backoff()
        watch = self._watch_results()
        cmd_id = (_names.parse_name(name) or (0, name))[1]  # For the context of an error.
        pruned_at = time.monotonic() + 1.0  # Whether retention removed its result: after a second, then every second.
        while True:
            if watch is not None:
                watch.drain()  # Before the look: a result written after it wakes the sleep below.
            res = self.result(name)
            if res is not None:
                if check and res.get("status") != "ok":
                    raise result_error(res)
                return res
            if time.monotonic() >= pruned_at:
                pruned_at = time.monotonic() + 1.0
                gone = self._gone(name)
                if gone is not None:
                    raise gone
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout("no result for %s within %gs" % (name, timeout), context={"cmd_id": cmd_id})
            try:
                live.check()
            except RunnerNotAlive as e:
                raise self._no_runner(e, name) from None
            backoff.sleep(deadline, watch)

    def _queued(self, name: str) -> bool:
        """Whether command file name is still in queue/, unclaimed."""
        self.fs.revalidate(_names.DIR_QUEUE)
        try:
            self.fs.stat(_names.DIR_QUEUE, name)
            return True
        except (OSError, MasterError):
            return False

    def _no_runner(self, e: RunnerNotAlive, name: str) -> RunnerNotAlive:
        """A wait's RunnerNotAlive for command file name, saying plainly
        what becomes of it (the Go master's noRunnerErr): a
        queued command stays queued, and a runner started later runs it
        unless it is withdrawn. Its context has the cmd_id."""
        cmd_id = (_names.parse_name(name) or (0, name))[1]
        msg = "waiting for %s: %s" % (cmd_id, e)
        if self._queued(name):
            msg += "; %s stays queued: a runner started later runs it unless it is withdrawn" % cmd_id
        out = RunnerNotAlive(msg, context=dict(e.context, cmd_id=cmd_id))
        for k in ("resume_cursor",):
            if hasattr(e, k):
                setattr(out, k, getattr(e, k))
        return out

    def withdraw(self, cmd_id: str) -> Dict[str, Any]:
        """Take back a command no runner has claimed yet (the Go master's
        Session.Withdraw): its file is renamed from queue/ into withdrawn/
        (PROTOCOL.md section 19), so it never runs and gets no result. It is
        atomic against a runner's claim and a pool mover's, which rename the
        same entry: exactly one succeeds. ``cmd_id`` is a cmd_id (the first
        file with it), a command file's name or a path ending in one
        (queue/cmd_<seq>_<id>.json: exactly that file). A command a pool
        moved is followed through forward/ records and taken back where it
        is now, also while the move is under way. Needs no runner.

        A command that is running (claimed) raises NotQueued, one that has
        its result AlreadyFinished, one withdrawn before AlreadyWithdrawn
        (all exit 7), and one that is nowhere UnknownCmdID (6): it never
        runs. Returns the CLI's ``withdraw --json`` reply:
        ``{"protocol_version", "cmd_id", "withdrawn": True, "name"}`` (name:
        the file taken back; "session" too when a pool moved it to another
        session)."""
        name, cmd_id = _names.parse_ref(cmd_id)
        ctx = {"cmd_id": cmd_id}
        lookup = (_names.DIR_QUEUE, _names.DIR_MOVED, _names.DIR_FORWARD, _names.DIR_INFLIGHT, _names.DIR_RESULT)
        if name is None:
            name = self._find_in(cmd_id, lookup)
            if name is None:
                if self._find_in(cmd_id, (_names.DIR_WITHDRAWN,)) is not None:
                    raise _with_ctx(AlreadyWithdrawn("%s was withdrawn before: it never runs" % cmd_id), ctx)
                gone = self._pruned(None, cmd_id)
                if gone is not None:
                    raise gone
                raise UnknownCmdID("no command %s is queued, running or finished in this session (it will not run)"
                                   % cmd_id, context=ctx)
        elif not any(_exists_in(self.fs, d, name) for d in lookup):
            if _exists_in(self.fs, _names.DIR_WITHDRAWN, name):
                raise _with_ctx(AlreadyWithdrawn("%s was withdrawn before (withdrawn/%s): it never runs"
                                                 % (cmd_id, name)), ctx)
            gone = self._pruned(name, cmd_id)
            if gone is not None:
                raise gone
            raise UnknownCmdID("no command file %s is queued, running or finished in this session (it will not run)"
                               % name, context=ctx)
        sfs, cur = self.fs, name
        deadline = time.monotonic() + _MOVE_WAIT
        hops = 0
        try:
            while True:
                if _take_back(sfs, _names.DIR_QUEUE, cur, cur):
                    return _withdrawn_reply(self.fs, sfs, cmd_id, cur)
                # Gone from queue/: a runner, a mover or a withdraw took it.
                # A mover renames it into moved/, records forward/, then
                # removes moved/: look in that order.
                moving = _exists_in(sfs, _names.DIR_MOVED, cur)
                fwd = sfs.read_json(_names.DIR_FORWARD, cur, 1 << 16)
                if fwd is not None:
                    to_name, stage, to_session = fwd.get("to_name"), fwd.get("stage"), fwd.get("to_session")
                    parsed = _names.parse_name(to_name) if isinstance(to_name, str) else None
                    if (parsed is None or parsed[1] != cmd_id or not isinstance(stage, str) or not stage or "/" in stage
                            or not isinstance(to_session, str) or not to_session or hops >= 16):
                        raise MasterError("withdrawing %s: cannot follow forward/%s" % (cmd_id, cur), context=ctx)
                    nfs = sfs.relative(to_session)
                    # The mover may not have published it yet: its staged
                    # copy is taken first, then the published file.
                    if _take_back(nfs, _names.DIR_QUEUE, stage, to_name):
                        return _withdrawn_reply(self.fs, nfs, cmd_id, to_name)
                    sfs, cur, hops = nfs, to_name, hops + 1
                    continue
                if moving:
                    if time.monotonic() < deadline:
                        time.sleep(0.01)  # A mover is staging it: wait for its forward record.
                        continue
                    raise _with_ctx(NotQueued("%s is being moved by a pool (moved/%s) and may still run; withdraw it "
                                              "again once master pool heal has finished the move" % (cmd_id, cur)), ctx)
                # inflight/ before result/: the runner renames the result
                # in, then moves the claim out, so a claim seen beside a
                # result is finished, and no order of the two looks misses
                # both.
                claimed = _exists_in(sfs, _names.DIR_INFLIGHT, cur)
                sfs.revalidate(_names.DIR_RESULT)
                res = sfs.read_json_quiet(_names.DIR_RESULT, cur)
                if res is not None:
                    raise _with_ctx(AlreadyFinished("%s has its result (%s); nothing to withdraw"
                                                    % (cmd_id, res.get("status"))), ctx)
                if claimed:
                    raise _with_ctx(NotQueued("%s is running (a runner claimed it); cancel it instead" % cmd_id), ctx)
                if _exists_in(sfs, _names.DIR_WITHDRAWN, cur):
                    raise _with_ctx(AlreadyWithdrawn("%s was withdrawn before (withdrawn/%s): it never runs"
                                                     % (cmd_id, cur)), ctx)
                raise UnknownCmdID("%s is no longer queued, running or finished in this session (it will not run)"
                                   % cmd_id, context=ctx)
        except OSError as e:
            raise MasterError("withdrawing %s: %s" % (cmd_id, e), context=ctx) from e

    def _exists(self, sub: str, name: str) -> bool:
        self.fs.revalidate(sub)
        try:
            self.fs.stat(sub, name)
            return True
        except (OSError, MasterError):
            return False

    def run(self, payload: str, wait_timeout: Optional[float] = None, check: bool = True,
            wait_for_runner: Optional[float] = None, **submit_args: Any) -> Result:
        """submit, then wait."""
        _, name = self.submit(payload, **submit_args)
        return self.wait(name, timeout=wait_timeout, check=check, wait_for_runner=wait_for_runner)

    def output_bytes(self, result_or_id: Union[Result, str], offset: int = 0, length: int = -1) -> bytes:
        """A byte range of the command's output (all of it by default).

        Once the command has a result, never fewer bytes than the result
        says the file holds (``stats.bytes``): an output file that is
        missing (deleted, moved out of output/) or shorter raises
        MasterError (io_error) naming it; where the result carries a copy
        (``output_inline``) the copy is served instead. Before the result,
        what the file holds so far (b"" if nothing yet). A length of 0 or
        less reads to the end, as in every master; a negative offset is a
        UsageError."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise UsageError("output offset %r: must not be negative" % (offset,), context={"field": "offset"})
        if length is None or length <= 0:
            length = -1
        if isinstance(result_or_id, dict):
            res: Optional[Result] = result_or_id
            rel = str(result_or_id.get("output_path") or "")
            if rel == "":
                return b""  # A command that never ran (cancelled before start, runner restarted).
            if not rel.startswith(_names.DIR_OUTPUT + "/") or ".." in rel.split("/"):
                raise MasterError("result has no usable output_path: %r" % rel)
            sub, _, base = rel.rpartition("/")
        else:
            name = self._resolve(result_or_id)
            # The result before the file: one committed while the file is
            # read would make a read of a running command look short.
            res = self.result(name)
            sub, base = _names.DIR_OUTPUT, _names.output_name(name)
        self.fs.revalidate(sub)
        data = self.fs.read_range(sub, base, offset, length, missing=None)
        if data is None and not isinstance(result_or_id, dict):
            gone = self._gone(name)
            if gone is not None:
                raise gone  # Its files left with the session's retention.
        return _judge_output(self.fs.path(sub, base), res, data, offset, length)

    def output(self, result_or_id: Union[Result, str], offset: int = 0, length: int = -1) -> str:
        """output_bytes decoded as UTF-8 (invalid bytes replaced)."""
        return self.output_bytes(result_or_id, offset, length).decode("utf-8", "replace")

    # --- control requests (the ctl/ mailbox) ------------------------------

    def request(self, op: str, fields: Optional[Dict[str, Any]] = None, timeout: Optional[float] = None,
                wait_for_runner: Optional[float] = None) -> Dict[str, Any]:
        """Send one control request through the mailbox and return the
        runner's reply, without interpreting its outcome (cancel() and stop()
        do). As the Go master: with no live runner it writes nothing and
        raises RunnerNotAlive (a request for no runner would only be stale
        for the next one); otherwise it writes ``ctl/req_<seq>_<req_id>.json``
        (temp file + rename) naming the live runner's session_id and waits
        for ``ctl/ack/<same name>``, checking liveness meanwhile. A wait
        that fails withdraws the request unless the runner took it."""
        req_id = _names.new_id()
        seq = _names.alloc_seq(self.fs)
        # Alive at once when the heartbeat is fresh by the filesystem's
        # clock; else watch the counter (PROTOCOL.md section 19, "Control
        # requests"): a counter takes up to a heartbeat period to move.
        state = self._fresh_heartbeat(seq)
        if state is None:
            state = self._await_alive(wait_for_runner).state
        body: Dict[str, Any] = {"protocol_version": _names.PROTOCOL_VERSION, "req_id": req_id, "seq": seq,
                                "op": op, "ts": _names.now_iso(), "submitter": self.owner}
        sid = state.get("session_id")
        if isinstance(sid, str) and sid:
            body["session_id"] = sid
        body.update(fields or {})
        name = _names.request_name(seq, req_id)
        try:
            self.fs.write_atomic(_names.DIR_CTL, name, dumps(body))
        except OSError as e:
            raise MasterError("write request %s: %s" % (name, e)) from e
        return self._wait_reply(name, timeout, wait_for_runner)

    def _read_reply(self, name: str) -> Optional[Dict[str, Any]]:
        self.fs.revalidate(_names.DIR_ACK)
        return self.fs.read_json(_names.DIR_ACK, name)

    def _wait_reply(self, name: str, timeout: Optional[float], wait_for_runner: Optional[float]) -> Dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        live = Liveness(self, self._grace(wait_for_runner))
        backoff = self._backoff()
        while True:
            reply = self._read_reply(name)
            if reply is not None:
                return reply
            try:
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeout("no reply to %s within %gs" % (name, timeout))
                live.check()
            except MasterError:
                # Withdraw the request unless the runner took it meanwhile.
                self.fs.withdraw(_names.DIR_CTL, name)
                reply = self._read_reply(name)
                if reply is not None:
                    return reply
                raise
            backoff.sleep(deadline)

    def cancel(self, cmd_id: Optional[str] = None, timeout: Optional[float] = None,
               wait_for_runner: Optional[float] = None) -> Dict[str, Any]:
        """Cancel the command cmd_id (running or queued; a command file's
        name, or a path ending in one, names its command too), or with no
        cmd_id the running one. Returns the reply (outcome cancelled_running or
        cancelled_queued); raises UnknownCmdID (not_found),
        AlreadyFinished, Idle, StaleRequest or RequestRejected."""
        fields: Dict[str, Any] = {"scope": "current"}
        if cmd_id is not None:
            # A command file's name names its command too (PROTOCOL.md 19).
            fields = {"scope": "cmd_id", "cmd_id": _names.parse_ref(cmd_id)[1]}
        reply = self.request("cancel", fields, timeout, wait_for_runner)
        outcome = reply.get("outcome")
        if outcome in ("cancelled_running", "cancelled_queued"):
            return reply
        raise _reply_error(reply, "cancel %s" % (cmd_id or "(current)"))

    def stop(self, force: bool = False, wait: bool = False, timeout: Optional[float] = None,
             wait_for_runner: Optional[float] = None) -> Dict[str, Any]:
        """Ask the runner to stop (graceful: the running command completes;
        force: it is ended) and return the reply (outcome accepted). With no
        live runner it raises RunnerNotAlive and writes nothing: a stop
        request never outlives the runner it was meant for. With wait, it
        returns once the runner has stopped (phase stopped, its lock free,
        or no live runner seen for the grace), so it cannot block on a
        runner that died; ``timeout`` bounds the whole call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        reply = self.request("stop", {"mode": "force" if force else "graceful"}, timeout, wait_for_runner)
        if reply.get("outcome") != "accepted":
            raise _reply_error(reply, "stop")
        if not wait:
            return reply
        backoff = self._backoff()
        live = Liveness(self, self._grace(wait_for_runner))
        while True:
            look = self._observe_liveness()
            if not look.alive and look.definite:
                return reply
            try:
                live.judge(time.monotonic(), look)
            except RunnerNotAlive:
                return reply  # Gone for the grace: stopped as far as any master can tell.
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout("the runner did not stop within %gs" % timeout)
            backoff.sleep(deadline)

    # --- input to a running command -----------------------------

    def send(self, cmd_id: str, data: Union[str, bytes], expect: Optional[str] = None,
             expect_timeout: Optional[float] = None, expect_from: Optional[int] = None, secret: bool = False,
             timeout: Optional[float] = None, wait_for_runner: Optional[float] = None) -> Dict[str, Any]:
        """Type data (str: UTF-8; add the newline a line needs) into the
        tool's terminal while command cmd_id runs, and return the runner's
        reply (outcome delivered: bytes, sha256 unless secret, spool_offset,
        output_offset, match_start/match_end).

        With expect (an RE2 regular expression, Go syntax: keep to what
        Python's re and RE2 share) the runner first waits for it in the
        command's output, from the command's expect cursor (the end of the
        last match a send consumed: no match is skipped, none answered
        twice) or from expect_from, within the last 64 KiB, for at most
        expect_timeout seconds (its clock; default 30) — a queued command is
        waited for — and sends nothing when it does not match:
        ExpectTimeout. secret: the bytes are written nowhere in the session;
        refused (RefusedEcho) while the terminal echoes. A command that is
        not running (queued, finished, unknown) gets nothing: NotRunning,
        whose ``reply["cmd_state"]`` says which. Input the command did not
        read is dropped when it ends, never reaching a later command."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(raw) > 1 << 20:
            raise UsageError("send: %d bytes, the limit of one send is %d" % (len(raw), 1 << 20))
        fields: Dict[str, Any] = {"cmd_id": _names.check_id(cmd_id),
                                  "data_b64": base64.b64encode(raw).decode("ascii")}
        if secret:
            fields["secret"] = True
        if expect:
            fields["expect"] = expect
        if expect_timeout is not None:  # The runner's bound: 0 to 7 days.
            fields["expect_timeout_ms"] = int(round(json_number("expect_timeout", expect_timeout, lo=0, hi=7 * 86400) * 1000))
        if expect_from is not None:
            fields["expect_from"] = json_number("expect_from", expect_from, integer=True, lo=0)
        reply = self.request("send", fields, timeout, wait_for_runner)
        if reply.get("outcome") == "delivered":
            return reply
        raise _reply_error(reply, "send %s" % cmd_id)

    def signal(self, cmd_id: str, sig: str, timeout: Optional[float] = None,
               wait_for_runner: Optional[float] = None) -> Dict[str, Any]:
        """Send sig (INT, QUIT, TSTP, CONT, HUP, USR1, USR2, TERM, KILL;
        "SIGUSR1" and lower case work too) to the foreground process group of
        the tool's terminal while cmd_id runs. No cancel semantics: the command
        goes on or ends as the tool decides (KILL: the tool dies and is
        restarted). NotRunning when it is not running."""
        name = sig.strip().upper()
        if name.startswith("SIG"):
            name = name[3:]
        if name not in SIGNALS:
            raise UsageError("signal: %r is not one of %s" % (sig, ", ".join(SIGNALS)))
        reply = self.request("signal", {"cmd_id": _names.check_id(cmd_id), "signal": name}, timeout, wait_for_runner)
        if reply.get("outcome") == "delivered":
            return reply
        raise _reply_error(reply, "signal %s" % cmd_id)

    def resize(self, cols: int, rows: int, timeout: Optional[float] = None,
               wait_for_runner: Optional[float] = None) -> Dict[str, Any]:
        """Set the tool's terminal to cols x rows (ints, 1 to 10000); the
        tool gets SIGWINCH. The size is kept when the tool restarts."""
        size = {"cols": json_number("cols", cols, integer=True, lo=1, hi=10000),
                "rows": json_number("rows", rows, integer=True, lo=1, hi=10000)}
        reply = self.request("resize", size, timeout, wait_for_runner)
        if reply.get("outcome") == "delivered":
            return reply
        raise _reply_error(reply, "resize")

    # --- state and liveness -----------------------------------------------

    def _state(self) -> Optional[Dict[str, Any]]:
        self.fs.revalidate(_names.DIR_STATE)
        return self.fs.read_json_quiet(*_names.STATE)

    def _heartbeat(self) -> Optional[Dict[str, Any]]:
        self.fs.revalidate(_names.DIR_STATE)
        return self.fs.read_json_quiet(*_names.HEARTBEAT)

    def _heartbeat_age_ns(self) -> int:
        """The Go master's heartbeat_age_ns: since the heartbeat file's
        mtime on this host's clock, to the millisecond (0 when it is not a
        regular file). Informative only: liveness never compares clocks."""
        try:
            fi = self.fs.stat(*_names.HEARTBEAT)
        except (OSError, MasterError):
            return 0
        if not stat.S_ISREG(fi.st_mode):
            return 0
        return _status.round_ns(time.time_ns() - fi.st_mtime_ns, 1000000)

    def _observe_liveness(self) -> Look:
        self.fs.revalidate(_names.DIR_STATE)
        self._hb_look = observe(self.fs, self.network, self._hb_seen)
        return self._hb_look

    def _fresh_heartbeat(self, seq: int) -> Optional[Dict[str, Any]]:
        """state.json when the runner looks alive from one look, without
        waiting (the Go master's freshHeartbeat): state.json names a session
        and is not stopped, the heartbeat is that session's, on a local
        filesystem the runner's lock is held, and heartbeat.json was
        rewritten within the liveness window by the session's filesystem
        clock: its mtime against that of seq reservation seq, just made.
        Both mtimes come from the filesystem, so no two hosts' clocks meet.
        None means "not shown", not "dead"."""
        self.fs.revalidate(_names.DIR_STATE)
        st, hb = self._state(), self._heartbeat()
        if not st or not st.get("session_id") or st.get("phase") == "stopped":
            return None
        if not hb or hb.get("phase") == "stopped" or hb.get("session_id") != st.get("session_id"):
            return None
        try:
            hb_info, ref = self.fs.stat(*_names.HEARTBEAT), self.fs.stat(_names.DIR_SEQ, "%0*d" % (_names.SEQ_WIDTH, seq))
        except (OSError, MasterError):
            return None
        if not stat.S_ISREG(hb_info.st_mode) or not stat.S_ISREG(ref.st_mode):
            return None
        if (ref.st_mtime_ns - hb_info.st_mtime_ns) / 1e9 > window_of(hb):
            return None
        if not self.network and not self.fs.lock_held(*_names.LOCK):
            return None
        return st

    def _await_alive(self, wait_for_runner: Optional[float]) -> Look:
        """The check a request makes before it writes anything (the Go
        master's awaitAlive): looks every 100 ms until the runner is seen
        alive. A definite sign of death (stopped, no state, a free lock)
        raises RunnerNotAlive at once; a late heartbeat does not: it raises
        only once no live runner has been seen for the grace, the rule of
        every wait (PROTOCOL.md section 8, "Giving up")."""
        live = Liveness(self, self._grace(wait_for_runner))
        while True:
            look = self._observe_liveness()
            if look.alive:
                return look
            if look.definite:
                raise RunnerNotAlive("runner not alive: %s; nothing was written" % look.reason,
                                     context={"reason": look.reason,
                                              "grace_ms": int(grace_of(live.base, look.interval) * 1000)})
            try:
                live.judge(time.monotonic(), look)
            except RunnerNotAlive as e:
                raise RunnerNotAlive("%s; nothing was written" % e, context=e.context) from None
            time.sleep(0.1)  # PROTOCOL.md 19.1: liveness looked at no more often than every 100 ms.

    def _alive(self) -> Tuple[bool, str]:
        """The Go master's status rule (Session.Status): one look, and when
        it cannot decide, more looks every 50 ms until it can (at most one
        liveness window, or 10 s for a heartbeat claiming a huge interval).
        A status is a snapshot: a late counter reads as not alive."""
        look = self._observe_liveness()
        end = time.monotonic() + 10.0
        while not look.alive and not look.definite and not look.late:
            if time.monotonic() >= end:
                return False, "heartbeat counter did not move"
            time.sleep(0.05)
            look = self._observe_liveness()
        return look.alive, look.reason

    def status(self) -> Dict[str, Any]:
        """What the Go master's Status reports, with the same keys (the
        running command's elapsed time, last line and quiet time, the lease
        and the last five results included), liveness
        judged by the same rule (this may take up to two heartbeat periods
        plus 250 ms). ``can_serve`` is False when commands cannot run: no
        live runner, or phase error or stopping."""
        st = self._state()
        hb = self._heartbeat()
        out: Dict[str, Any] = {"protocol_version": _names.PROTOCOL_VERSION, "alive": False, "alive_reason": "",
                               "phase": "", "dir": self.dir, "queue_depth": self._queue_depth(),
                               "heartbeat_counter": 0, "heartbeat_age_ns": 0, "commands_done": 0, "can_serve": False}
        if st is None and hb is None:
            out["alive_reason"] = "no runner has written state yet"
            out["resume_cursor"] = self._spool_size_quiet()
            return out
        st, hb = st or {}, hb or {}
        for key, src in (("phase", "phase"), ("reason", "reason"), ("session_id", "session_id"),
                         ("runner_host", "hostname"), ("runner_pid", "runner_pid"), ("tool_pid", "tool_pid"),
                         ("commands_done", "commands_done"), ("filesystem", "filesystem"), ("kind", "kind"),
                         ("tool_starts", "tool_starts"), ("error", "error"), ("current_cmd_id", "current_cmd_id")):
            if st.get(src) is not None:
                out[key] = st[src]
        out["heartbeat_counter"] = hb.get("counter", 0)
        out["heartbeat_age_ns"] = self._heartbeat_age_ns()
        if hb.get("current_cmd_id") and hb.get("current_cmd_id") == st.get("current_cmd_id") and \
                _status.int_of(hb.get("current_output_bytes")) > 0:  # Left out at 0, as the Go master's omitempty.
            out["current_output_bytes"] = _status.int_of(hb.get("current_output_bytes"))
        out["resume_cursor"] = self._spool_size_quiet()  # Before the liveness watch, as the Go master.
        out["alive"], out["alive_reason"] = self._alive()
        _status.details(self.fs, out, st, hb)
        out["can_serve"] = out["alive"] and out["phase"] not in ("error", "stopping")
        return out

    def _queue_depth(self) -> int:
        self.fs.revalidate(_names.DIR_QUEUE)
        try:
            return sum(1 for n in self.fs.list(_names.DIR_QUEUE) if _names.parse_name(n) is not None)
        except (OSError, MasterError):
            return 0

    def ready(self, timeout: float = 60.0, wait_for_runner: Optional[float] = None) -> Dict[str, Any]:
        """Wait until a live runner serves the session (phase idle or busy)
        and return its status. Raises RunnerNotAlive once no live runner has
        been seen for wait_for_runner, a runner that stopped on purpose
        included (one that gave up on a failing --init has stopped), and on timeout CannotServe when the runner is
        alive in phase error (with its reason), else WaitTimeout."""
        deadline = time.monotonic() + timeout
        # The whole grace even when the runner stopped on purpose: ready is
        # how a caller waits for a runner to be started again.
        live = Liveness(self, self._grace(wait_for_runner), stopped_ends=False)
        while True:
            live.next_look = 0.0
            live.check()
            if live.last.alive and live.last.state.get("phase") in ("idle", "busy"):
                return self.status()
            if time.monotonic() >= deadline:
                st = live.last.state
                if st.get("phase") == "error":
                    raise CannotServe("no runner ready within %gs: the runner cannot serve (phase error: %s)"
                                      % (timeout, st.get("reason") or ""))
                raise WaitTimeout("no runner ready within %gs: %s" % (timeout, live.last.reason))
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    # --- lease ------------------------------------------------------------

    def write_lease(self, ttl: float, lease_id: str = "python-lease") -> Dict[str, Any]:
        """Write state/lease.json once (and return what was written): the
        runner stops when it sees no renewal for ttl seconds (its own clock)."""
        return write_lease(self.fs, ttl, lease_id, self.owner)

    def keep_lease(self, ttl: float, lease_id: Optional[str] = None, on_error: Any = None) -> LeaseKeeper:
        """Write the lease and renew it every ttl/3 from a daemon thread
        until the returned keeper's stop() (or set()). A renewal that fails
        is reported: on_error(exc) if given, else on stderr; the keeper
        keeps the errors (``.errors``) and ``check()`` raises the last one."""
        return LeaseKeeper(self, ttl, lease_id or "lease-" + _names.new_id(), on_error)

    # --- the spool --------------------------------------------------------

    def spool_size(self) -> int:
        try:
            return self.fs.stat(*_names.SPOOL).st_size
        except FileNotFoundError:
            return 0

    def _spool_size_quiet(self) -> int:
        """spool_size, 0 when it cannot be read (a FIFO or symlink there)."""
        try:
            return self.spool_size()
        except (OSError, MasterError):
            return 0

    def wait_for(self, pattern: Union[str, bytes, "re.Pattern[bytes]"], from_: int = 0,
                 timeout: Optional[float] = None, wait_for_runner: Optional[float] = None) -> Match:
        """Wait until pattern (a Python regular expression, matched against
        the raw bytes of log/session.out) matches at or after byte cursor
        from_. Returns the first match; its resume_cursor (the end of the
        match) is where the next wait_for starts. On timeout raises
        WaitTimeout whose ``resume_cursor`` is the spool size then."""
        rx = pattern if hasattr(pattern, "search") else re.compile(
            pattern.encode("utf-8") if isinstance(pattern, str) else pattern)
        deadline = None if timeout is None else time.monotonic() + timeout
        live = Liveness(self, self._grace(wait_for_runner))
        backoff = self._backoff()
        # Below the retention's cut the spool's bytes are holes that read as
        # zeros (PROTOCOL.md section 23): an old cursor starts at the cut.
        start = max(from_, self._spool_cut())
        buf, buf_start, read_at = b"", start, start
        keep = 64 << 10
        while True:
            chunk = self._read_spool(read_at)
            if chunk:
                buf += chunk
                read_at += len(chunk)
                backoff.reset()
            m = rx.search(buf)  # type: ignore[union-attr]
            if m:
                start, end = buf_start + m.start(), buf_start + m.end()
                return Match(start, end, m.group(0), end)
            if len(buf) > keep:
                buf_start += len(buf) - keep
                buf = buf[-keep:]
            if deadline is not None and time.monotonic() >= deadline:
                pat = rx.pattern.decode("utf-8", "replace") if isinstance(rx.pattern, bytes) else rx.pattern  # type: ignore[union-attr]
                e = WaitTimeout("no match for %r within %gs" % (pat, timeout))
                e.resume_cursor = max(self._spool_size_quiet(), read_at, from_)  # type: ignore[attr-defined]
                e.context["resume_cursor"] = e.resume_cursor  # type: ignore[attr-defined]
                raise e
            try:
                live.check()
            except RunnerNotAlive as e:  # Like a timeout: the spool size, no match fields.
                e.resume_cursor = max(self._spool_size_quiet(), read_at, from_)  # type: ignore[attr-defined]
                e.context["resume_cursor"] = e.resume_cursor  # type: ignore[attr-defined]
                raise
            backoff.sleep(deadline)

    def _spool_cut(self) -> int:
        """state.json's retention.spool_cut: where the spool's data goes on
        after what the session's retention cut from it (0: nothing cut)."""
        ret = (self._state() or {}).get("retention")
        cut = ret.get("spool_cut") if isinstance(ret, dict) else None
        return cut if isinstance(cut, int) and not isinstance(cut, bool) and cut > 0 else 0

    def _read_spool(self, offset: int) -> bytes:
        return self.fs.read_range(*_names.SPOOL, offset, 4 << 20)


def _reply_error(reply: Dict[str, Any], what: str) -> MasterError:
    """The exception for a reply whose outcome is not a success; the reply
    is in its ``reply`` attribute."""
    outcome = reply.get("outcome")
    msg = "%s: %s: %s" % (what, outcome, reply.get("message") or "")
    cls = {"not_found": UnknownCmdID, "already_finished": AlreadyFinished, "idle": Idle,
           "not_running": NotRunning, "stale": StaleRequest, "expect_timeout": ExpectTimeout,
           "refused_echo": RefusedEcho}.get(str(outcome), RequestRejected)
    e = cls(msg)
    e.reply = reply  # type: ignore[attr-defined]
    # The reply's own context as the runner wrote it (the invalid field, the
    # request file, a limit), then the master's keys, which win.
    runner_ctx = reply.get("context")
    e.context = dict(runner_ctx) if isinstance(runner_ctx, dict) else {}
    e.context.update({k: reply[k] for k in ("op", "req_id", "outcome", "cmd_id", "cmd_state") if reply.get(k)})
    return e


# _MOVE_WAIT bounds how long withdraw waits for a pool mover that claimed
# the command (moved/) to record where it goes (forward/); a live mover
# takes milliseconds, a killed one leaves it to the next heal.
_MOVE_WAIT = 5.0


def _exists_in(sfs: "_fs.SessionFS", sub: str, name: str) -> bool:
    sfs.revalidate(sub)
    return sfs.exists(sub, name)


def _take_back(sfs: "_fs.SessionFS", sub: str, frm: str, name: str) -> bool:
    """Rename sub/frm into withdrawn/name (created if missing); False when
    frm is gone (a runner, a mover or another withdraw took it first)."""
    sfs.revalidate(sub)
    if not sfs.exists(sub, frm):
        return False
    sfs.mkdir_master(_names.DIR_WITHDRAWN)
    return sfs.claim(sub, frm, _names.DIR_WITHDRAWN, name)


def _withdrawn_reply(home: "_fs.SessionFS", sfs: "_fs.SessionFS", cmd_id: str, name: str) -> Dict[str, Any]:
    reply = {"protocol_version": _names.PROTOCOL_VERSION, "cmd_id": cmd_id, "withdrawn": True, "name": name}
    if os.path.normpath(sfs.root) != os.path.normpath(home.root):
        reply["session"] = sfs.root
    return reply


def _with_ctx(err: MasterError, ctx: Dict[str, Any]) -> MasterError:
    """err with its context set (NothingToDo takes a reply, not a context)."""
    err.context = ctx
    return err


def _judge_output(shown: str, res: Optional[Result], data: Optional[bytes], offset: int, length: int) -> bytes:
    """What output_bytes answers for a read (data; None: no file) of a
    command whose result is res (None: none yet)."""
    if res is None:
        return b"" if data is None else data
    total = int((res.get("stats") or {}).get("bytes") or 0)
    want = total if length < 0 else min(total, offset + length)
    if data is None:
        inline = res.get("output_inline")
        copy = None
        if isinstance(inline, str) and inline:
            try:
                copy = base64.b64decode(inline, validate=True)
            except ValueError:
                copy = None
        if copy is not None and len(copy) == total:
            return copy[offset:] if length < 0 else copy[offset:offset + length]
        if want > offset:
            raise MasterError("%s is gone (deleted or moved out of the session), and the result of %s says it held %d bytes: "
                              "its output is not in this session any more" % (shown, res.get("cmd_id"), total))
        return b""
    if offset + len(data) < want:
        raise MasterError("%s holds %d bytes, but the result of %s says %d: the rest is not in this session"
                          % (shown, offset + len(data), res.get("cmd_id"), total))
    return data
