import multiprocessing
import os
import re
import stat
import threading
import unittest

from skillpilot import _fs, _names
from skillpilot.errors import MasterError, UsageError

from .fake_runner import make_session


class NamesTest(unittest.TestCase):
    def test_parse_is_exact(self) -> None:
        self.assertEqual(_names.parse_name("cmd_0000000001_a_b.json"), (1, "a_b"))
        self.assertEqual(_names.parse_name("cmd_7_b.json"), (7, "b"))
        self.assertEqual(_names.parse_name("req_0000000003_x.json", "req"), (3, "x"))
        for bad in ("cmd_1_.json", "cmd__x.json", "cmd_1_x.json.tmp", ".cmd_1_x.json", "cmd_1_a b.json",
                    "cmd_1234567890123456789_x.json", "req_1_x.json", "cmd_1_..json"):
            self.assertIsNone(_names.parse_name(bad), bad)

    def test_names(self) -> None:
        self.assertEqual(_names.command_name(12, "x"), "cmd_0000000012_x.json")
        self.assertEqual(_names.request_name(3, "r"), "req_0000000003_r.json")
        self.assertEqual(_names.output_name("cmd_0000000012_x.json"), "cmd_0000000012_x.out")

    def test_uuid7(self) -> None:
        ids = [_names.new_id() for _ in range(200)]
        for i in ids:
            self.assertRegex(i, r"\A[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\Z")
            self.assertTrue(_names.valid_id(i))
        self.assertEqual(len(set(ids)), len(ids))
        self.assertLessEqual(ids[0][:13], ids[-1][:13])  # Time-ordered prefix.

    def test_correlation_bounds(self) -> None:
        # PROTOCOL.md section 4, Correlation: the same bounds as the runner's.
        ok = [(None, None), ("", None), ("flow-7/place:3", None), ("x" * 128, None),
              (None, {"_x": "", "a9": "with spaces and \u00fcn\u00efcode"}),
              (None, {"k%d" % i: "\u00e9" * 128 for i in range(16)})]
        for trace_id, labels in ok:
            _names.check_correlation(trace_id, labels)
        bad = [("x" * 129, None), ("a b", None), ("tab\there", None), ("\u00fc", None),
               (None, {"k%d" % i: "" for i in range(17)}), (None, {"": "x"}), (None, {"9a": "x"}),
               (None, {"Upper": "x"}), (None, {"a-b": "x"}), (None, {"k" * 64: "x"}),
               (None, {"k": "v" * 257}), (None, {"k": "a\x00b"}), (None, {"k": "\x7f"}), (None, {"k": 1}),
               (None, ["k"])]
        for trace_id, labels in bad:
            with self.assertRaises(UsageError, msg=repr((trace_id, labels))):
                _names.check_correlation(trace_id, labels)

    def test_correlation_not_encodable(self) -> None:
        # A lone surrogate cannot be written as UTF-8; it is a
        # usage error like any other bad label, not UnicodeEncodeError, and
        # a value None (JSON null) is refused too.
        for trace_id, labels in [(None, {"k": "a\ud800"}), (None, {"k": "\udfff"}), (None, {"k": None}),
                                 ("a\ud800", None)]:
            with self.assertRaises(UsageError, msg=repr((trace_id, labels))):
                _names.check_correlation(trace_id, labels)


def _alloc_many(args: "tuple[str, int]") -> "list[int]":
    d, n = args
    return [_names.alloc_seq(d) for _ in range(n)]


