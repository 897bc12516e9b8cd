"""skillpilot-master (skillpilot.cli) against a fake runner."""

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
from typing import List, Tuple

from skillpilot import cli
from skillpilot import Session

from .fake_runner import FakeRunner, make_session


def run(*args: str) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()



def proc_state(pid: int) -> str:
    """The state letter of process pid (/proc/PID/stat: R, S, D, ...)."""
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]

class CLITest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = make_session(self)
        old = os.environ.pop("SP_SESSION_DIR", None)
        if old is not None:
            self.addCleanup(os.environ.__setitem__, "SP_SESSION_DIR", old)

    def runner(self, **kw: object) -> FakeRunner:
        r = FakeRunner(self.dir, **kw)  # type: ignore[arg-type]
        self.addCleanup(r.close)
        return r

    def queued(self) -> List[str]:
        return sorted(n for n in os.listdir(os.path.join(self.dir, "queue")) if not n.startswith("."))

    def test_version_is_the_binaries(self) -> None:
        # One version everywhere: the release in
        # internal/version/VERSION, which the Go binaries embed.
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "..", "internal", "version", "VERSION")) as f:
            want = f.read().strip()
        out = io.StringIO()
        self.assertEqual(cli.main(["--version"], out=out, err=io.StringIO()), 0)
        self.assertTrue(out.getvalue().startswith("skillpilot-master (SkillPilot) %s," % want), out.getvalue())

    def test_failed_command_prints_output_and_why(self) -> None:
        r = self.runner()

        def finish() -> None:
            while not self.queued():
                pass
            r.finish(self.queued()[0], "error", b"partial\n", error={"code": "tool_error", "message": 'invalid command name "}"'})
        threading.Thread(target=finish).start()
        code, out, err = run("submit", "--session", self.dir, "--wait", "--wait-timeout", "30s", "bogus")
        self.assertEqual(code, 1)
        self.assertEqual(out, "partial\n")
        self.assertIn('invalid command name "}"', err)

    def test_ok_prints_output_then_value(self) -> None:
        r = self.runner()

        def finish() -> None:
            while not self.queued():
                pass
            r.finish(self.queued()[0], "ok", b"hi\n", value="42")
        threading.Thread(target=finish).start()
        code, out, _ = run("--session", self.dir, "submit", "--wait", "--wait-timeout", "30s", "puts hi; expr 42")
        self.assertEqual((code, out), (0, "hi\n42\n"))

    def test_submit_json_and_warning_without_runner(self) -> None:
        code, out, err = run("submit", "--session", self.dir, "--json", "--id", "c1", "puts x")
        self.assertEqual(code, 0)
        doc = json.loads(out)
        self.assertEqual((doc["cmd_id"], doc["protocol_version"], doc["resume_cursor"]), ("c1", 1, 0))
        self.assertIn("no live runner", err)
        self.assertEqual(self.queued(), ["cmd_%010d_c1.json" % doc["seq"]])

    def test_exit_codes(self) -> None:
        code, out, _ = run("wait", "--session", self.dir, "--json", "nosuch")
        self.assertEqual(code, 6)
        self.assertEqual(json.loads(out)["error"]["code"], "unknown_cmd_id")
        self.assertEqual(json.loads(out)["error"]["context"], {"cmd_id": "nosuch"})  # PROTOCOL.md section 19
        self.assertEqual(run("status", "--session", self.dir)[0], 5)
        code, _, err = run("stop", "--session", self.dir)
        self.assertEqual(code, 5)
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "ctl"))), ["ack"])
        self.assertEqual(run("status", "--session", os.path.join(self.dir, "nope"))[0], 5)
        self.assertEqual(run("submit")[0], 2)
        self.assertEqual(run("submit", "--timeout", "soon", "--session", self.dir, "x")[0], 2)
        run("submit", "--session", self.dir, "--id", "w", "x")
        code, _, err = run("wait", "--session", self.dir, "--wait-for-runner", "0.2", "w")
        self.assertEqual(code, 5)
        self.assertIn("not alive", err)

    def test_wait_on_a_stopped_runner_and_withdraw(self) -> None:
        # A wait on a runner stopped on purpose, as the Go CLI (testscript wait_no_runner.txtar).
        self.runner().stop_runner(reason="a stop request")
        code, out, err = run("submit", "--session", self.dir, "--id", "w1", "--wait", "--wait-timeout", "20s",
                             "--wait-for-runner", "2m", "puts once")
        self.assertEqual((code, out), (5, ""))
        self.assertIn("waiting for w1: runner not alive: the runner stopped (a stop request); w1 stays queued: "
                      "a runner started later runs it unless it is withdrawn\n", err)
        self.assertIn("to take w1 back: skillpilot-master withdraw w1 --session %s\n" % self.dir, err)
        code, out, err = run("wait", "--session", self.dir, "--json", "--wait-timeout", "20s",
                             "--wait-for-runner", "2m", "w1")
        self.assertEqual(code, 5)
        doc = json.loads(out)
        self.assertEqual((doc["error"]["code"], doc["error"]["context"]["cmd_id"]), ("runner_not_alive", "w1"))
        self.assertIn("withdraw w1", err)
        self.assertEqual(run("withdraw", "--session", self.dir, "w1")[:2], (0, "withdrawn: w1 (it will not run)\n"))
        self.assertEqual(self.queued(), [])
        code, out, _ = run("withdraw", "--session", self.dir, "--json", "w1")  # Not "unknown".
        self.assertEqual((code, json.loads(out)["error"]["code"]), (7, "already_withdrawn"))
        self.assertIn("w1 was withdrawn before", json.loads(out)["error"]["message"])
        run("submit", "--session", self.dir, "--id", "w2", "x")
        # The command file's name, as ls queue/ shows it, names it too.
        code, out, _ = run("withdraw", "--session", self.dir, "--json", "queue/" + self.queued()[0])
        self.assertEqual((code, json.loads(out)["withdrawn"], json.loads(out)["cmd_id"]), (0, True, "w2"))
        run("submit", "--session", self.dir, "--id", "w4", "x")
        reply = Session(self.dir).withdraw("w4")
        self.assertEqual((reply["protocol_version"], reply["cmd_id"], reply["withdrawn"]), (1, "w4", True))
        run("submit", "--session", self.dir, "--id", "w3", "x")
        name = self.queued()[0]
        os.rename(os.path.join(self.dir, "queue", name), os.path.join(self.dir, "inflight", name))
        code, out, err = run("withdraw", "--session", self.dir, "--json", "w3")
        self.assertEqual((code, json.loads(out)["error"]["code"]), (7, "not_queued"))
        self.assertIn("cancel it instead", err)

    def test_cancel_reports_the_reply(self) -> None:
        r = self.runner(answer=lambda req: {"outcome": "cancelled_queued", "message": "q cancelled"})
        code, out, _ = run("cancel", "--session", self.dir, "q")
        self.assertEqual((code, out), (0, "cancelled_queued: q cancelled\n"))
        r.answer = lambda req: {"outcome": "not_found", "message": "no such command"}
        code, out, err = run("cancel", "--session", self.dir, "--json", "x")
        self.assertEqual(code, 6)
        self.assertEqual(json.loads(out)["outcome"], "not_found")  # The reply, not an error document.
        self.assertIn("no such command", err)
        r.answer = lambda req: {"outcome": "idle", "message": "nothing runs"}
        self.assertEqual(run("cancel", "--session", self.dir)[0], 7)

    def test_send_signal_resize(self) -> None:
        r = self.runner(answer=lambda req: {"outcome": "delivered", "message": "2 bytes", "spool_offset": 7})
        code, out, _ = run("send", "--session", self.dir, "--expect", r"Overwrite\?", "q", "y")
        self.assertEqual((code, out), (0, "delivered: 2 bytes (spool offset 7)\n"))
        req = r.requests[-1]
        self.assertEqual((req["op"], req["cmd_id"], req["data_b64"], req["expect"], req["expect_timeout_ms"]),
                         ("send", "q", "eQo=", r"Overwrite\?", 30000))
        self.assertEqual(run("send", "--session", self.dir, "--no-newline", "--secret", "q", "pw")[0], 0)
        self.assertEqual((r.requests[-1]["data_b64"], r.requests[-1]["secret"]), ("cHc=", True))
        self.assertEqual(run("signal", "--session", self.dir, "q", "USR1")[0], 0)
        self.assertEqual(run("resize", "--session", self.dir, "100", "30")[0], 0)
        self.assertEqual((r.requests[-1]["cols"], r.requests[-1]["rows"]), (100, 30))
        for outcome, exit_code in (("not_running", 7), ("expect_timeout", 3), ("refused_echo", 10), ("stale", 5)):
            r.answer = lambda req, o=outcome: {"outcome": o, "message": o, "cmd_state": "queued"}
            code, out, _ = run("send", "--session", self.dir, "--json", "q", "y")
            self.assertEqual(code, exit_code, outcome)
            self.assertEqual(json.loads(out)["outcome"], outcome)  # The reply, not an error document.

    def test_output_lease_and_wait_timeout_json_are_the_go_clis_documents(self) -> None:
        # One document per --json call, the Go CLI's keys (master output
        # --json, master lease --json; wait_timeout's context, PROTOCOL.md 19).
        r = self.runner()
        code, out, _ = run("submit", "--session", self.dir, "--id", "o1", "puts abcdefghij")
        r.finish(self.queued()[0], "ok", b"abcdefghij\n")
        code, out, _ = run("output", "--session", self.dir, "--json", "--offset", "2", "--length", "3", "o1")
        self.assertEqual(code, 0)
        self.assertEqual(json.loads(out), {"protocol_version": 1, "cmd_id": "o1", "offset": 2, "resume_cursor": 5,
                                           "text": "cde", "complete": True})
        code, out, _ = run("submit", "--session", self.dir, "--id", "o2", "x")
        name = [n for n in self.queued() if n.endswith("_o2.json")][0]
        with open(os.path.join(self.dir, "output", name[:-5] + ".out"), "wb") as f:
            f.write(b"\xff\xfe")  # Not UTF-8, and no result yet.
        doc = json.loads(run("output", "--session", self.dir, "--json", "o2")[1])
        self.assertEqual((doc["data_b64"], doc["resume_cursor"], doc["complete"]), ("//4=", 2, False))
        self.assertEqual(run("output", "--session", self.dir, "--offset", "-1", "o2")[0], 2)
        code, out, _ = run("lease", "--session", self.dir, "--json", "--ttl", "1h")
        lease = json.loads(out)
        self.assertEqual((code, lease["ttl_ms"], lease["protocol_version"]), (0, 3600000, 1))
        with open(os.path.join(self.dir, "state", "lease.json")) as f:
            self.assertEqual(json.load(f), lease)
        code, out, _ = run("wait", "--session", self.dir, "--json", "--wait-timeout", "0.1", "o2")
        err = json.loads(out)["error"]
        self.assertEqual((code, err["code"], err["context"]), (3, "wait_timeout", {"cmd_id": "o2"}))

    def test_submit_correlation_and_ready_wait_for_runner(self) -> None:
        # The Go CLI's flags (docs/python.md: skillpilot-master has master's flags).
        self.runner()
        code, _, _ = run("submit", "--session", self.dir, "--id", "t1", "--trace-id", "F1", "--label", "step=syn",
                         "--label", "corner=ss", "puts x")
        self.assertEqual(code, 0)
        with open(os.path.join(self.dir, "queue", self.queued()[0])) as f:
            cmd = json.load(f)
        self.assertEqual((cmd["trace_id"], cmd["labels"]), ("F1", {"step": "syn", "corner": "ss"}))
        for bad in ("nokey", "=v"):
            code, out, _ = run("submit", "--session", self.dir, "--json", "--label", bad, "x")
            self.assertEqual((code, json.loads(out)["error"]["context"]), (2, {"field": "labels", "command": "submit"}))
        self.assertEqual(run("submit", "--session", self.dir, "--label", "a=1", "--label", "a=2", "x")[0], 2)
        self.assertEqual(run("ready", "--session", self.dir, "--wait-for-runner", "5s", "--wait-timeout", "30s")[0], 0)

    def test_interrupted_wait_says_what_goes_on_or_cancels(self) -> None:
        # Ctrl-C ends the wait, not the command: stderr says it is still
        # queued and how to cancel it; --cancel-on-interrupt cancels it.
        r = self.runner(answer=lambda req: {"outcome": "cancelled_queued", "message": "q was queued"})
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   PYTHONDONTWRITEBYTECODE="1")
        for n, (extra, want) in enumerate((([], "is still queued; skillpilot-master cancel i0 --session "),
                                           (["--cancel-on-interrupt"], "cancelled on interrupt: cancelled_queued: q was queued"))):
            cmd_id = "i%d" % n
            p = subprocess.Popen([sys.executable, "-m", "skillpilot", "submit", "--session", self.dir, "--wait",
                                  "--id", cmd_id] + extra + ["x"], env=env, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 60
            while not [q for q in self.queued() if q.endswith("_%s.json" % cmd_id)]:
                self.assertLess(time.monotonic(), deadline, "never queued")
                time.sleep(0.02)
            # Queued, and then asleep between two looks for its result: past
            # the submit, in the wait (a signal inside submit is no wait's).
            while proc_state(p.pid) != "S":
                self.assertLess(time.monotonic(), deadline, "never waited")
                time.sleep(0.005)
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 130, err)
            self.assertIn(want, err)
        self.assertEqual([q["cmd_id"] for q in r.requests], ["i1"])  # Only the second was cancelled.

    def test_status_watch_json_lines_until_interrupted(self) -> None:
        # status --watch --json: one JSON document per line until Ctrl-C,
        # exit 130, and nothing after the last line (as master status --watch).
        self.runner()
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.Popen([sys.executable, "-m", "skillpilot", "status", "--session", self.dir, "--watch", "50ms",
                              "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = [p.stdout.readline() for _ in range(2)]  # type: ignore[union-attr]
        p.send_signal(signal.SIGINT)
        rest, _ = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130)
        for line in lines + rest.splitlines():
            self.assertEqual(json.loads(line)["protocol_version"], 1, line)
        self.assertEqual(run("status", "--session", self.dir, "--watch", "0s")[0], 2)

    def test_status_alive(self) -> None:
        self.runner()
        code, out, _ = run("status", "--session", self.dir, "--json")
        self.assertEqual(code, 0)
        self.assertTrue(json.loads(out)["alive"])

    def test_argument_errors_are_json_with_json(self) -> None:
        # With --json anywhere, a command line argparse refuses is a JSON
        # error document on stdout naming the subcommand, as the Go CLI's.
        for args, command in ((["status", "--bogus", "--json"], "status"),
                              (["--json", "wait", "x", "--wait-timeout", "abc"], "wait"),
                              (["wait", "--json"], "wait")):
            code, out, err = run("--session", self.dir, *args)
            self.assertEqual(code, 2, args)
            doc = json.loads(out)
            self.assertEqual((doc["error"]["code"], doc["error"]["context"]["command"]), ("usage", command), args)
            self.assertIn("usage", err)
        code, out, _ = run("--session", self.dir, "status", "--bogus")
        self.assertEqual((code, out), (2, ""))

    def test_send_text_after_flags(self) -> None:
        # send CMD_ID --expect RE TEXT: flags may come before or after the
        # arguments, as in the Go CLI (argparse took an empty TEXT).
        from unittest import mock
        got = []
        with mock.patch.object(cli._CLI, "cmd_send", lambda c: got.append((c.a.cmd_id, c.a.text, c.a.expect)) or 0):
            self.assertEqual(run("--session", self.dir, "send", "c1", "--expect", "Name", "hello")[0], 0)
        self.assertEqual(got, [("c1", "hello", "Name")])
        code, out, err = run("--session", self.dir, "send", "c1", "--expect", "Name", "hello", "extra", "--json")
        self.assertEqual(code, 2)
        self.assertIn("unrecognized arguments: hello extra", json.loads(out)["error"]["message"])

    def test_submit_file_not_utf8(self) -> None:
        # A payload file with bytes that are not UTF-8 is queued with U+FFFD,
        # as the Go CLI and this CLI's stdin read it, not a traceback (exit 1).
        self.runner()
        bad = os.path.join(self.dir, "..", "bad.tcl")
        with open(bad, "wb") as f:
            f.write(b'puts "a\xffb"')
        code, out, err = run("--session", self.dir, "submit", "-f", bad, "--json")
        self.assertEqual(code, 0, err)
        name = [n for n in os.listdir(os.path.join(self.dir, "queue")) if n.startswith("cmd_")][0]
        with open(os.path.join(self.dir, "queue", name), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["payload"], 'puts "a\ufffdb"')

    def test_status_output_bytes_newer_of_two(self) -> None:
        # The count beside the last line is the newer (larger) of the
        # heartbeat's and state.json's, as the Go master's: a status right
        # after the command printed said "0 bytes" until the next beat.
        r = self.runner()
        r.phase = "busy"
        open(os.path.join(self.dir, "inflight", "cmd_0000000005_c1.json"), "w").close()
        for hb_bytes, state_bytes, want in ((0, 9, 9), (12, 9, 12)):
            r.hb_extra = {"current_cmd_id": "c1", "current_output_bytes": hb_bytes}
            r._beat()
            r._write_state(current_cmd_id="c1", current_seq=5, current_start_ts="2026-11-26T10:00:00.000Z",
                           current_last_line="sleeping", current_output_bytes=state_bytes)
            code, out, _ = run("status", "--session", self.dir, "--json")
            self.assertEqual(code, 0, out)
            self.assertEqual(json.loads(out)["current_output_bytes"], want)

    def test_status_layout_is_the_go_clis(self) -> None:
        # The lines of the Go CLI's master status (master/cli_status.go,
        # writeStatus), word for word, from the same files.
        r = self.runner()
        r.phase = "busy"
        r.hb_extra = {"timestamp": "2026-11-26T10:00:01.000Z", "current_cmd_id": "c1", "current_output_bytes": 2048}
        r._beat()
        r._write_state(tool_pid=4242, tool_starts=2, current_cmd_id="c1", current_start_ts="2026-11-26T10:00:00.000Z",
                       updated_at="2026-11-26T10:00:01.500Z", current_last_line="Overwrite? (y/n) ",
                       current_quiet_ms=250, commands_done=7, skipped_count=1, rejected_count=2)
        with open(os.path.join(self.dir, "state", "lease.json"), "w") as f:
            json.dump({"lease_id": "L1", "expires_at": "2026-11-26T10:01:01.000Z"}, f)
        for name in ("cmd_0000000005_c1.json", "cmd_0000000006_q.json"):
            open(os.path.join(self.dir, "queue" if name.endswith("q.json") else "inflight", name), "w").close()
        r.finish("cmd_0000000003_r1.json", stats={"duration_ms": 3})
        r.finish("cmd_0000000004_r2.json", "error", exit_reason="tool_error", stats={"duration_ms": 1234})
        code, out, _ = run("status", "--session", self.dir)
        self.assertEqual(code, 0)
        want = ("session   %s\n" % self.dir +
                "runner    alive (heartbeat counter moved), pid %d on fake\n" % os.getpid() +
                "phase     busy\n"
                "tool      tcl, started 2 times, pid 4242 (restarted: what earlier starts of the tool held is gone)\n"
                "running   c1 for 1.5s, 2.0 KiB of output, quiet 250ms at: \"Overwrite? (y/n) \"\n"
                "queue     1 waiting\n"
                "lease     L1: 1m0s left\n"
                "done      7 commands since the runner started (not counting 1 skipped as already done, 2 rejected as invalid)\n"
                "last      error (tool_error)                     1.2s  r2\n"
                "          ok                                      3ms  r1\n")
        self.assertEqual(out, want)
        # A runner killed while busy: its last state.json is shown as such,
        # not as the present (the Go CLI's words).
        r.kill()
        code, out, _ = run("status", "--session", self.dir)
        self.assertEqual(code, 5)
        self.assertIn("phase     busy  (as last written: the runner is not alive)\n", out)
        self.assertIn("running   c1 when the runner was last seen; a runner started later ends it (runner_restarted)\n",
                      out)
        # A stopped runner: exit 5, and the words of the Go CLI.
        r.stop_runner(reason="stop requested")
        os.unlink(os.path.join(self.dir, "state", "lease.json"))
        code, out, _ = run("status", "--session", self.dir)
        self.assertEqual(code, 5)
        self.assertIn("runner    NOT ALIVE (the runner stopped (stop requested)), pid %d on fake\n" % os.getpid(), out)
        self.assertIn("phase     stopped: stop requested\n", out)
        self.assertIn("lease     none (the runner runs until stopped)\n", out)

    def test_go_durations(self) -> None:
        from skillpilot import _status
        for ns, want in ((0, "0s"), (1500, "1.5µs"), (450000000, "450ms"), (1500000000, "1.5s"),
                         (90 * 10**9, "1m30s"), (3600 * 10**9, "1h0m0s"), (-2 * 10**9, "-2s"), (999, "999ns")):
            self.assertEqual(_status.go_duration(ns), want)
        self.assertEqual(_status.round_dur(1449999999), "1.4s")
        self.assertEqual(_status.round_dur(1450000000), "1.5s")  # Halves away from zero, as Go's Round.
        self.assertEqual(_status.round_dur(61499999999), "1m1s")

    def test_durations(self) -> None:
        for text, want in (("1.5", 1.5), ("250ms", 0.25), ("1m30s", 90.0), ("2h", 7200.0), ("10s", 10.0)):
            self.assertAlmostEqual(cli.duration(text), want)
        for bad in ("", "1x", "-1", "s"):
            with self.assertRaises(Exception):
                cli.duration(bad)


if __name__ == "__main__":
    unittest.main()


class StatusTextTest(unittest.TestCase):
    def test_busy_with_nothing_running_says_the_tool_restarts(self) -> None:
        # Right after a cancel that killed the tool, busy with
        # nothing running says why, as the Go CLI does.
        from skillpilot import _status
        busy = _status.format_status({"dir": "S", "alive": True, "phase": "busy", "tool_starts": 2})
        self.assertIn("running   " + _status.BUSY_NOTHING, busy)
        idle = _status.format_status({"dir": "S", "alive": True, "phase": "idle", "tool_starts": 2})
        self.assertIn("running   nothing\n", idle)
