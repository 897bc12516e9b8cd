"""skillpilot-master: the Python master's command line.

The same commands, flags, exit codes and ``--json`` documents as the Go
``master`` CLI (docs/python.md), for hosts that have Python but not the Go
binary. Run it as ``skillpilot-master`` (installed by pip) or
``python -m skillpilot``.
"""

import argparse
import base64
import contextlib
import json
import os
import re
import signal
import sys
import time
from typing import Any, Dict, NoReturn, Optional, Sequence, TextIO, Tuple

from . import _fs, _names, _status
from ._wait import Liveness
from .errors import (EXIT_INTERRUPTED, MasterError, ResultError, RunnerNotAlive, UsageError, WaitTimeout,
                     exit_code_of_status)
from .session import Session

PROG = "skillpilot-master"

_DUR = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """Seconds from a Go-style duration ("1m30s", "250ms") or a bare
    number of seconds ("1.5")."""
    t = text.strip()
    try:
        v = float(t)
        if v < 0:
            raise ValueError
        return v
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _DUR.finditer(t):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(t) or not t:
        raise argparse.ArgumentTypeError("%r is not a duration: use e.g. 30s, 1.5s, 500ms, 2m, or seconds" % text)
    return total


def _id_of(name: str) -> str:
    """The cmd_id of command file name (the name itself if it is not one)."""
    return (_names.parse_name(name) or (0, name))[1]


class _Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__("interrupted by signal %d" % signum)
        self.signum = signum


def _on_term(signum: int, _frame: Any) -> NoReturn:
    raise _Interrupted(signum)


