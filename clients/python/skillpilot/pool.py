"""SkillPilot pools from Python (3.8+, standard library only).

A pool is a directory of session directories s00, s01, ... started by
`master pool start` (PROTOCOL.md, "Pools"). This module puts commands into
the pool with the same selection rules as the Go master (master.Pool):

    from skillpilot import pool
    where = pool.pool_submit("/proj/pool", "report_timing", affinity="corner_ss")
    result = pool.pool_wait("/proj/pool", where, timeout=600)

Selection: a session is *alive* when state.json's phase is not "stopped"
and heartbeat.json is at most 2 x interval_ms + 1 s old on the
filesystem's clock (its mtime against the mtime of <pool>/.clock, which we
touch: both are the file server's time on NFS). The load of a session is
its queued commands plus claimed commands without a result. Choosing reads
two sessions, not all (the power of two choices): sessions are judged in a
random order until two are alive with phase idle or busy, and the less
loaded of the two wins (ties to the smaller name). When fewer than two
serve, all have been judged, and the least loaded of those serving (else of
the alive ones) wins, ties to the smallest name. An affinity key pins related commands to one session
(<pool>/affinity/<key>.json, created exclusively) while that session is
alive; a key whose session is not alive is pinned again.

As the Go master, a session on a local filesystem whose runner.lock is
free (its runner was killed) is dead at once. Moving commands out of dead
sessions and respawning are done by the Go master (`master pool heal`),
not here; pool_wait ends at once for a command claimed by a dead session
or held by a deleted one (PROTOCOL.md section 18.6).

Every file operation goes through skillpilot._fs.SessionFS, which never
follows a symlink inside the pool or its sessions.
"""

import os
import random
import re
import socket
import time

from . import _fs, _names
from ._command import command_fields, dumps, runner_kind
from .errors import MasterError, RunnerNotAlive, SessionMissing, UsageError, WaitTimeout

PROTOCOL_VERSION = 1
SEQ_WIDTH = 10
_NAME = re.compile(r"^s[0-9]+$")
_CMD = re.compile(r"^cmd_([0-9]{1,18})_([A-Za-z0-9._-]{1,128})\.json$")
_KEY = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class PoolError(MasterError):
    """Base class of the pool's errors (a MasterError: code, exit_code,
    context)."""
    code = "io_error"


class NoLiveSession(PoolError, RunnerNotAlive):
    """No session of the pool is alive (CLI exit 5, runner_not_alive)."""
    code = "runner_not_alive"


class RunnerGone(NoLiveSession):
    """pool_wait: the command was claimed by a session whose runner is dead
    and the pool does not respawn (runner_not_alive, exit 5). It gets its
    result (runner_restarted) when a runner starts on that session.
    ``context``: cmd_id, session, reason."""
    code = "runner_not_alive"


class SessionGone(PoolError, SessionMissing):
    """pool_wait: the directory of the session holding the command is gone
    (deleted): no result will come (session_missing, exit 5).
    ``context``: cmd_id, session, dir."""
    code = "session_missing"


class PoolWaitTimeout(PoolError, WaitTimeout):
    code = "wait_timeout"


def gone_message(cmd_id, session):
    """The words every master's pool wait uses for a deleted session
    (PROTOCOL.md section 18.6)."""
    return "command %s: session %s is gone (its directory was deleted); no result will come" % (cmd_id, session)


def claimed_dead_message(cmd_id, session):
    """The words every master's pool wait uses for a command claimed by a
    dead session (PROTOCOL.md section 18.6)."""
    return ("command %s: claimed by %s, whose runner is gone; it gets its result (runner_restarted) when a runner "
            "starts on %s (master pool heal with respawn, or master launch)" % (cmd_id, session, session))


def _alloc_seq(sfs):
    """PROTOCOL.md section 5: exclusive create of seq/<n> (seq/ made if a
    runner has not made it yet), as Session.submit allocates."""
    sfs.mkdir_master(_names.DIR_SEQ)
    return _names.alloc_seq(sfs)


def _commands(sfs, sub):
    try:
        return [n for n in sfs.list(sub) if _CMD.match(n)]
    except (OSError, _fs.MasterError):
        return []


def pool_sessions(pool_dir):
    """The pool's session names (s00, s01, ...) in name order."""
    pfs = _fs.SessionFS(pool_dir)
    return sorted(n for n in pfs.list("") if _NAME.match(n) and pfs.is_plain_dir(n))


