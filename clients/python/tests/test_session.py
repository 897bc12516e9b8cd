"""The Python master's logic against a fake runner (tests/fake_runner.py)."""

import json
import os
import threading
import time
import unittest
from typing import Any, Dict, Optional

import skillpilot as sp
from skillpilot import _fs, _wait

from .fake_runner import FakeRunner, make_session


class Base(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = make_session(self)
        self.s = sp.Session(self.dir, poll=0.02)

    def runner(self, **kw: Any) -> FakeRunner:
        r = FakeRunner(self.dir, **kw)
        self.addCleanup(r.close)
        return r

    def ctl_files(self) -> "list[str]":
        return sorted(n for n in os.listdir(os.path.join(self.dir, "ctl")) if n != "ack")


class SubmitFindTest(Base):
    def test_submit_label_not_encodable_is_a_usage_error(self) -> None:
        # A lone surrogate in a label is UsageError (exit 2),
        # not UnicodeEncodeError, and nothing is queued.
        for labels in ({"k": "a\ud800"}, {"k": None}):
            with self.assertRaises(sp.UsageError) as cm:
                self.s.submit("x", labels=labels)  # type: ignore[dict-item]
            self.assertEqual(cm.exception.exit_code, 2)
        self.assertEqual(os.listdir(os.path.join(self.dir, "queue")), [])

    def test_submit_writes_a_valid_command(self) -> None:
        self.runner()
        cmd_id, name = self.s.submit("puts hi", timeout=5, cancel_policy="terminate_tool")
        with open(os.path.join(self.dir, "queue", name)) as f:
            cmd = json.load(f)
        self.assertEqual(name, "cmd_%010d_%s.json" % (cmd["seq"], cmd_id))
        self.assertEqual((cmd["cmd_id"], cmd["kind"], cmd["payload"], cmd["timeout_s"], cmd["cancel_policy"]),
                         (cmd_id, "tcl", "puts hi", 5, "terminate_tool"))
        self.assertEqual(os.stat(os.path.join(self.dir, "queue", name)).st_mode & 0o777, 0o660)

    def test_submit_sets_max_output_bytes(self) -> None:
        # Every master sets a command's output budget.
        self.runner()
        _, name = self.s.submit("puts hi", max_output_bytes=4096)
        with open(os.path.join(self.dir, "queue", name)) as f:
            self.assertEqual(json.load(f)["max_output_bytes"], 4096)
        _, name = self.s.submit("puts hi")
        with open(os.path.join(self.dir, "queue", name)) as f:
            self.assertNotIn("max_output_bytes", json.load(f))
        for bad in (-1, 1.5, True, "10"):
            with self.assertRaises(sp.UsageError):
                self.s.submit("puts hi", max_output_bytes=bad)

    def test_numbers_are_json_or_refused_before_anything_is_written(self) -> None:
        # Inf, nan, True and non-numbers never reach a file
        # (json.dumps would write Infinity, NaN, true); each is a UsageError
        # naming the option, and nothing is written, not even a seq.
        self.runner()
        _, name = self.s.submit("x", timeout=0.5, max_output_bytes=7)
        with open(os.path.join(self.dir, "queue", name)) as f:
            cmd = json.load(f)
        self.assertEqual((cmd["timeout_s"], cmd["max_output_bytes"]), (0.5, 7))
        seqs = sorted(os.listdir(os.path.join(self.dir, "seq")))
        inf, nan = float("inf"), float("nan")
        bad = [("timeout", dict(timeout=v)) for v in (inf, -inf, nan, True, "5", 1e400, -1)]
        bad += [("max_output_bytes", dict(max_output_bytes=v)) for v in (1.5, True, "16", 2 ** 63, -1, inf)]
        for what, kw in bad:
            with self.assertRaises(sp.UsageError) as cm:
                self.s.submit("x", **kw)  # type: ignore[arg-type]
            self.assertIn(what, str(cm.exception))
        calls = [lambda: self.s.resize(True, 24), lambda: self.s.resize(80.5, 24), lambda: self.s.resize(0, 24),
                 lambda: self.s.resize("80", 24), lambda: self.s.send("x", "y", expect="z", expect_timeout=inf),
                 lambda: self.s.send("x", "y", expect_from=1.5), lambda: self.s.send("x", "y", expect_from=True),
                 lambda: self.s.write_lease(inf), lambda: self.s.write_lease(True), lambda: self.s.write_lease(nan),
                 lambda: self.s.keep_lease(True), lambda: self.s.write_lease(0)]
        for call in calls:
            with self.assertRaises(sp.UsageError):
                call()
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "seq"))), seqs)
        self.assertEqual(self.ctl_files(), [])
        self.assertEqual(len(os.listdir(os.path.join(self.dir, "queue"))), 1)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "state", "lease.json")))

    def test_every_submit_door_takes_the_one_table_of_options(self) -> None:
        # A pool door has every option a session door has.
        import inspect
        from skillpilot import _command, pool
        for door, own in ((sp.Session.submit, ["self", "payload"]), (pool.pool_submit, ["pool_dir", "payload", "affinity"])):
            self.assertEqual(list(inspect.signature(door).parameters), own + list(_command.SUBMIT_OPTIONS), door)

    def test_kind_defaults_to_the_runners(self) -> None:
        r = self.runner()
        r._write_state(kind="sh")
        _, name = self.s.submit("echo hi")
        with open(os.path.join(self.dir, "queue", name)) as f:
            self.assertEqual(json.load(f)["kind"], "sh")

    def test_find_is_exact_not_suffix(self) -> None:
        a = self.s.submit("x", cmd_id="a_b")
        with self.assertRaises(sp.UnknownCmdID) as cm:
            self.s._find("b")
        self.assertEqual(cm.exception.exit_code, 6)
        b = self.s.submit("y", cmd_id="b")
        self.assertEqual(self.s._find("b"), b.name)
        self.assertEqual(self.s._find("a_b"), a.name)

    def test_bad_arguments_are_usage_errors(self) -> None:
        for kw in ({"cmd_id": "a/b"}, {"kind": "Perl 5"}, {"timeout": -1}, {"cancel_policy": "kill"}):
            with self.assertRaises(sp.UsageError) as cm:
                self.s.submit("x", **kw)
            self.assertEqual(cm.exception.exit_code, 2)
        self.assertEqual(os.listdir(os.path.join(self.dir, "queue")), [])