class _ArgError(Exception):
    """A command line argparse refused: its message and the parser's prog."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors come back to main (as
    _ArgError) instead of exiting, so that with --json the error is a JSON
    document on stdout too, as the Go CLI's (PROTOCOL.md section 19)."""

    def error(self, message: str) -> NoReturn:
        raise _ArgError(message, self.prog)


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--session", default=argparse.SUPPRESS, help="session directory (default $SP_SESSION_DIR)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print only JSON on stdout (with protocol_version)")
    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument("--wait-timeout", type=duration, default=None, help="how long to wait (default: no limit); exit 3")
    waiting.add_argument("--wait-for-runner", type=duration, default=None,
                         help="how long to wait without a live runner before exit 5 (default 10s)")

    ap = _Parser(prog=PROG, description="SkillPilot master (Python). Exit codes: 0 ok, 1 command "
                                 "failed, 2 usage, 3 timeout, 4 cancelled, 5 no session or no live runner, "
                                 "6 unknown cmd_id, 7 nothing to act on, 8 pruned (retention removed its result), "
                                 "10 I/O error, 130/143 interrupted.")
    from . import __version__
    ap.add_argument("--version", action="version",
                    version="%s (SkillPilot) %s, protocol version %d" % (PROG, __version__, _names.PROTOCOL_VERSION))
    ap.add_argument("--session", default=os.environ.get("SP_SESSION_DIR"), help="session directory (default $SP_SESSION_DIR)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("submit", parents=[common, waiting], help="queue a command (and with --wait, run it)")
    p.add_argument("--timeout", type=duration, default=None, help="the command's timeout (timeout_s)")
    p.add_argument("--cancel-policy", choices=("ctrl_c", "terminate_tool", "terminate_session"))
    p.add_argument("--max-output-bytes", type=int, default=None,
                   help="the command's output budget (max_output_bytes; 0: the runner's --max-output-bytes)")
    p.add_argument("--id", dest="cmd_id", help="cmd_id (default: a new UUIDv7)")
    p.add_argument("--kind", help="tcl, sh or a driver's kind (default: the runner's kind)")
    p.add_argument("--wait", action="store_true", help="wait, print the output and the value, exit with the status")
    p.add_argument("--no-value", action="store_true", help="with --wait, do not print the value after the output")
    p.add_argument("--cancel-on-interrupt", action="store_true",
                   help="with --wait, cancel the command when interrupted (Ctrl-C), then exit 130")
    p.add_argument("--trace-id", help="the flow's id for this command (trace_id)")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help="a label (repeatable)")
    p.add_argument("-f", dest="file", help="read the payload from FILE ('-': stdin)")
    p.add_argument("payload", nargs="?")

    p = sub.add_parser("wait", parents=[common, waiting], help="wait for a result; print the output")
    p.add_argument("--timeout", type=duration, dest="wait_timeout", default=argparse.SUPPRESS,
                   help="same as --wait-timeout")
    p.add_argument("--no-value", action="store_true")
    p.add_argument("--cancel-on-interrupt", action="store_true",
                   help="cancel the command when interrupted (Ctrl-C), then exit 130")
    p.add_argument("cmd_id")
    p = sub.add_parser("result", parents=[common], help="print the result JSON")
    p.add_argument("cmd_id")
    p = sub.add_parser("output", parents=[common], help="print a command's output (a byte range)")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--length", type=int, default=0, help="bytes (0: to the end)")
    p.add_argument("cmd_id")
    p = sub.add_parser("withdraw", parents=[common],
                       help="take back a command no runner has claimed: it never runs (exit 7: running, finished "
                            "or withdrawn before; 6: unknown, it will not run)")
    p.add_argument("cmd_id")
    p = sub.add_parser("cancel", parents=[common, waiting], help="cancel CMD_ID, or the running command")
    p.add_argument("cmd_id", nargs="?")
    p = sub.add_parser("send", parents=[common, waiting],
                       help="type TEXT and a newline into the tool while CMD_ID runs (exit 7: not running, "
                       "3: --expect did not match)")
    p.add_argument("--expect", help="wait for this regular expression (RE2) in the command's output first")
    p.add_argument("--expect-timeout", type=duration, default=30.0, help="how long --expect waits (default 30s)")
    p.add_argument("--expect-from", type=int, default=None, help="output offset to search from")
    p.add_argument("--secret", action="store_true", help="write the bytes nowhere in the session")
    p.add_argument("--no-newline", action="store_true", help="do not add a newline to TEXT")
    p.add_argument("--file", help="send the bytes of FILE ('-': stdin)")
    p.add_argument("cmd_id")
    p.add_argument("text", nargs="?")
    p = sub.add_parser("signal", parents=[common, waiting], help="send a signal to the running command CMD_ID")
    p.add_argument("cmd_id")
    p.add_argument("sig", metavar="INT|QUIT|TSTP|CONT|HUP|USR1|USR2|TERM|KILL")
    p = sub.add_parser("resize", parents=[common, waiting], help="resize the tool's terminal")
    p.add_argument("cols", type=int)
    p.add_argument("rows", type=int)
    p = sub.add_parser("stop", parents=[common, waiting], help="stop the runner (graceful by default)")
    p.add_argument("--force", action="store_true")
    p.add_argument("--wait", action="store_true", help="wait until the runner has stopped")
    p = sub.add_parser("status", parents=[common], help="liveness, phase, tool, running command, queue, lease, last "
                       "results (exit 5: the session cannot serve commands)")
    p.add_argument("--watch", nargs="?", const=2.0, default=None, type=duration, metavar="INTERVAL",
                   help="refresh every INTERVAL (default 2s) until interrupted; with --json, one line each")
    p = sub.add_parser("lease", parents=[common], help="write the lease (and keep renewing it)")
    p.add_argument("--ttl", type=duration, required=True)
    p.add_argument("--keep", action="store_true", help="renew every ttl/3 until interrupted")
    p = sub.add_parser("waitfor", parents=[common, waiting], help="wait for a regular expression in the spool")
    p.add_argument("--from", dest="from_", type=int, default=0, help="byte cursor to start at")
    p.add_argument("regexp")
    p = sub.add_parser("ready", parents=[common], help="wait until a runner serves the session")
    p.add_argument("--wait-timeout", type=duration, default=60.0)
    p.add_argument("--wait-for-runner", type=duration, default=None,
                   help="how long to wait without a live runner before exit 5 (default 10s)")
    return ap