class SeqTest(unittest.TestCase):
    def test_unique_across_threads_and_processes(self) -> None:
        d = make_session(self)
        got: "list[int]" = []
        lock = threading.Lock()

        def worker() -> None:
            mine = [_names.alloc_seq(d) for _ in range(50)]
            with lock:
                got.extend(mine)
        ts = [threading.Thread(target=worker) for _ in range(4)]
        for t in ts:
            t.start()
        with multiprocessing.get_context("spawn").Pool(3) as pool:
            for part in pool.map(_alloc_many, [(d, 50)] * 3):
                got.extend(part)
        for t in ts:
            t.join()
        self.assertEqual(len(got), 350)
        self.assertEqual(len(set(got)), 350, "a seq was allocated twice")
        self.assertEqual(sorted(got), list(range(1, 351)))

    def test_garbage_hint_falls_back_to_listing(self) -> None:
        d = make_session(self)
        for n in (1, 2, 9):
            open(os.path.join(d, "seq", "%010d" % n), "w").close()
        with open(os.path.join(d, "seq", "hint"), "w") as f:
            f.write("garbage")
        self.assertEqual(_names.alloc_seq(d), 10)
        with open(os.path.join(d, "seq", "hint")) as f:
            self.assertEqual(f.read(), "10\n")

    def test_seq_files_are_0660(self) -> None:
        d = make_session(self)
        old = os.umask(0)
        try:
            n = _names.alloc_seq(d)
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, "seq", "%010d" % n)).st_mode), 0o660)


class FSTest(unittest.TestCase):
    def setUp(self) -> None:
        self.d = make_session(self)

    def test_write_atomic_mode_and_no_leftover(self) -> None:
        p = os.path.join(self.d, "queue", "cmd_1_x.json")
        for mask in (0, 0o077):
            old = os.umask(mask)
            try:
                _fs.write_atomic(p, b"{}")
            finally:
                os.umask(old)
            self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), 0o660)
        self.assertEqual(os.listdir(os.path.join(self.d, "queue")), ["cmd_1_x.json"])

    def test_read_refuses_symlink_fifo_and_big_files(self) -> None:
        target = os.path.join(self.d, "tmp", "t.json")
        with open(target, "w") as f:
            f.write("{}")
        link = os.path.join(self.d, "result", "cmd_1_l.json")
        os.symlink(target, link)
        with self.assertRaisesRegex(MasterError, "symlink"):
            _fs.read_small(link)
        fifo = os.path.join(self.d, "result", "cmd_2_f.json")
        os.mkfifo(fifo)
        with self.assertRaisesRegex(MasterError, "not a regular file"):
            _fs.read_small(fifo)  # Must not block.
        with self.assertRaisesRegex(MasterError, "limit"):
            _fs.read_small(target, limit=1)
        self.assertIsNone(_fs.read_small(os.path.join(self.d, "result", "missing.json")))
        with self.assertRaisesRegex(MasterError, "not valid JSON"):
            with open(target, "w") as f:
                f.write("{")
            _fs.read_json(target)

    def test_read_range(self) -> None:
        p = os.path.join(self.d, "output", "x.out")
        with open(p, "wb") as f:
            f.write(b"0123456789")
        self.assertEqual(_fs.read_range(p), b"0123456789")
        self.assertEqual(_fs.read_range(p, 3, 4), b"3456")
        self.assertEqual(_fs.read_range(p, 8), b"89")
        self.assertEqual(_fs.read_range(p, 20), b"")
        self.assertEqual(_fs.read_range(p + ".missing"), b"")

    def test_session_fs_never_follows_a_symlinked_directory(self) -> None:
        outside = os.path.join(os.path.dirname(self.d), "outside")
        os.mkdir(outside)
        with open(os.path.join(outside, "cmd_1_x.json"), "w") as f:
            f.write("{}")
        os.rmdir(os.path.join(self.d, "result"))
        os.symlink(outside, os.path.join(self.d, "result"))
        sfs = _fs.SessionFS(self.d)
        for call in (lambda: sfs.read("result", "cmd_1_x.json"), lambda: sfs.read_json("result", "cmd_1_x.json"),
                     lambda: sfs.read_range("result", "cmd_1_x.json"), lambda: sfs.list("result"),
                     lambda: sfs.write_atomic("result", "cmd_2_y.json", b"{}"),
                     lambda: sfs.create_exclusive("result", "3"), lambda: sfs.stat("result", "cmd_1_x.json"),
                     lambda: sfs.withdraw("result", "cmd_1_x.json")):
            with self.assertRaisesRegex(MasterError, "symlink"):
                call()
        self.assertEqual(os.listdir(outside), ["cmd_1_x.json"])
        self.assertIsNone(sfs.read_json_quiet("result", "cmd_1_x.json"))
        self.assertFalse(sfs.exists("result", "cmd_1_x.json"))
        self.assertTrue(sfs.is_dir("result"))  # Tells a session apart; every operation above refuses.
        self.assertFalse(sfs.is_plain_dir("result"))
        for bad in ("..", ".", "a/b", ""):
            with self.assertRaises(MasterError):
                sfs.read("queue", bad)
        with self.assertRaises(MasterError):
            sfs.read("../sess", "x")
        self.assertIsNone(sfs.read("nosuch", "x"))
        self.assertEqual(sfs.read_range("nosuch", "x"), b"")
        sfs.write_atomic("queue", "cmd_4_z.json", b"{}")
        self.assertEqual(sfs.read_json("queue", "cmd_4_z.json"), {})
        self.assertEqual(sfs.list("queue"), ["cmd_4_z.json"])

    def test_pool_member_swapped_for_a_symlink(self) -> None:
        # A pool member (SessionFS.session) swapped for a
        # symlink to a session elsewhere after pool_pick listed it: nothing
        # is written, read or listed through it.
        pool = os.path.dirname(self.d)
        outside = os.path.join(pool, "outside")
        for sub in ("queue", "log"):
            os.makedirs(os.path.join(outside, sub))
        os.rename(self.d, os.path.join(pool, "s01.away"))
        os.symlink(outside, os.path.join(pool, "s01"))
        sfs = _fs.SessionFS(pool).session("s01")
        for call in (lambda: sfs.write_atomic("queue", "cmd_1_x.json", b"{}"), lambda: sfs.list("queue"),
                     lambda: sfs.stat("log", "session.out"), lambda: sfs.mkdir("seq")):
            with self.assertRaisesRegex(MasterError, "symlink"):
                call()
        self.assertEqual(sorted(os.listdir(outside)), ["log", "queue"])
        self.assertEqual(os.listdir(os.path.join(outside, "queue")), [])
        # A forward record's target is a member too.
        with self.assertRaisesRegex(MasterError, "symlink"):
            _fs.SessionFS(os.path.join(pool, "s01.away")).relative("../s01").write_atomic("queue", "cmd_2_y.json", b"{}")
        self.assertEqual(os.listdir(os.path.join(outside, "queue")), [])

    def test_fs_type_of_a_local_dir(self) -> None:
        name, network = _fs.fs_type(self.d)
        self.assertTrue(name)
        if re.match(r"(ext\d|tmpfs|xfs|btrfs|overlay)", name):
            self.assertFalse(network)