class WaitTest(Base):
    def test_result_statuses_map_to_exceptions(self) -> None:
        r = self.runner()
        for status, exc, code in (("error", sp.CommandFailed, 1), ("timeout", sp.CommandTimeout, 3),
                                  ("cancelled", sp.Cancelled, 4)):
            _, name = self.s.submit("x")
            r.finish(name, status, error={"code": "x", "message": "it broke }"})
            with self.assertRaises(exc) as cm:
                self.s.wait(name)
            self.assertEqual(cm.exception.exit_code, code)
            self.assertIn("it broke }", str(cm.exception))
            self.assertEqual(self.s.wait(name, check=False)["status"], status)

    def test_wait_sees_a_result_written_later(self) -> None:
        r = self.runner()
        _, name = self.s.submit("x")
        threading.Timer(0.2, r.finish, (name, "ok", b"out\n"), {"value": "42"}).start()
        res = self.s.wait(name, timeout=30)
        self.assertEqual((res["value"], self.s.output(res)), ("42", "out\n"))

    def test_wait_timeout(self) -> None:
        self.runner()
        _, name = self.s.submit("x")
        with self.assertRaises(sp.WaitTimeout) as cm:
            self.s.wait(name, timeout=0.1)
        self.assertEqual(cm.exception.exit_code, 3)

    def test_dead_runner_ends_the_wait(self) -> None:
        r = self.runner()
        _, name = self.s.submit("x")
        threading.Timer(0.2, r.kill).start()
        with self.assertRaises(sp.RunnerNotAlive) as cm:
            self.s.wait(name, wait_for_runner=0.3)
        self.assertEqual(cm.exception.exit_code, 5)
        self.assertIn("lock is free", str(cm.exception))

    def test_hung_runner_ends_the_wait_by_the_counter(self) -> None:
        r = self.runner()
        _, name = self.s.submit("x")
        r.hang()
        with self.assertRaises(sp.RunnerNotAlive) as cm:
            self.s.wait(name, wait_for_runner=1)
        self.assertIn("has not moved", str(cm.exception))

    def test_no_runner_at_all(self) -> None:
        _, name = self.s.submit("x")
        with self.assertRaisesRegex(sp.RunnerNotAlive, "no runner has written state"):
            self.s.wait(name, wait_for_runner=0.2)

    def test_a_live_runner_keeps_the_wait_going_past_the_grace(self) -> None:
        # A 0.5 s heartbeat makes the grace 1.25 s, so a stall of this
        # process shorter than that is not a dead runner; the result comes
        # well after the grace.
        r = self.runner(interval=0.5)
        _, name = self.s.submit("x")
        threading.Timer(3.0, r.finish, (name,)).start()
        self.assertEqual(self.s.wait(name, wait_for_runner=0.3)["status"], "ok")

    def test_waiting_for_a_runner_that_starts_later(self) -> None:
        _, name = self.s.submit("x")

        def late() -> None:
            self.runner().finish(name)
        threading.Timer(0.5, late).start()
        self.assertEqual(self.s.wait(name, wait_for_runner=30)["status"], "ok")


