"""SkillPilot master for Python 3.8+ (standard library only).

Talks to a SkillPilot runner through its session directory, following
PROTOCOL.md: seq allocation by exclusive create in seq/, atomic writes
(temp file + rename), results in result/, control files in ctl/.

    from skillpilot_master import Session
    s = Session("/path/to/session")
    res = s.run("puts hello; expr 6*7", timeout=60)
    print(res["status"], res.get("value"), s.output(res))

Exceptions: SessionMissing, RunnerNotAlive, WaitTimeout, CommandFailed,
CommandTimeout, Cancelled (all subclasses of MasterError, each with a
stable .code as in the Go master).
"""

import json
import os
import secrets
import socket
import threading
import time

PROTOCOL_VERSION = 1
SEQ_WIDTH = 10


class MasterError(Exception):
    code = "io_error"


class SessionMissing(MasterError):
    code = "session_missing"


class RunnerNotAlive(MasterError):
    code = "runner_not_alive"


class WaitTimeout(MasterError):
    code = "wait_timeout"


class ResultError(MasterError):
    """A result whose status is not ok; .result holds it."""

    def __init__(self, result):
        msg = (result.get("error") or {}).get("message") or result.get("exit_reason")
        super().__init__("command %s: %s: %s" % (result.get("cmd_id"), result.get("status"), msg))
        self.result = result


class CommandFailed(ResultError):
    code = "command_failed"


class CommandTimeout(ResultError):
    code = "command_timeout"


class Cancelled(ResultError):
    code = "cancelled"


def new_cmd_id():
    """A UUID version 7: time-ordered and random."""
    b = bytearray(secrets.token_bytes(16))
    ms = int(time.time() * 1000)
    b[0:6] = ms.to_bytes(6, "big")
    b[6] = (b[6] & 0x0F) | 0x70
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def _now_iso():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