def _fs_now(pool_dir):
    """The filesystem's current time: touch <pool>/.clock (UTIME_NOW; on NFS
    the server sets it) and read its mtime."""
    return _fs.SessionFS(pool_dir).touch_mtime("", ".clock")


def _view(pfs, name, now):
    """Judge one session against the filesystem time now."""
    s = pfs.session(name)
    s.revalidate("state")
    st = s.read_json_quiet("state", "state.json", 1 << 20)
    hb = s.read_json_quiet("state", "heartbeat.json", 1 << 20)
    queue = len(_commands(s, "queue"))
    inflight = len([n for n in _commands(s, "inflight") if not s.exists("result", n)])
    v = {"session": name, "phase": None, "alive": False, "dead": True,
         "queue_depth": queue, "inflight": inflight, "load": queue + inflight}
    try:
        age = max(now - s.stat("state", "heartbeat.json").st_mtime_ns / 1e9, 0.0)
    except (OSError, _fs.MasterError):
        age = None
    v["why"] = "no runner has written state yet"
    if st is not None and hb is not None and age is not None:
        v["phase"] = st.get("phase")
        interval = max(hb.get("interval_ms") or 0, 100) / 1000.0
        window = 2 * interval + 1.0
        stopped = "stopped" in (st.get("phase"), hb.get("phase"))
        lock_free = not stopped and not _network(pfs) and not s.lock_held("state", "runner.lock")
        v["alive"] = not stopped and not lock_free and age <= window
        v["dead"] = stopped or lock_free or age > max(10.0, window)
        if stopped:
            v["why"] = "the runner stopped: %s" % (st.get("reason") or "")
        elif lock_free:
            v["why"] = "the runner's lock is free"
        else:
            v["why"] = "heartbeat %.1fs old" % age
    return v


_network_cache = {}


def _network(pfs):
    """Whether the pool is on a network filesystem, where a free flock
    proves nothing (as the Go master: only a local filesystem's lock is
    probed)."""
    if pfs.root not in _network_cache:
        _network_cache[pfs.root] = _fs.fs_type(pfs.root)[1]
    return _network_cache[pfs.root]


def pool_views(pool_dir):
    """One dict per session: session, phase, alive, dead, queue_depth,
    inflight, load (see the module doc for the rules)."""
    now = _fs_now(pool_dir)
    pfs = _fs.SessionFS(pool_dir)
    return [_view(pfs, name, now) for name in pool_sessions(pool_dir)]


class _Chooser:
    """Judges the pool's sessions on demand, each at most once."""

    def __init__(self, pool_dir, views=None):
        if views is None:
            self.now = _fs_now(pool_dir)
            self.pfs = _fs.SessionFS(pool_dir)
            self.names = pool_sessions(pool_dir)
            self.judged = {}
        else:
            self.names = [v["session"] for v in views]
            self.judged = {v["session"]: v for v in views}

    def view(self, name):
        if name not in self.judged:
            self.judged[name] = _view(self.pfs, name, self.now)
        return self.judged[name]

    def seen(self):
        return [self.judged[n] for n in self.names if n in self.judged]

    def two_choices(self):
        """The power of two choices: judge sessions in a random order until
        two are serving; the less loaded wins (ties to the smaller name).
        With fewer than two serving, all were judged: _least_loaded."""
        order = list(self.names)
        found = []
        i = 0
        while i < len(order) and len(found) < 2:
            j = i + _rng.randrange(len(order) - i)
            order[i], order[j] = order[j], order[i]
            v = self.view(order[i])
            if v["alive"] and v["phase"] in ("idle", "busy"):
                found.append(v)
            i += 1
        if len(found) < 2:
            return _least_loaded(self.seen())
        a, b = found
        if (b["load"], b["session"]) < (a["load"], a["session"]):
            a = b
        return a


_rng = random.SystemRandom()


def _least_loaded(views, except_name=None):
    for want in (lambda v: v["alive"] and v["phase"] in ("idle", "busy"), lambda v: v["alive"]):
        best = None
        for v in views:
            if v["session"] != except_name and want(v) and (best is None or v["load"] < best["load"]):
                best = v
        if best is not None:
            return best
    return None