class StoppedRunnerTest(Base):
    """A runner that stopped on purpose
    (phase stopped, its lock free) ends a wait within about a second, not
    after wait_for_runner; the error says the command stays queued;
    ready() keeps the whole grace; withdraw() takes the command back."""

    def test_a_wait_on_a_stopped_runner_ends_early_and_says_the_command_stays_queued(self) -> None:
        self.runner().stop_runner(reason="a stop request")
        _, name = self.s.submit("x", cmd_id="q1")
        # The wait's own timeout (20 s) is far under the grace (120 s): a
        # wait that waited out the grace would end with WaitTimeout.
        with self.assertRaises(sp.RunnerNotAlive) as cm:
            self.s.wait("q1", timeout=20, wait_for_runner=120)
        msg = str(cm.exception)
        self.assertIn("the runner stopped (a stop request)", msg)
        self.assertIn("q1 stays queued: a runner started later runs it unless it is withdrawn", msg)
        self.assertNotIn("no live runner seen", msg)
        self.assertEqual(cm.exception.context["cmd_id"], "q1")
        self.assertEqual(cm.exception.context["grace_ms"], 120000)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "queue", name)))
        with self.assertRaises(sp.RunnerNotAlive):  # Waits for output and replies end early too.
            self.s.wait_for("never", timeout=20, wait_for_runner=120)

    def test_a_finished_command_does_not_say_it_stays_queued(self) -> None:
        r = self.runner()
        _, name = self.s.submit("x", cmd_id="q2")
        os.rename(os.path.join(self.dir, "queue", name), os.path.join(self.dir, "inflight", name))
        r.stop_runner()
        with self.assertRaises(sp.RunnerNotAlive) as cm:
            self.s.wait("q2", timeout=20, wait_for_runner=120)
        self.assertNotIn("stays queued", str(cm.exception))
        self.assertEqual(cm.exception.context["cmd_id"], "q2")

    def test_stopped_with_the_lock_held_waits_out_the_grace(self) -> None:
        # Phase stopped while a runner holds the lock: not stopped on
        # purpose for good (a runner starting on the session), so the grace.
        r = self.runner()
        r.hang()
        r._write_state(phase="stopped")
        self.s.submit("x", cmd_id="q3")
        with self.assertRaises(sp.RunnerNotAlive) as cm:
            self.s.wait("q3", timeout=20, wait_for_runner=1.5)
        self.assertIn("no live runner seen", str(cm.exception))

    def test_ready_keeps_the_whole_grace(self) -> None:
        self.runner().stop_runner()

        def restart() -> None:
            self.runner()
        threading.Timer(2 * _wait.STOPPED_GRACE, restart).start()  # Setup: after a stopped wait would have ended.
        self.assertTrue(self.s.ready(timeout=30, wait_for_runner=30)["alive"])

    def test_withdraw(self) -> None:
        r = self.runner()
        _, queued = self.s.submit("x", cmd_id="w1")
        self.s.withdraw("w1")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "queue", queued)))
        with self.assertRaises(sp.AlreadyWithdrawn) as cm:  # Not "unknown".
            self.s.withdraw("w1")
        self.assertEqual((cm.exception.exit_code, cm.exception.code, cm.exception.context),
                         (7, "already_withdrawn", {"cmd_id": "w1"}))
        with self.assertRaises(sp.UnknownCmdID):
            self.s.wait("w1")
        _, running = self.s.submit("y", cmd_id="w2")
        os.rename(os.path.join(self.dir, "queue", running), os.path.join(self.dir, "inflight", running))
        with self.assertRaises(sp.NotQueued) as nq:
            self.s.withdraw("w2")
        self.assertEqual((nq.exception.code, nq.exception.exit_code), ("not_queued", 7))
        self.assertIn("w2 is running (a runner claimed it); cancel it instead", str(nq.exception))
        self.assertEqual(nq.exception.context, {"cmd_id": "w2"})
        r.finish(running)
        os.unlink(os.path.join(self.dir, "inflight", running))
        with self.assertRaises(sp.AlreadyFinished) as af:
            self.s.withdraw("w2")
        self.assertEqual((af.exception.code, af.exception.exit_code), ("already_finished", 7))
        self.assertIn("w2 has its result (ok); nothing to withdraw", str(af.exception))

    def test_withdraw_loses_to_a_claim(self) -> None:
        # The runner claims (renames) the entry between the lookup and the
        # unlink: the unlink fails, the command is running, nothing lost.
        _, name = self.s.submit("x", cmd_id="w3")
        real = _fs.SessionFS.claim

        def claimed_first(fs: Any, sub: str, n: str, to_sub: str, to: str) -> bool:
            os.rename(os.path.join(self.dir, "queue", name), os.path.join(self.dir, "inflight", name))
            return real(fs, sub, n, to_sub, to)
        self.addCleanup(setattr, _fs.SessionFS, "claim", real)
        _fs.SessionFS.claim = claimed_first  # type: ignore[method-assign]
        with self.assertRaises(sp.NotQueued):
            self.s.withdraw("w3")
        self.assertTrue(os.path.exists(os.path.join(self.dir, "inflight", name)))

    def queued(self) -> "list[str]":
        return sorted(n for n in os.listdir(os.path.join(self.dir, "queue")) if not n.startswith("."))

    def test_withdraw_names(self) -> None:
        # A command file's name, or a path ending in one, is
        # exactly that file, even when another has the same cmd_id; a
        # cmd_id the one with the lowest seq. A second withdraw by any form
        # is AlreadyWithdrawn (31.10); anything else a UsageError.
        names = [self.s.submit("x", cmd_id="dup")[1] for _ in range(3)]
        reply = self.s.withdraw(names[2])
        self.assertEqual(reply, {"protocol_version": 1, "cmd_id": "dup", "withdrawn": True, "name": names[2]})
        self.assertEqual(self.queued(), names[:2])
        self.assertEqual(self.s.withdraw("queue/" + names[1])["name"], names[1])
        self.assertEqual(self.s.withdraw("dup")["name"], names[0])
        self.assertEqual(self.queued(), [])
        for ref in ["dup", names[0], "queue/" + names[2], os.path.join(self.dir, "queue", names[1])]:
            with self.assertRaises(sp.AlreadyWithdrawn, msg=ref):
                self.s.withdraw(ref)
        with self.assertRaises(sp.UnknownCmdID):
            self.s.withdraw("cmd_9_nothing.json")
        for ref in ["queue/not-a-command", "a b", "", "queue/cmd_x_y.json"]:
            with self.assertRaises(sp.UsageError, msg=ref):
                self.s.withdraw(ref)

    def test_withdraw_follows_forward(self) -> None:
        # A command a pool moved (forward/) is withdrawn where it
        # went, before the mover published it (its staged copy) and after;
        # while a mover holds it (moved/, no forward yet) withdraw waits for
        # the record rather than answer "unknown".
        pool = os.path.dirname(self.dir)
        os.makedirs(os.path.join(pool, "s01", "queue"))
        os.makedirs(os.path.join(self.dir, "forward"))
        os.makedirs(os.path.join(self.dir, "moved"))

        def moved(seq: int, cmd_id: str, to_seq: int, staged: bool) -> str:
            name, to = "cmd_%d_%s.json" % (seq, cmd_id), "cmd_%d_%s.json" % (to_seq, cmd_id)
            with open(os.path.join(pool, "s01", "queue", (".mv_" + to) if staged else to), "w") as f:
                f.write("{}")
            # As a mover does (PROTOCOL.md 18.4 step 3): the record appears
            # complete, a hard link of a written temp file, never half-written.
            tmp = os.path.join(self.dir, "forward", ".tmp_" + name)
            with open(tmp, "w") as f:
                json.dump({"protocol_version": 1, "cmd_id": cmd_id, "seq": seq, "to_session": "../s01", "to_name": to,
                           "stage": ".mv_" + to, "reason": "test", "moved_at": "2026-01-01T00:00:00Z", "mover": "t"}, f)
            os.link(tmp, os.path.join(self.dir, "forward", name))
            os.unlink(tmp)
            return name
        moved(5, "published", 7, False)
        moved(6, "staged", 8, True)
        self.assertEqual(self.s.withdraw("published"),
                         {"protocol_version": 1, "cmd_id": "published", "withdrawn": True, "name": "cmd_7_published.json",
                          "session": os.path.join(pool, "s01")})
        self.assertEqual(self.s.withdraw("cmd_6_staged.json")["name"], "cmd_8_staged.json")
        self.assertEqual(sorted(os.listdir(os.path.join(pool, "s01", "queue"))), [])
        self.assertEqual(sorted(os.listdir(os.path.join(pool, "s01", "withdrawn"))),
                         ["cmd_7_published.json", "cmd_8_staged.json"])
        with self.assertRaises(sp.AlreadyWithdrawn):
            self.s.withdraw("published")
        # Mid-move: claimed into moved/, the forward record comes later.
        with open(os.path.join(self.dir, "moved", "cmd_9_mid.json"), "w") as f:
            f.write("{}")
        threading.Timer(0.3, lambda: (moved(9, "mid", 10, False),
                                      os.unlink(os.path.join(self.dir, "moved", "cmd_9_mid.json")))).start()
        self.assertEqual(self.s.withdraw("mid")["name"], "cmd_10_mid.json")