if __name__ == "__main__":
    unittest.main()


class JudgeOutputTest(unittest.TestCase):
    """output_bytes once the command has a result: never fewer
    bytes than stats.bytes; a missing file is served from output_inline."""

    def test_judge(self) -> None:
        from skillpilot.session import _judge_output
        res = {"cmd_id": "a", "stats": {"bytes": 6}, "output_inline": "aGVsbG8K"}  # "hello\n"
        self.assertEqual(_judge_output("o", None, None, 0, -1), b"")  # No result, no file yet.
        self.assertEqual(_judge_output("o", None, b"he", 0, -1), b"he")  # Still running.
        self.assertEqual(_judge_output("o", res, b"hello\n", 0, -1), b"hello\n")
        self.assertEqual(_judge_output("o", res, None, 0, -1), b"hello\n")  # Gone: the copy.
        self.assertEqual(_judge_output("o", res, None, 1, 3), b"ell")
        self.assertEqual(_judge_output("o", res, b"he", 0, 2), b"he")  # A range inside what is there.
        with self.assertRaisesRegex(MasterError, "holds 2 bytes, but the result of a says 6"):
            _judge_output("o", res, b"he", 0, -1)
        big = {"cmd_id": "b", "stats": {"bytes": 100001}}
        with self.assertRaisesRegex(MasterError, "is gone"):
            _judge_output("o", big, None, 0, -1)
        self.assertEqual(_judge_output("o", big, None, 100001, -1), b"")  # At its end.
        bad = dict(res, output_inline="aGVsbA==")  # "hell": not the whole output.
        with self.assertRaisesRegex(MasterError, "is gone"):
            _judge_output("o", bad, None, 0, -1)