class Session:
    def __init__(self, directory, poll=0.05):
        self.dir = os.path.abspath(directory)
        if not os.path.isdir(os.path.join(self.dir, "queue")):
            raise SessionMissing("not a session directory: %s" % directory)
        os.makedirs(os.path.join(self.dir, "seq"), exist_ok=True)
        self.poll = poll
        self.owner = "python-master@%s:%d" % (socket.gethostname(), os.getpid())
        self._lease_counter = 0

    def _p(self, *parts):
        return os.path.join(self.dir, *parts)

    def _revalidate(self, *parts):
        """Open and close a directory: on NFS this drops cached negative
        lookups, so a file another host just created becomes visible
        (otherwise it can stay invisible for 30-60 s)."""
        try:
            os.close(os.open(self._p(*parts), os.O_RDONLY))
        except OSError:
            pass

    def _write_atomic(self, rel, data):
        path = self._p(rel)
        d, base = os.path.split(path)
        tmp = os.path.join(d, ".%s.%d.%s.tmp" % (base, os.getpid(), secrets.token_hex(4)))
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(data)
        os.rename(tmp, path)

    # --- seq allocation: exclusive create in seq/ (PROTOCOL.md) ---
    def _read_hint(self):
        try:
            with open(self._p("seq", "hint")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return self._max_reserved()

    def _max_reserved(self):
        m = 0
        for name in os.listdir(self._p("seq")):
            if name.isdigit():
                m = max(m, int(name))
        return m

    def alloc_seq(self):
        n = self._read_hint()
        tries = 0
        while True:
            n += 1
            try:
                fd = os.open(self._p("seq", "%0*d" % (SEQ_WIDTH, n)), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                tries += 1
                if tries % 64 == 0:
                    n = max(n, self._max_reserved())
                continue
            os.close(fd)
            try:
                with open(self._p("seq", "hint")) as f:
                    cur = int(f.read().strip())
            except (OSError, ValueError):
                cur = -1
            if cur < n:
                try:
                    self._write_atomic(os.path.join("seq", "hint"), "%d\n" % n)
                except OSError:
                    pass
            return n

    # --- commands ---
    def submit(self, payload, kind="tcl", timeout=None, cancel_policy=None, cmd_id=None):
        """Queue a command; returns (cmd_id, name)."""
        cmd_id = cmd_id or new_cmd_id()
        seq = self.alloc_seq()
        cmd = {"protocol_version": PROTOCOL_VERSION, "cmd_id": cmd_id, "seq": seq, "kind": kind,
               "payload": payload, "submitted_at": _now_iso(), "submitter": self.owner}
        if timeout:
            cmd["timeout_s"] = timeout
        if cancel_policy:
            cmd["cancel_policy"] = cancel_policy
        name = "cmd_%0*d_%s.json" % (SEQ_WIDTH, seq, cmd_id)
        self._write_atomic(os.path.join("queue", name), json.dumps(cmd))
        return cmd_id, name

    def _find(self, cmd_id):
        for d in ("result", "inflight", "queue"):
            try:
                names = os.listdir(self._p(d))
            except OSError:
                continue
            for n in names:
                if n.startswith("cmd_") and n.endswith("_%s.json" % cmd_id):
                    return n
        raise MasterError("no command %s in this session" % cmd_id)

    def result(self, name_or_id):
        name = name_or_id if name_or_id.startswith("cmd_") else self._find(name_or_id)
        self._revalidate("result")
        try:
            with open(self._p("result", name), encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def wait(self, name_or_id, timeout=None, check=True):
        """Wait for the result; raise the ResultError subclass for its status unless check is False."""
        name = name_or_id if name_or_id.startswith("cmd_") else self._find(name_or_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            res = self.result(name)
            if res is not None:
                if check and res["status"] != "ok":
                    raise {"timeout": CommandTimeout, "cancelled": Cancelled}.get(res["status"], CommandFailed)(res)
                return res
            if deadline is not None and time.monotonic() > deadline:
                raise WaitTimeout("no result for %s within %ss" % (name, timeout))
            time.sleep(self.poll)

    def run(self, payload, wait_timeout=None, check=True, **kw):
        _, name = self.submit(payload, **kw)
        return self.wait(name, timeout=wait_timeout, check=check)

    def output(self, result_or_id, offset=0, length=-1):
        self._revalidate("output")
        if isinstance(result_or_id, dict):
            path = self._p(result_or_id["output_path"])
        else:
            path = self._p("output", self._find(result_or_id)[:-5] + ".out")
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length).decode("utf-8", "replace")

    # --- control ---
    def cancel(self, cmd_id=None):
        req = {"scope": "cmd_id", "cmd_id": cmd_id} if cmd_id else {"scope": "current"}
        req["ts"] = _now_iso()
        self._write_atomic(os.path.join("ctl", "cancel.json"), json.dumps(req))

    def stop(self, force=False, wait=False, timeout=None):
        self._write_atomic(os.path.join("ctl", "stop.json"),
                           json.dumps({"mode": "force" if force else "graceful", "ts": _now_iso()}))
        deadline = None if timeout is None else time.monotonic() + timeout
        while wait:
            st = self._read_json("state", "state.json") or {}
            if st.get("phase") == "stopped":
                return
            if deadline is not None and time.monotonic() > deadline:
                raise WaitTimeout("runner did not stop within %ss" % timeout)
            time.sleep(self.poll)

    def _read_json(self, *parts):
        self._revalidate(*parts[:-1])
        try:
            with open(self._p(*parts), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def status(self):
        """State plus liveness judged by the heartbeat counter moving (our clock only)."""
        st = self._read_json("state", "state.json") or {}
        hb = self._read_json("state", "heartbeat.json") or {}
        alive = False
        if st.get("phase") not in (None, "stopped"):
            window = 2 * hb.get("interval_ms", 1000) / 1000.0 + 0.25
            end = time.monotonic() + window
            while time.monotonic() < end:
                h2 = self._read_json("state", "heartbeat.json") or {}
                if h2.get("counter") != hb.get("counter"):
                    alive = True
                    break
                time.sleep(0.05)
        queue = [n for n in os.listdir(self._p("queue")) if n.startswith("cmd_") and n.endswith(".json")]
        return {"protocol_version": PROTOCOL_VERSION, "alive": alive, "phase": st.get("phase"),
                "current_cmd_id": st.get("current_cmd_id"), "queue_depth": len(queue),
                "heartbeat_counter": hb.get("counter"), "reason": st.get("reason")}

    def write_lease(self, ttl, lease_id="python-lease"):
        self._lease_counter += 1
        self._write_atomic(os.path.join("state", "lease.json"), json.dumps({
            "protocol_version": PROTOCOL_VERSION, "lease_id": lease_id, "ttl_ms": int(ttl * 1000),
            "counter": self._lease_counter, "owner": self.owner,
            "expires_at": int((time.time() + ttl) * 1000)}))

    def keep_lease(self, ttl):
        """Renew the lease every ttl/3 in a daemon thread; returns an Event that stops it."""
        stop = threading.Event()
        self.write_lease(ttl)

        def loop():
            while not stop.wait(ttl / 3.0):
                try:
                    self.write_lease(ttl)
                except OSError:
                    pass
        threading.Thread(target=loop, daemon=True).start()
        return stop


def _main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="SkillPilot master (Python)")
    ap.add_argument("--session", required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("payload")
    p.add_argument("--timeout", type=float)
    sub.add_parser("status")
    p = sub.add_parser("cancel")
    p.add_argument("cmd_id", nargs="?")
    p = sub.add_parser("stop")
    p.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    try:
        s = Session(a.session)
        if a.cmd == "run":
            res = s.run(a.payload, timeout=a.timeout, check=False)
            print(s.output(res), end="")
            return {"ok": 0, "error": 1, "timeout": 3, "cancelled": 4}[res["status"]]
        if a.cmd == "status":
            print(json.dumps(s.status(), indent=2))
        if a.cmd == "cancel":
            s.cancel(a.cmd_id)
        if a.cmd == "stop":
            s.stop(force=a.force, wait=True)
    except SessionMissing as e:
        print("master: %s" % e, file=__import__("sys").stderr)
        return 5
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(_main(sys.argv[1:]))