def _read_pin(pool_dir, key):
    pfs = _fs.SessionFS(pool_dir)
    pfs.revalidate("affinity")
    pin = pfs.read_json_quiet("affinity", key + ".json", 1 << 16)
    return pin.get("session") if pin else None


def _write_pin(pool_dir, key, session, replace):
    data = dumps({"protocol_version": PROTOCOL_VERSION, "key": key, "session": session,
                  "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    pfs = _fs.SessionFS(pool_dir)
    pfs.mkdir_master("affinity")
    if replace:
        pfs.write_atomic("affinity", key + ".json", data)
        return session
    if pfs.link_exclusive("affinity", key + ".json", data):
        return session
    return _read_pin(pool_dir, key)


def pool_pick(pool_dir, affinity=None, views=None):
    """The session a command would go to now (a name such as "s01")."""
    if affinity is not None and not _KEY.match(affinity):
        raise ValueError("affinity key %r: use 1-128 characters of [A-Za-z0-9._-]" % affinity)
    ch = _Chooser(pool_dir, views)
    pinned = None
    if affinity:
        pinned = _read_pin(pool_dir, affinity)
        if pinned in ch.names and ch.view(pinned)["alive"]:
            return pinned
    best = ch.two_choices()
    if best is None:
        raise NoLiveSession("no live session in pool %s" % pool_dir)
    if affinity:
        won = _write_pin(pool_dir, affinity, best["session"], pinned is not None)
        if won in ch.names and ch.view(won)["alive"]:
            return won
    return best["session"]


def pool_submit(pool_dir, payload, affinity=None, kind=None, timeout=None, cancel_policy=None, cmd_id=None,
                trace_id=None, labels=None, max_output_bytes=None):
    """Queue payload in the session pool_pick chooses. The options are
    Session.submit's, every one of them (_command.SUBMIT_OPTIONS), checked
    as it checks them before anything is written; kind defaults to the
    chosen session's runner's, else tcl. Returns a dict with session,
    cmd_id, name (the file name in that session's queue/) and
    resume_cursor (that session's spool size before the command was
    queued, as every master's submit reply: PROTOCOL.md section 19,
    "Cursors"). trace_id and labels (a dict) are carried into the result,
    the events, status and the report, as Session.submit's (PROTOCOL.md
    section 4)."""
    if not isinstance(payload, str):
        raise UsageError("payload must be a str")
    opts = dict(timeout=timeout, cancel_policy=cancel_policy, cmd_id=cmd_id, trace_id=trace_id, labels=labels,
                max_output_bytes=max_output_bytes)
    command_fields("tcl" if kind is None else kind, **opts)  # Refused before a session is chosen or a pin written.
    session = pool_pick(pool_dir, affinity)
    sfs = _fs.SessionFS(pool_dir).session(session)
    fields = command_fields(runner_kind(sfs) if kind is None else kind, **opts)
    seq = _alloc_seq(sfs)
    cmd = {"protocol_version": PROTOCOL_VERSION, "seq": seq, "payload": payload, **fields,
           "submitted_at": _names.now_iso(), "submitter": "python-pool@%s:%d" % (socket.gethostname(), os.getpid())}
    if affinity:
        cmd["affinity"] = affinity
    name = _names.command_name(seq, fields["cmd_id"])
    try:
        cursor = sfs.stat("log", "session.out").st_size
    except (OSError, _fs.MasterError):
        cursor = 0
    sfs.write_atomic("queue", name, dumps(cmd))
    return {"session": session, "cmd_id": fields["cmd_id"], "name": name, "resume_cursor": cursor}


def pool_locate(pool_dir, where):
    """Follow forward/ records: (session directory, name) where the
    command is now."""
    sfs, name = _fs.SessionFS(pool_dir).session(where["session"]), where["name"]
    for _ in range(16):
        sfs.revalidate("result")
        if sfs.exists("result", name):
            break
        fwd = sfs.read_json_quiet("forward", name, 1 << 16)
        to_name = fwd.get("to_name") if fwd else None
        if not isinstance(to_name, str) or not to_name or "/" in to_name or to_name in (".", ".."):
            break
        sfs, name = sfs.relative(fwd["to_session"]), to_name
    return sfs.root, name


def _respawn(pool_dir):
    """pool.json's respawn: a heal (the Go master's) relaunches dead sessions."""
    cfg = _fs.SessionFS(pool_dir).read_json_quiet("", "pool.json", 1 << 20) or {}
    return cfg.get("respawn") is True


#: How long a queued command may have no live session to move to before
#: pool_wait gives up (the Go master's 10 s).
STUCK_FOR = 10.0

NO_LIVE_SESSION = "no live session in the pool to move it to"


def _stuck(pool_dir, where, sdir, name):
    """Raise when the command at sdir/name can get no result without help
    (PROTOCOL.md section 18.6, the Go master's rule): SessionGone when
    its session directory is gone, RunnerGone when a dead session claimed
    it and the pool does not respawn. Return NO_LIVE_SESSION when it is
    queued in a dead session and no session of the pool is alive (final
    once it lasts STUCK_FOR), else ""."""
    pfs = _fs.SessionFS(pool_dir)
    session = os.path.basename(sdir)
    cmd_id = where["cmd_id"]
    if not pfs.is_plain_dir(session):
        raise SessionGone(gone_message(cmd_id, session), context={"cmd_id": cmd_id, "session": session, "dir": sdir})
    sfs = pfs.session(session)
    if sfs.exists("result", name) or _respawn(pool_dir):
        return ""
    claimed = sfs.exists("inflight", name)
    if not claimed and not (sfs.exists("queue", name) or sfs.exists("moved", name)):
        return ""
    now = _fs_now(pool_dir)
    v = _view(pfs, session, now)
    if not v["dead"]:
        return ""
    if claimed:
        raise RunnerGone(claimed_dead_message(cmd_id, session),
                         context={"cmd_id": cmd_id, "session": session, "reason": v["why"]})
    for other in pool_sessions(pool_dir):
        if other != session and _view(pfs, other, now)["alive"]:
            return ""
    return NO_LIVE_SESSION


def pool_wait(pool_dir, where, timeout=None, poll=0.05):
    """Wait for the result of a pool_submit command wherever it was moved;
    returns the result dict (any status). As every master's pool wait
    (PROTOCOL.md section 18.6) it ends at once with SessionGone
    (session_missing) when the session holding the command was deleted,
    and with RunnerGone (runner_not_alive) when a dead session claimed it
    and the pool does not respawn, or after 10 s when it is queued in a
    dead session and no session is alive to take it; PoolWaitTimeout after
    timeout seconds.
    Commands queued in a dead session are moved by the Go master's heal
    (master pool heal --every, adapt, or its pool wait), not here."""
    deadline = None if timeout is None else time.monotonic() + timeout
    next_check = time.monotonic() + 0.05  # A short command's wait pays for no look (as Go's).
    stuck_since = None
    while True:
        sdir, name = pool_locate(pool_dir, where)
        res = _fs.SessionFS(sdir).read_json_quiet("result", name, 64 << 20)
        if res is not None:
            return res
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + 1.0
            try:
                why = _stuck(pool_dir, where, sdir, name)
                if not why:
                    stuck_since = None
                elif stuck_since is None:
                    stuck_since = time.monotonic()
                elif time.monotonic() - stuck_since > STUCK_FOR:
                    raise RunnerGone("command %s: %s" % (where["cmd_id"], why),
                                     context={"cmd_id": where["cmd_id"], "reason": why})
            except PoolError:
                res = _fs.SessionFS(sdir).read_json_quiet("result", name, 64 << 20)
                if res is not None:  # Its result came meanwhile.
                    return res
                raise
        if deadline is not None and time.monotonic() > deadline:
            raise PoolWaitTimeout("no result for %s within %ss" % (where["cmd_id"], timeout),
                                  context={"cmd_id": where["cmd_id"]})
        time.sleep(poll)


def main(argv=None):
    """The small command line of skillpilot_pool.py (pick, submit)."""
    import sys
    argv = sys.argv if argv is None else argv
    if len(argv) >= 3 and argv[1] == "pick":
        print(pool_pick(argv[2], argv[3] if len(argv) > 3 else None))
    elif len(argv) >= 4 and argv[1] == "submit":
        w = pool_submit(argv[2], argv[3], argv[4] if len(argv) > 4 else None)
        print(w["session"], w["cmd_id"])
    else:
        sys.stderr.write("usage: skillpilot_pool.py pick POOL [KEY] | submit POOL PAYLOAD [KEY]\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