def answer_with(outcome: str) -> Any:
    return lambda req: {"outcome": outcome, "cmd_id": req.get("cmd_id")}


class SymlinkedDirTest(Base):
    """A session directory swapped for a symlink to a directory outside the
    session (PROTOCOL.md section 21): the master neither writes nor reads
    through it and reports io_error."""

    def swap(self, sub: str) -> str:
        outside = os.path.join(os.path.dirname(self.dir), "outside-" + sub.replace("/", "-"))
        os.mkdir(outside)
        real = os.path.join(self.dir, sub)
        for n in os.listdir(real):
            os.rename(os.path.join(real, n), os.path.join(outside, n))
        os.rmdir(real)
        os.symlink(outside, real)
        return outside

    def test_symlinked_queue_is_never_written_through(self) -> None:
        self.runner()
        outside = self.swap("queue")
        with self.assertRaises(sp.MasterError) as cm:
            self.s.submit("puts hi")
        self.assertEqual(cm.exception.code, "io_error")
        self.assertIn("symlink", str(cm.exception))
        self.assertEqual(os.listdir(outside), [])

    def test_symlinked_result_is_never_read_through(self) -> None:
        r = self.runner()
        cmd_id, name = self.s.submit("x")
        outside = self.swap("result")
        r.finish(name, "ok", b"out\n")  # The fake runner writes through the link: a planted result.
        self.assertEqual(os.listdir(outside), [name])
        for call in (lambda: self.s.result(name), lambda: self.s.wait(name, timeout=5)):
            with self.assertRaises(sp.MasterError) as cm:
                call()
            self.assertEqual(cm.exception.code, "io_error")
            self.assertIn("symlink", str(cm.exception))

    def test_symlinked_state_and_ctl_are_never_written_through(self) -> None:
        r = self.runner()
        out_ctl = self.swap("ctl")
        before = sorted(os.listdir(out_ctl))
        with self.assertRaises(sp.MasterError) as cm:
            self.s.cancel(timeout=5)
        self.assertEqual(cm.exception.code, "io_error")
        self.assertEqual(sorted(os.listdir(out_ctl)), before)
        r.close()  # Its heartbeat thread writes into state/.
        out_state = self.swap("state")
        before = sorted(os.listdir(out_state))
        with self.assertRaises(sp.MasterError) as cm:
            self.s.write_lease(30)
        self.assertEqual(cm.exception.code, "io_error")
        self.assertEqual(sorted(os.listdir(out_state)), before)