class _CLI:
    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.a = args
        self.out, self.err = out, err
        self.json = bool(getattr(args, "json", False))
        # The command a wait is on, set as soon as it is known: what an
        # interrupt leaves going on (interrupted()).
        self.waiting: Optional[Tuple[Session, str]] = None

    def print_json(self, v: Any) -> None:
        self.out.write(json.dumps(v, indent=2, ensure_ascii=False) + "\n")

    def warn(self, msg: str) -> None:
        self.err.write("%s: %s\n" % (PROG, msg))

    def session(self) -> Session:
        if not self.a.session:
            raise UsageError("--session is required (or set SP_SESSION_DIR)")
        return Session(self.a.session, wait_for_runner=self.a.wait_for_runner
                       if getattr(self.a, "wait_for_runner", None) is not None else None)

    def run(self) -> int:
        return int(getattr(self, "cmd_" + self.a.cmd)())

    def cmd_submit(self) -> int:
        a = self.a
        if a.file is not None and a.payload is not None:
            raise UsageError("give either -f FILE or a payload, not both")
        s = self.session()
        if a.file == "-" or (a.file is None and a.payload in (None, "-")):
            payload = sys.stdin.read()
        elif a.file is not None:
            payload = _fs.read_text(a.file)
        else:
            payload = a.payload
        labels: Dict[str, str] = {}
        for kv in a.label:
            k, eq, v = kv.partition("=")
            if not eq or not k:
                raise UsageError("--label %r: want KEY=VALUE" % kv, context={"field": "labels"})
            if k in labels:
                raise UsageError("--label %r: label %s given twice" % (kv, k), context={"field": "labels"})
            labels[k] = v
        sub = s.submit(payload, kind=a.kind, timeout=a.timeout, cancel_policy=a.cancel_policy, cmd_id=a.cmd_id,
                       max_output_bytes=a.max_output_bytes, trace_id=a.trace_id, labels=labels or None)
        if a.wait:
            self.waiting = (s, sub.name)
        else:
            look = s._observe_liveness()
            if not look.alive and look.definite:
                self.warn("no live runner (%s): %s is queued for the next runner" % (look.reason, sub.cmd_id))
            if self.json:
                self.print_json({"protocol_version": _names.PROTOCOL_VERSION, "cmd_id": sub.cmd_id, "seq": sub.seq,
                                 "file": "queue/" + sub.name, "resume_cursor": sub.resume_cursor})
            else:
                self.out.write(sub.cmd_id + "\n")
            return 0
        return self._wait(s, sub.name)

    def cmd_wait(self) -> int:
        s = self.session()
        name = s._resolve(self.a.cmd_id)
        self.waiting = (s, name)
        done = s.result(name)
        if done is not None:
            self.warn("%s already done (%s at %s)" % (self.a.cmd_id, done.get("status"), done.get("end_ts", "?")))
        return self._wait(s, name)

    def _wait(self, s: Session, name: str) -> int:
        """Stream the output while waiting (unless --json), then the value."""
        a = self.a
        deadline = None if a.wait_timeout is None else time.monotonic() + a.wait_timeout
        live = Liveness(s, a.wait_for_runner)
        backoff = s._backoff()
        off, partial = 0, False
        while True:
            res = s.result(name)
            if not self.json:
                chunk = s.output_bytes(name, off)
                if chunk:
                    off += len(chunk)
                    self.out.write(chunk.decode("utf-8", "replace"))
                    partial = not chunk.endswith(b"\n")
                    self.out.flush()
                    backoff.reset()
            if res is not None:
                break
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout("no result for %s within %gs" % (name, a.wait_timeout),
                                  context={"cmd_id": _id_of(name)})
            try:
                live.check()
            except RunnerNotAlive as e:
                return self._no_runner(s, s._no_runner(e, name), name)
            backoff.sleep(deadline)
        status = str(res.get("status"))
        if self.json:
            self.print_json(res)
        elif status == "ok" and res.get("value") not in (None, "") and not a.no_value:
            self.out.write(("\n" if partial else "") + str(res["value"]) + "\n")
        if status != "ok":
            err = res.get("error") or {}
            self.warn("command %s: %s: %s" % (res.get("cmd_id"), status, err.get("message") or res.get("exit_reason")))
        return exit_code_of_status(status)

    def interrupted(self) -> None:
        """After an interrupted wait, say that the command goes on and how
        to cancel it, or with --cancel-on-interrupt cancel it (the Go
        CLI's words)."""
        if self.waiting is None:
            return
        s, name = self.waiting
        cmd_id = _id_of(name)
        try:
            if s.result(name) is not None:
                return  # It has a result: nothing goes on.
            where = "queued" if s._queued(name) else "running"
        except (MasterError, OSError):
            return
        howto = "%s cancel %s --session %s" % (PROG, cmd_id, s.dir)
        if not getattr(self.a, "cancel_on_interrupt", False):
            self.warn("%s is still %s; %s" % (cmd_id, where, howto))
            return
        try:
            reply = s.cancel(cmd_id, timeout=30)
        except MasterError as e:
            self.warn("%s was %s and could not be cancelled (%s); %s" % (cmd_id, where, e, howto))
            return
        self.warn("cancelled on interrupt: %s: %s" % (reply.get("outcome"), reply.get("message", "")))

    def _no_runner(self, s: Session, e: RunnerNotAlive, name: str) -> int:
        """Report a wait that gave up for want of a runner; while the
        command is still queued, say on a line of its own how to take it
        back (the Go CLI's noRunnerHint)."""
        code = _fail(self, e.code, str(e), e.exit_code, e.context)
        if s._queued(name):
            cmd_id = e.context.get("cmd_id")
            self.warn("to take %s back: %s withdraw %s --session %s" % (cmd_id, PROG, cmd_id, s.dir))
        return code

    def cmd_withdraw(self) -> int:
        """Take back a queued command (Session.withdraw: a cmd_id, a command
        file's name or queue/<name>); needs no runner. Exit 0 withdrawn; 7
        running (cancel it instead), finished or withdrawn before; 6 unknown
        (it will not run)."""
        reply = self.session().withdraw(self.a.cmd_id)
        if self.json:
            self.print_json(reply)
        else:
            self.out.write("withdrawn: %s (it will not run)\n" % reply["cmd_id"])
        return 0

    def cmd_result(self) -> int:
        res = self.session().result(self.a.cmd_id)
        if res is None:
            raise WaitTimeout("no result yet for %s" % self.a.cmd_id)
        self.print_json(res)
        return exit_code_of_status(str(res.get("status")))

    def cmd_output(self) -> int:
        if self.a.offset < 0 or self.a.length < 0:
            raise UsageError("--offset and --length must not be negative")
        s = self.session()
        name = s._resolve(self.a.cmd_id)
        data = s.output_bytes(name, self.a.offset, self.a.length or -1)
        if self.json:
            # The Go CLI's document (master output --json): resume_cursor is
            # where a next read starts; "complete" once the command has a result.
            doc: Dict[str, Any] = {"protocol_version": _names.PROTOCOL_VERSION, "text": data.decode("utf-8", "replace")}
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                doc["data_b64"] = base64.b64encode(data).decode("ascii")
            doc.update(cmd_id=_id_of(name), offset=self.a.offset,
                       resume_cursor=self.a.offset + len(data), complete=s.result(name) is not None)
            self.print_json(doc)
            return 0
        buf = getattr(self.out, "buffer", None)
        if buf is not None:
            self.out.flush()
            buf.write(data)
            buf.flush()
        else:
            self.out.write(data.decode("utf-8", "replace"))
        return 0

    def reply(self, reply: Any, done: str = "") -> int:
        """Print a control reply: the document with --json, else
        "<outcome>: <message>" (and done)."""
        if self.json:
            self.print_json(reply)
        else:
            self.out.write("%s: %s\n" % (reply.get("outcome"), reply.get("message", "")))
            if done:
                self.out.write(done + "\n")
        return 0

    def cmd_cancel(self) -> int:
        return self.reply(self.session().cancel(self.a.cmd_id, timeout=self.a.wait_timeout,
                                                wait_for_runner=self.a.wait_for_runner))

    def cmd_send(self) -> int:
        a = self.a
        if a.text is not None and a.file is not None:
            raise UsageError("give TEXT or --file, not both")
        if a.text is not None:
            data = a.text.encode("utf-8") + (b"" if a.no_newline else b"\n")
        elif a.file is None or a.file == "-":
            data = sys.stdin.buffer.read((1 << 20) + 1)
        else:
            try:
                data = _fs.read_user_bytes(a.file, (1 << 20) + 1)
            except OSError as e:
                raise UsageError("--file: %s" % e) from e
        reply = self.session().send(a.cmd_id, data, expect=a.expect, expect_timeout=a.expect_timeout if a.expect else None,
                                    expect_from=a.expect_from, secret=a.secret, timeout=a.wait_timeout,
                                    wait_for_runner=a.wait_for_runner)
        if self.json:
            self.print_json(reply)
        else:
            self.out.write("%s: %s (spool offset %s)\n" % (reply.get("outcome"), reply.get("message", ""),
                                                           reply.get("spool_offset")))
        return 0

    def cmd_signal(self) -> int:
        return self.reply(self.session().signal(self.a.cmd_id, self.a.sig, timeout=self.a.wait_timeout,
                                                wait_for_runner=self.a.wait_for_runner))

    def cmd_resize(self) -> int:
        return self.reply(self.session().resize(self.a.cols, self.a.rows, timeout=self.a.wait_timeout,
                                                wait_for_runner=self.a.wait_for_runner))

    def cmd_stop(self) -> int:
        reply = self.session().stop(force=self.a.force, wait=self.a.wait, timeout=self.a.wait_timeout,
                                    wait_for_runner=self.a.wait_for_runner)
        return self.reply(reply, "stopped" if self.a.wait else "")

    def cmd_status(self) -> int:
        if self.a.watch is not None:
            return self._watch_status()
        st = self.session().status()
        if self.json:
            self.print_json(st)
        else:
            self.out.write(_status.format_status(st))  # The Go CLI's lines (master status).
        return 0 if st["can_serve"] else 5

    def _watch_status(self) -> int:
        """status --watch, as the Go CLI's: the status every interval (JSON
        Lines with --json; on a terminal, redrawn in place) until
        interrupted, then exit 130 (143 for SIGTERM) with nothing more on
        stdout, so the JSON Lines stay whole."""
        every = self.a.watch
        if every <= 0:
            raise UsageError("--watch needs a positive interval")
        s = self.session()
        tty = not self.json and self.out.isatty()
        try:
            while True:
                try:
                    st = s.status()
                except MasterError as e:
                    if self.json:
                        self.out.write(json.dumps({"protocol_version": _names.PROTOCOL_VERSION,
                                                   "error": _error_json(e.code, str(e), e.context)}) + "\n")
                    else:
                        self.warn(str(e))
                else:
                    if self.json:
                        self.out.write(json.dumps(st, ensure_ascii=False) + "\n")
                    else:
                        self.out.write(("\x1b[H\x1b[2J" if tty else "") + _status.format_status(st) +
                                       "(every %s; Ctrl-C ends)\n" % _status.go_duration(int(every * 1e9)) +
                                       ("" if tty else "\n"))
                self.out.flush()
                time.sleep(every)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        except _Interrupted as e:
            return 128 + e.signum

    def cmd_lease(self) -> int:
        s = self.session()
        if not self.a.keep:
            lease = s.write_lease(self.a.ttl, "lease-" + _names.new_id())
            if self.json:
                self.print_json(lease)
            return 0
        keeper = s.keep_lease(self.a.ttl, on_error=lambda e: self.warn("renew lease: %s" % e))
        try:
            while True:
                time.sleep(3600)
        finally:
            keeper.stop()

    def cmd_waitfor(self) -> int:
        s = self.session()
        try:
            m = s.wait_for(self.a.regexp, self.a.from_, self.a.wait_timeout, self.a.wait_for_runner)
        except MasterError as e:
            cur = getattr(e, "resume_cursor", None)
            if self.json and cur is not None:
                # The Go CLI's document: no match fields, the error in it.
                self.print_json({"protocol_version": _names.PROTOCOL_VERSION, "matched": False, "resume_cursor": cur,
                                 "error": _error_json(e.code, str(e), e.context)})
                self.json = False  # One document: the error is in it.
            raise
        text = m.text.decode("utf-8", "replace")
        if self.json:
            self.print_json(dict(m.to_dict(), protocol_version=_names.PROTOCOL_VERSION))
        else:
            self.out.write("%d %s\n" % (m.resume_cursor, text.strip()))
        return 0

    def cmd_ready(self) -> int:
        if not self.a.session:
            raise UsageError("--session is required (or set SP_SESSION_DIR)")
        deadline = time.monotonic() + self.a.wait_timeout
        while True:  # The directory may not exist yet: the runner creates it.
            try:
                s = Session(self.a.session)
                break
            except MasterError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
        st = s.ready(max(0.0, deadline - time.monotonic()), wait_for_runner=self.a.wait_for_runner)
        if self.json:
            self.print_json(st)
        return 0


