"""skillpilot-master (skillpilot.cli) against a fake runner."""

import io
import json
import os
import threading
import unittest
from typing import List, Tuple

from skillpilot import cli

from .fake_runner import FakeRunner, make_session


def run(*args: str) -> Tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


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
        self.assertEqual((doc["cmd_id"], doc["protocol_version"]), ("c1", 1))
        self.assertIn("no live runner", err)
        self.assertEqual(self.queued(), ["cmd_%010d_c1.json" % doc["seq"]])

    def test_exit_codes(self) -> None:
        code, out, _ = run("wait", "--session", self.dir, "--json", "nosuch")
        self.assertEqual(code, 6)
        self.assertEqual(json.loads(out)["error"]["code"], "unknown_cmd_id")
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

    def test_status_alive(self) -> None:
        self.runner()
        code, out, _ = run("status", "--session", self.dir, "--json")
        self.assertEqual(code, 0)
        self.assertTrue(json.loads(out)["alive"])

    def test_durations(self) -> None:
        for text, want in (("1.5", 1.5), ("250ms", 0.25), ("1m30s", 90.0), ("2h", 7200.0), ("10s", 10.0)):
            self.assertAlmostEqual(cli.duration(text), want)
        for bad in ("", "1x", "-1", "s"):
            with self.assertRaises(Exception):
                cli.duration(bad)


if __name__ == "__main__":
    unittest.main()