class CancelTest(Base):
    def test_request_file_and_reply(self) -> None:
        r = self.runner(answer=answer_with("cancelled_queued"))
        reply = self.s.cancel("abc")
        self.assertEqual(reply["outcome"], "cancelled_queued")
        req = r.requests[0]
        self.assertEqual((req["op"], req["scope"], req["cmd_id"], req["session_id"]),
                         ("cancel", "cmd_id", "abc", r.session_id))
        self.assertRegex(req["req_id"], r"^[0-9a-f-]{36}$")
        r.settled()
        self.assertEqual(self.ctl_files(), [], "the request was not consumed")
        self.s.cancel()
        self.assertEqual(r.requests[1]["scope"], "current")
        self.assertNotIn("cmd_id", r.requests[1])
        self.assertGreater(r.requests[1]["seq"], req["seq"])

    def test_outcomes(self) -> None:
        cases: Dict[str, Optional[type]] = {
            "cancelled_running": None, "cancelled_queued": None, "not_found": sp.UnknownCmdID,
            "already_finished": sp.AlreadyFinished, "idle": sp.Idle, "stale": sp.StaleRequest,
            "rejected": sp.RequestRejected}
        codes = {"not_found": 6, "already_finished": 7, "idle": 7, "stale": 5, "rejected": 10}
        for outcome, exc in cases.items():
            with self.subTest(outcome=outcome):
                r = FakeRunner(self.dir, answer=answer_with(outcome))
                try:
                    if exc is None:
                        self.assertEqual(self.s.cancel("x")["outcome"], outcome)
                    else:
                        with self.assertRaises(exc) as cm:
                            self.s.cancel("x")
                        self.assertEqual(cm.exception.exit_code, codes[outcome])
                finally:
                    r.close()

    def test_unanswered_request_and_dead_runner(self) -> None:
        r = self.runner(answer=lambda req: None)
        threading.Timer(0.2, r.kill).start()
        with self.assertRaises(sp.RunnerNotAlive):
            self.s.cancel("x", wait_for_runner=0.3)

    def test_a_late_heartbeat_is_not_a_dead_runner(self) -> None:
        # PROTOCOL.md section 8, "Giving up": a request, like a wait, gives
        # up only once no live runner has been seen for the grace; a counter
        # late by more than the window (a loaded NFS client) is not enough.
        r = self.runner(answer=answer_with("cancelled_running"))
        r.hang()
        time.sleep(_wait.window_of({"interval_ms": 50}) + 0.1)
        threading.Timer(0.5, setattr, (r, "beating", True)).start()
        self.assertEqual(self.s.cancel("x", wait_for_runner=5)["outcome"], "cancelled_running")

    def test_a_hung_runner_is_given_up_after_the_grace(self) -> None:
        r = self.runner(answer=answer_with("cancelled_running"))
        r.hang()
        # Past the window, the heartbeat file is stale by the filesystem's
        # clock too: no request is written (a fresh one is written at once,
        # then withdrawn when no reply comes: the next test).
        time.sleep(_wait.window_of({"interval_ms": 50}) + 0.1)
        t0 = time.monotonic()
        with self.assertRaisesRegex(sp.RunnerNotAlive, "nothing was written") as cm:
            self.s.cancel("x", wait_for_runner=1)
        self.assertGreaterEqual(time.monotonic() - t0, 1.0, "gave up before the grace")
        self.assertEqual(cm.exception.exit_code, 5)
        self.assertEqual(self.ctl_files(), [])

    def test_a_runner_hung_just_now_gets_the_request_then_it_is_withdrawn(self) -> None:
        # A heartbeat written within the window by the filesystem's clock is
        # a live runner at once (PROTOCOL.md section 19, "Control
        # requests"): the request is written, and withdrawn when no reply
        # comes within the grace.
        r = self.runner(answer=lambda req: None)
        r.hang()
        with self.assertRaises(sp.RunnerNotAlive) as cm:
            self.s.cancel("x", wait_for_runner=1)
        self.assertEqual(cm.exception.exit_code, 5)
        self.assertEqual(self.ctl_files(), [])

    def test_grace(self) -> None:
        self.assertEqual(_wait.grace_of(None), 10.0)
        self.assertEqual(_wait.grace_of(None, 5.0), 50.0)
        self.assertEqual(_wait.grace_of(3.0, 1.0), 3.0)
        self.assertEqual(_wait.grace_of(1.0, 1.0), 2.25)
        self.assertEqual(_wait.grace_of(0.3, 0.05), 0.45)

    def test_reply_timeout(self) -> None:
        self.runner(answer=lambda req: None)
        with self.assertRaises(sp.WaitTimeout):
            self.s.cancel("x", timeout=0.2)