def main(argv: Optional[Sequence[str]] = None, out: Optional[TextIO] = None, err: Optional[TextIO] = None) -> int:
    """Run the command line; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args, extra = _parser().parse_known_args(words)
            # send CMD_ID --expect RE TEXT: argparse took CMD_ID and an
            # empty TEXT before the flag; the Go CLI takes flags anywhere.
            if getattr(args, "cmd", "") == "send" and args.text is None and len(extra) == 1 and \
                    not extra[0].startswith("-"):
                args.text, extra = extra[0], []
            if extra:
                raise _ArgError("unrecognized arguments: %s" % " ".join(extra), "%s %s" % (PROG, args.cmd))
    except SystemExit as e:  # argparse: --help or --version (0).
        return int(e.code or 0)
    except _ArgError as e:
        sub = e.prog[len(PROG):].strip()
        msg = "%s: %s" % (e.prog, e)
        err.write("%s: usage: %s (see '%s --help')\n" % (PROG, msg, e.prog))
        if "--json" in words:
            ctx = {"command": sub} if sub else None
            out.write(json.dumps({"protocol_version": _names.PROTOCOL_VERSION, "error": _error_json("usage", msg, ctx)},
                                 indent=2, ensure_ascii=False) + "\n")
        return 2
    cli = _CLI(args, out, err)
    old = None
    if argv is None:
        old = signal.signal(signal.SIGTERM, _on_term)
    try:
        return cli.run()
    except ResultError as e:
        if cli.json:
            cli.print_json(e.result)
        cli.warn(str(e))
        return e.exit_code
    except MasterError as e:
        reply = getattr(e, "reply", None)
        if reply is not None and cli.json:  # The reply says it all; no second document.
            cli.print_json(reply)
            cli.json = False
        ctx = e.context
        if e.code == "usage":  # Every usage error of the CLI names its subcommand, as the Go CLI's.
            ctx = dict(ctx or {})
            ctx.setdefault("command", args.cmd)
        return _fail(cli, e.code, str(e), e.exit_code, ctx)
    except KeyboardInterrupt:
        code = _fail(cli, "interrupted", "interrupted", EXIT_INTERRUPTED)
        cli.interrupted()
        return code
    except _Interrupted as e:
        code = _fail(cli, "interrupted", str(e), 128 + e.signum)
        cli.interrupted()
        return code
    except OSError as e:
        return _fail(cli, "io_error", str(e), 10)
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _error_json(code: str, message: str, context: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The "error" object of a --json document, as the Go CLI's errorJSON:
    code, message and the error's context when it has one."""
    err: Dict[str, Any] = {"code": code, "message": message}
    if context:
        err["context"] = context
    return err


def _fail(cli: _CLI, code: str, message: str, exit_code: int, context: Optional[Dict[str, Any]] = None) -> int:
    if cli.json:
        cli.print_json({"protocol_version": _names.PROTOCOL_VERSION, "error": _error_json(code, message, context)})
    cli.warn(message)
    return exit_code
