"""A stand-in for the runner's side of the files, for unit tests of the
Python master's logic: a session layout, a heartbeat that moves (or not),
the runner's flock, a mailbox that answers requests with scripted outcomes,
and results written on demand. The conformance suite (internal/conformance/) runs
the same master against the real runner."""

import fcntl
import json
import os
import shutil
import tempfile
import unittest
import threading
import time
from typing import Any, Callable, Dict, List, Optional

DIRS = ["queue", "inflight", "result", "output", "ctl", "ctl/ack", "state", "log", "seq", "archive", "tmp"]


def make_session(tc: unittest.TestCase) -> str:
    """A new session layout, removed when the test ends."""
    root = tempfile.mkdtemp(prefix="sp-py-test-")
    tc.addCleanup(shutil.rmtree, root, True)
    d = os.path.join(root, "sess")
    for sub in DIRS:
        os.makedirs(os.path.join(d, sub), mode=0o700)
    return d


def write_json(path: str, v: Dict[str, Any]) -> None:
    tmp = os.path.join(os.path.dirname(path), ".w.%d.tmp" % threading.get_ident())
    with open(tmp, "w") as f:
        json.dump(v, f)
    os.rename(tmp, path)


class FakeRunner:
    """Heartbeat, state and mailbox of a runner. ``answer(request)`` returns
    the reply fields (at least outcome) for each request; None leaves it
    unanswered."""

    def __init__(self, session_dir: str, interval: float = 0.05,
                 answer: Optional[Callable[[Dict[str, Any]], Optional[Dict[str, Any]]]] = None) -> None:
        self.dir = session_dir
        self.interval = interval
        self.session_id = "session_fake_%d" % os.getpid()
        self.phase = "idle"
        self.counter = 0
        self.beating = True
        self.requests: List[Dict[str, Any]] = []
        self.hb_extra: Dict[str, Any] = {}  # More heartbeat fields (timestamp, current_output_bytes, ...).
        self.answer = answer or (lambda req: {"outcome": "accepted"})
        self._stop = threading.Event()
        self._mu = threading.Lock()
        # Held while one request is answered and then deleted, in the
        # runner's order (PROTOCOL.md 9.1, step 4: reply, then delete). A
        # master returns as soon as it sees the reply, so a test that looks
        # at ctl/ afterwards calls settled() first.
        self._mailbox = threading.Lock()
        self._lock_fd = os.open(os.path.join(session_dir, "state", "runner.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        self._write_state()
        self._beat()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _write_state(self, **extra: Any) -> None:
        st = {"protocol_version": 1, "phase": self.phase, "session_id": self.session_id, "runner_pid": os.getpid(),
              "hostname": "fake", "kind": "tcl", "current_cmd_id": None}
        st.update(extra)
        write_json(os.path.join(self.dir, "state", "state.json"), st)

    def _beat(self) -> None:
        self.counter += 1
        hb = {"protocol_version": 1, "counter": self.counter, "interval_ms": int(self.interval * 1000),
              "phase": self.phase, "session_id": self.session_id}
        hb.update(self.hb_extra)
        write_json(os.path.join(self.dir, "state", "heartbeat.json"), hb)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval / 5):
            with self._mu:  # hang() and kill() return with no beat under way.
                if self.beating and int(time.monotonic() / self.interval) != getattr(self, "_tick", None):
                    self._tick = int(time.monotonic() / self.interval)
                    self._beat()
            try:
                names = sorted(os.listdir(os.path.join(self.dir, "ctl")))
            except FileNotFoundError:
                continue  # A test swapping ctl/ for a symlink: the beat goes on, as a real runner's.
            for name in names:
                if not name.startswith("req_"):
                    continue
                with self._mailbox:
                    self._take(name)

    def _take(self, name: str) -> None:
        path = os.path.join(self.dir, "ctl", name)
        with open(path) as f:
            req = json.load(f)
        self.requests.append(req)
        reply = self.answer(req)
        if reply is None:
            return
        stays = reply.pop("_stays", False)  # A test's runner that accepts a stop but goes on.
        body = {"protocol_version": 1, "req_id": req["req_id"], "seq": req["seq"], "op": req["op"],
                "message": "fake", "spool_offset": 0}
        body.update(reply)
        write_json(os.path.join(self.dir, "ctl", "ack", name), body)
        os.unlink(path)
        if req["op"] == "stop" and reply.get("outcome") == "accepted" and not stays:
            self.stop_runner()

    def settled(self) -> None:
        """Return once no request is half taken: every request whose reply
        a master has seen is deleted from ctl/ too."""
        with self._mailbox:
            pass

    def finish(self, name: str, status: str = "ok", output: bytes = b"", **fields: Any) -> None:
        """Write the result (and output) of command file name."""
        out = name[:-5] + ".out"
        with open(os.path.join(self.dir, "output", out), "wb") as f:
            f.write(output)
        res = {"protocol_version": 1, "cmd_id": name.split("_", 2)[2][:-5], "status": status,
               "output_path": "output/" + out}
        res.update(fields)
        write_json(os.path.join(self.dir, "result", name), res)

    def stop_runner(self, phase: str = "stopped", **extra: Any) -> None:
        """End like a runner: phase stopped, lock released, heartbeat still."""
        self.phase = phase
        self.beating = False
        self._write_state(**extra)
        self._beat()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def kill(self) -> None:
        """Die like kill -9: the heartbeat stops, the lock is freed, state
        still says idle."""
        with self._mu:
            self.beating = False
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def hang(self) -> None:
        """Stop beating but keep the lock (a hung runner, or NFS)."""
        with self._mu:
            self.beating = False

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