class SendTest(Base):
    def test_request_fields(self) -> None:
        r = self.runner(answer=answer_with("delivered"))
        self.s.send("abc", "y\n", expect=r"Overwrite\? ", expect_timeout=2.5, expect_from=7)
        self.s.send("abc", b"pw\n", secret=True)
        self.s.signal("abc", "sigusr1")
        self.s.resize(132, 43)
        a, b, c, d = r.requests
        self.assertEqual((a["op"], a["cmd_id"], a["data_b64"], a["expect"], a["expect_timeout_ms"], a["expect_from"]),
                         ("send", "abc", "eQo=", r"Overwrite\? ", 2500, 7))
        self.assertNotIn("secret", a)
        self.assertEqual((b["secret"], b["data_b64"]), (True, "cHcK"))
        self.assertNotIn("expect", b)
        self.assertEqual((c["op"], c["signal"]), ("signal", "USR1"))
        self.assertEqual((d["op"], d["cols"], d["rows"]), ("resize", 132, 43))
        r.settled()
        self.assertEqual(self.ctl_files(), [])

    def test_outcomes(self) -> None:
        cases = {"not_running": (sp.NotRunning, "not_running", 7), "expect_timeout": (sp.ExpectTimeout, "expect_timeout", 3),
                 "refused_echo": (sp.RefusedEcho, "refused_echo", 10), "stale": (sp.StaleRequest, "stale", 5),
                 "rejected": (sp.RequestRejected, "rejected", 10)}
        for outcome, (exc, code, exit_code) in cases.items():
            with self.subTest(outcome=outcome):
                r = FakeRunner(self.dir, answer=answer_with(outcome))
                try:
                    with self.assertRaises(exc) as cm:
                        self.s.send("x", "y\n")
                    self.assertEqual((cm.exception.code, cm.exception.exit_code), (code, exit_code))
                    self.assertEqual(cm.exception.reply["outcome"], outcome)  # type: ignore[attr-defined]
                finally:
                    r.close()

    def test_usage(self) -> None:
        for call in (lambda: self.s.signal("x", "STOP"), lambda: self.s.resize(0, 10),
                     lambda: self.s.send("x", b"a" * ((1 << 20) + 1)), lambda: self.s.send("bad id", "y")):
            with self.assertRaises(sp.UsageError):
                call()
        self.assertEqual(self.ctl_files(), [], "a usage error wrote a request")


class StopTest(Base):
    def test_no_live_runner_raises_and_writes_nothing(self) -> None:
        for how in ("never", "stopped", "killed"):
            with self.subTest(how=how):
                if how != "never":
                    r = FakeRunner(self.dir)
                    r.stop_runner() if how == "stopped" else r.kill()
                    r.close()
                t0 = time.monotonic()
                with self.assertRaises(sp.RunnerNotAlive) as cm:
                    self.s.stop(wait=True)
                self.assertEqual(cm.exception.exit_code, 5)
                self.assertEqual(self.ctl_files(), [])
                self.assertLess(time.monotonic() - t0, 30)

    def test_stop_wait_returns_when_stopped(self) -> None:
        r = self.runner()
        reply = self.s.stop(force=True, wait=True, timeout=30)
        self.assertEqual(reply["outcome"], "accepted")
        self.assertEqual(r.requests[0]["mode"], "force")
        self.assertEqual(r.requests[0]["session_id"], r.session_id)

    def test_stop_wait_ends_when_the_runner_dies_without_saying_so(self) -> None:
        def accept_then_hang(req: Dict[str, Any]) -> Dict[str, Any]:
            r.hang()
            return {"outcome": "accepted", "_stays": True}
        r = self.runner(answer=accept_then_hang)
        self.s.network = True  # Only the counter can tell.
        self.assertEqual(self.s.stop(wait=True)["outcome"], "accepted")

    def test_stop_wait_timeout(self) -> None:
        self.runner(answer=lambda req: {"outcome": "accepted", "_stays": True})
        with self.assertRaises(sp.WaitTimeout):
            self.s.stop(wait=True, timeout=0.3)


class CannotServeTest(Base):
    def test_ready_times_out_on_phase_error(self) -> None:
        r = self.runner()
        r.phase = "error"
        r._write_state(reason="init failed: boom")
        with self.assertRaisesRegex(sp.CannotServe, "boom") as cm:
            self.s.ready(0.5)
        self.assertEqual(cm.exception.exit_code, 5)
        st = self.s.status()
        self.assertTrue(st["alive"])
        self.assertFalse(st["can_serve"])


class StatusTest(Base):
    def test_alive_and_not(self) -> None:
        r = self.runner()
        st = self.s.status()
        self.assertTrue(st["alive"], st)
        self.assertEqual((st["phase"], st["session_id"], st["protocol_version"]), ("idle", r.session_id, 1))
        r.hang()
        # A beat between the first status and the hang moves the counter
        # once more: look once after the hang, then wait out the window.
        self.s.status()
        time.sleep(_wait.window_of({"interval_ms": 50}) + 0.1)
        st = self.s.status()
        self.assertFalse(st["alive"], st)
        r.kill()
        self.assertEqual(self.s.status()["alive_reason"], "the runner's lock is free")

    def test_stopped_with_a_reason(self) -> None:
        r = self.runner()
        r.stop_runner(reason="gave up after 5 failed starts", error={"code": "tool_start_failed", "message": "init"})
        st = self.s.status()
        self.assertFalse(st["alive"])
        self.assertIn("gave up", st["alive_reason"])
        with self.assertRaisesRegex(sp.RunnerNotAlive, "gave up"):
            self.s.ready(30, wait_for_runner=0.2)

    def test_network_rule_ignores_the_lock(self) -> None:
        r = self.runner()
        self.s.network = True
        r.kill()  # Lock free, but on NFS that proves nothing: the counter decides.
        st = self.s.status()
        self.assertFalse(st["alive"])
        self.assertRegex(st["alive_reason"], "not move")


class CounterTest(Base):
    def test_a_new_runner_at_the_old_counter_is_not_taken_for_the_old_one(self) -> None:
        from .fake_runner import write_json
        self.s.network = True
        hb = os.path.join(self.dir, "state", "heartbeat.json")
        write_json(hb, {"session_id": "old", "counter": 5, "interval_ms": 50})
        self.assertFalse(self.s._observe_liveness().alive)
        time.sleep(_wait.window_of({"interval_ms": 50}) + 0.05)
        look = self.s._observe_liveness()
        self.assertTrue(look.late and not look.definite and not look.alive, look)
        write_json(hb, {"session_id": "new", "counter": 5, "interval_ms": 50})
        self.assertTrue(self.s._observe_liveness().alive, "a new runner's heartbeat was taken for the old one's")


class LeaseTest(Base):
    def test_keep_lease_renews_and_reports_errors(self) -> None:
        errors: "list[BaseException]" = []
        k = self.s.keep_lease(0.15, on_error=errors.append)
        path = os.path.join(self.dir, "state", "lease.json")
        with open(path) as f:
            first = json.load(f)
        self.assertEqual(first["ttl_ms"], 150)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(path) as f:
                if json.load(f)["counter"] != first["counter"]:
                    break
            time.sleep(0.01)
        else:
            self.fail("lease never renewed")
        os.rename(os.path.join(self.dir, "state"), os.path.join(self.dir, "state.gone"))
        while not errors and time.monotonic() < deadline:
            time.sleep(0.01)
        k.stop()
        self.assertTrue(errors, "a failed renewal was swallowed")
        self.assertIsInstance(errors[0], sp.MasterError)
        with self.assertRaises(sp.MasterError):
            k.check()


class WatchTest(Base):
    def test_a_rename_wakes_the_watch(self) -> None:
        from skillpilot import _watch
        d = os.path.join(self.dir, "result")
        try:
            w = _watch.DirWatch(d)
        except OSError as e:
            self.skipTest("no inotify here: %s" % e)
        self.addCleanup(w.close)
        w.drain()
        src = os.path.join(self.dir, "tmp", "r.json")
        with open(src, "w") as f:
            f.write("{}")
        threading.Timer(0.1, os.rename, (src, os.path.join(d, "r.json"))).start()
        t0 = time.monotonic()
        w.sleep(30.0)
        self.assertLess(time.monotonic() - t0, 10.0)  # Woken by the rename, not the 30 s.

    def test_waits_share_one_watch_and_close_releases_it(self) -> None:
        r = self.runner()
        s = sp.Session(self.dir, poll=5.0)
        seen = set()
        for _ in range(3):
            _, name = s.submit("x")
            threading.Timer(0.3, r.finish, (name,)).start()
            self.assertEqual(s.wait(name)["status"], "ok")
            seen.add(id(s._result_watch))
        self.assertEqual(len(seen), 1)
        w = s._result_watch
        if w is None:
            self.skipTest("no inotify here")
        s.close()
        self.assertIsNone(w.fd)
        _, name = s.submit("x")
        r.finish(name)
        self.assertEqual(s.wait(name)["status"], "ok")  # Usable after close.
        s.close()

    def test_no_watch_on_a_network_filesystem(self) -> None:
        self.s.network = True
        self.assertIsNone(self.s._watch_results())


class BackoffTest(unittest.TestCase):
    def test_doubles_to_the_ceiling(self) -> None:
        b = _wait.Backoff(ceiling=0.1)
        seen = []
        for _ in range(10):
            seen.append(b.delay)
            b.delay = min(b.delay * 2, b.ceiling)
        self.assertEqual(seen[0], 0.001)
        self.assertEqual(seen[-1], 0.1)
        self.assertEqual(seen[:4], [0.001, 0.002, 0.004, 0.008])


if __name__ == "__main__":
    unittest.main()


class CursorShapeTest(Base):
    """One cursor reply shape per operation (PROTOCOL.md section 19,
    "Cursors"): submit and status carry resume_cursor (the spool size), a
    match gives its span and resume_cursor = its end, a timeout only
    resume_cursor = the spool size."""

    def spool(self, data: bytes) -> None:
        with open(os.path.join(self.dir, "log", "session.out"), "ab") as f:
            f.write(data)

    def test_shapes(self) -> None:
        self.runner()
        self.spool(b"before\n")
        sub = self.s.submit("x")
        cmd_id, name = sub  # Still unpacks as two.
        self.assertEqual((sub.resume_cursor, sub.cmd_id, sub.name), (7, cmd_id, name))
        self.assertEqual(self.s.status()["resume_cursor"], 7)
        self.spool(b"mark-1\n")
        m = self.s.wait_for("mark-[0-9]", sub.resume_cursor, timeout=5)
        self.assertEqual(m.to_dict(), {"matched": True, "match_text": "mark-1",
                                       "match_span": {"start": 7, "end": 13}, "resume_cursor": 13})
        self.spool(b"tail")
        with self.assertRaises(sp.WaitTimeout) as cm:
            self.s.wait_for("mark-[0-9]", m.resume_cursor, timeout=0.2)
        self.assertEqual(getattr(cm.exception, "resume_cursor"), 18)


    def test_wait_for_skips_the_retention_cut(self) -> None:
        # Retention punched the spool's first MiB (holes read as zeros) and
        # state.json says where the cut is: a wait from an old cursor starts
        # there, never matching (nor reading through) the zeros.
        r = self.runner()
        cut = 1 << 20
        with open(os.path.join(self.dir, "log", "session.out"), "wb") as f:
            f.truncate(cut)  # A hole, as PUNCH_HOLE leaves it.
            f.seek(cut)
            f.write(b"kept-1\n")
        r._write_state(retention={"spool_cut": cut})
        m = self.s.wait_for(b"\x00|kept-[0-9]", 0, timeout=5)
        self.assertEqual((m.start, m.text), (cut, b"kept-1"))


class ErrorContextTest(unittest.TestCase):
    """The runner's context of a result's error and of a reply is passed on
    unchanged beside the master's own keys, which win."""

    def test_result_context(self) -> None:
        res = {"cmd_id": "c1", "status": "timeout", "exit_reason": "ctrl_c",
               "error": {"code": "timeout", "message": "timed out", "context": {"timeout_s": 0.5, "status": "x"}}}
        e = sp.errors.result_error(res)
        self.assertIsInstance(e, sp.CommandTimeout)
        self.assertEqual(e.context, {"timeout_s": 0.5, "cmd_id": "c1", "status": "timeout", "exit_reason": "ctrl_c"})
        self.assertEqual(res["error"]["context"], {"timeout_s": 0.5, "status": "x"})  # The result is not changed.

    def test_reply_context(self) -> None:
        from skillpilot.session import _reply_error
        reply = {"op": "cancel", "req_id": "r1", "outcome": "rejected", "message": "no",
                 "context": {"field": "scope", "source": "ctl/req_0000000001_r1.json"}}
        e = _reply_error(reply, "cancel")
        self.assertIsInstance(e, sp.RequestRejected)
        self.assertEqual(e.context, {"field": "scope", "source": "ctl/req_0000000001_r1.json",
                                     "op": "cancel", "req_id": "r1", "outcome": "rejected"})
