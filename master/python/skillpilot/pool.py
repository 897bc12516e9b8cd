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
touch: both are the file server's time on NFS). Among alive sessions whose
phase is idle or busy (else among all alive ones) the least loaded wins:
queued commands plus claimed commands without a result; ties go to the
smallest name. An affinity key pins related commands to one session
(<pool>/affinity/<key>.json, created exclusively) while that session is
alive; a key whose session is not alive is pinned again.

The Go master also treats a free runner.lock on a local filesystem as
dead; this module does not probe locks, so it may still pick a session
whose runner was killed within the last ~3 s (its commands are then moved
by `master pool heal`). Moving commands out of dead sessions and respawning
are done by the Go master (`master pool heal`), not here.

The helpers below duplicate the few protocol primitives they need
(seq allocation, atomic writes) so that this file works next to any
version of skillpilot_master.py.
"""

import json
import os
import re
import secrets
import socket
import time

PROTOCOL_VERSION = 1
SEQ_WIDTH = 10
_NAME = re.compile(r"^s[0-9]+$")
_CMD = re.compile(r"^cmd_([0-9]{1,18})_([A-Za-z0-9._-]{1,128})\.json$")
_KEY = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class PoolError(Exception):
    code = "io_error"


class NoLiveSession(PoolError):
    """No session of the pool is alive (CLI exit 5, runner_not_alive)."""
    code = "runner_not_alive"


class PoolWaitTimeout(PoolError):
    code = "wait_timeout"


def _new_cmd_id():
    ms = int(time.time() * 1000)
    b = bytearray(ms.to_bytes(6, "big") + secrets.token_bytes(10))
    b[6] = (b[6] & 0x0F) | 0x70
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def _revalidate(d):
    try:
        os.close(os.open(d, os.O_RDONLY))
    except OSError:
        pass


def _read_json(path, limit=1 << 20):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            return None
        v = json.loads(data.decode("utf-8"))
        return v if isinstance(v, dict) else None
    except (OSError, ValueError):
        return None


def _write_atomic(path, data):
    d, base = os.path.split(path)
    tmp = os.path.join(d, ".%s.%d.%s.tmp" % (base, os.getpid(), secrets.token_hex(4)))
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
    os.rename(tmp, path)


def _alloc_seq(session):
    """PROTOCOL.md section 5: exclusive create of seq/<n>."""
    seqdir = os.path.join(session, "seq")
    os.makedirs(seqdir, exist_ok=True)

    def max_reserved():
        return max([int(n) for n in os.listdir(seqdir) if n.isdigit()] or [0])

    try:
        with open(os.path.join(seqdir, "hint")) as f:
            n = int(f.read().strip())
    except (OSError, ValueError):
        n = max_reserved()
    tries = 0
    while True:
        n += 1
        try:
            os.close(os.open(os.path.join(seqdir, "%0*d" % (SEQ_WIDTH, n)), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            tries += 1
            if tries % 64 == 0:
                n = max(n, max_reserved())
            continue
        try:
            with open(os.path.join(seqdir, "hint")) as f:
                cur = int(f.read().strip())
        except (OSError, ValueError):
            cur = -1
        if cur < n:
            try:
                _write_atomic(os.path.join(seqdir, "hint"), "%d\n" % n)
            except OSError:
                pass
        return n


def _commands(d):
    try:
        return [n for n in os.listdir(d) if _CMD.match(n)]
    except OSError:
        return []


def pool_sessions(pool_dir):
    """The pool's session names (s00, s01, ...) in name order."""
    return sorted(n for n in os.listdir(pool_dir)
                  if _NAME.match(n) and os.path.isdir(os.path.join(pool_dir, n)) and not os.path.islink(os.path.join(pool_dir, n)))


def _fs_now(pool_dir):
    """The filesystem's current time: touch <pool>/.clock (UTIME_NOW; on NFS
    the server sets it) and read its mtime."""
    p = os.path.join(pool_dir, ".clock")
    try:
        os.utime(p, None)
    except FileNotFoundError:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o600))
    return os.stat(p).st_mtime_ns / 1e9


def pool_views(pool_dir):
    """One dict per session: session, phase, alive, dead, queue_depth,
    inflight, load (see the module doc for the rules)."""
    now = _fs_now(pool_dir)
    out = []
    for name in pool_sessions(pool_dir):
        s = os.path.join(pool_dir, name)
        _revalidate(os.path.join(s, "state"))
        st = _read_json(os.path.join(s, "state", "state.json"))
        hb = _read_json(os.path.join(s, "state", "heartbeat.json"))
        queue = len(_commands(os.path.join(s, "queue")))
        inflight = len([n for n in _commands(os.path.join(s, "inflight"))
                        if not os.path.exists(os.path.join(s, "result", n))])
        v = {"session": name, "phase": None, "alive": False, "dead": True,
             "queue_depth": queue, "inflight": inflight, "load": queue + inflight}
        try:
            age = max(now - os.stat(os.path.join(s, "state", "heartbeat.json")).st_mtime_ns / 1e9, 0.0)
        except OSError:
            age = None
        if st is not None and hb is not None and age is not None:
            v["phase"] = st.get("phase")
            interval = max(hb.get("interval_ms") or 0, 100) / 1000.0
            window = 2 * interval + 1.0
            stopped = "stopped" in (st.get("phase"), hb.get("phase"))
            v["alive"] = not stopped and age <= window
            v["dead"] = stopped or age > max(10.0, window)
        out.append(v)
    return out


def _least_loaded(views, except_name=None):
    for want in (lambda v: v["alive"] and v["phase"] in ("idle", "busy"), lambda v: v["alive"]):
        best = None
        for v in views:
            if v["session"] != except_name and want(v) and (best is None or v["load"] < best["load"]):
                best = v
        if best is not None:
            return best
    return None


def _pin_path(pool_dir, key):
    return os.path.join(pool_dir, "affinity", key + ".json")


def _read_pin(pool_dir, key):
    _revalidate(os.path.join(pool_dir, "affinity"))
    pin = _read_json(_pin_path(pool_dir, key), 1 << 16)
    return pin.get("session") if pin else None


def _write_pin(pool_dir, key, session, replace):
    data = json.dumps({"protocol_version": PROTOCOL_VERSION, "key": key, "session": session,
                       "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    path = _pin_path(pool_dir, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if replace:
        _write_atomic(path, data)
        return session
    tmp = os.path.join(os.path.dirname(path), ".%s.%s.tmp" % (os.path.basename(path), secrets.token_hex(8)))
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
    try:
        os.link(tmp, path)
        return session
    except FileExistsError:
        return _read_pin(pool_dir, key)
    finally:
        os.unlink(tmp)


def pool_pick(pool_dir, affinity=None, views=None):
    """The session a command would go to now (a name such as "s01")."""
    if affinity is not None and not _KEY.match(affinity):
        raise ValueError("affinity key %r: use 1-128 characters of [A-Za-z0-9._-]" % affinity)
    views = pool_views(pool_dir) if views is None else views
    by_name = {v["session"]: v for v in views}
    pinned = None
    if affinity:
        pinned = _read_pin(pool_dir, affinity)
        if pinned in by_name and by_name[pinned]["alive"]:
            return pinned
    best = _least_loaded(views)
    if best is None:
        raise NoLiveSession("no live session in pool %s" % pool_dir)
    if affinity:
        won = _write_pin(pool_dir, affinity, best["session"], pinned is not None)
        if won in by_name and by_name[won]["alive"]:
            return won
    return best["session"]


def pool_submit(pool_dir, payload, affinity=None, kind="tcl", timeout=None, cancel_policy=None, cmd_id=None):
    """Queue payload in the session pool_pick chooses. Returns a dict with
    session, cmd_id and name (the file name in that session's queue/)."""
    session = pool_pick(pool_dir, affinity)
    sdir = os.path.join(pool_dir, session)
    cmd_id = cmd_id or _new_cmd_id()
    seq = _alloc_seq(sdir)
    cmd = {"protocol_version": PROTOCOL_VERSION, "cmd_id": cmd_id, "seq": seq, "kind": kind, "payload": payload,
           "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "submitter": "python-pool@%s:%d" % (socket.gethostname(), os.getpid())}
    if timeout:
        cmd["timeout_s"] = timeout
    if cancel_policy:
        cmd["cancel_policy"] = cancel_policy
    if affinity:
        cmd["affinity"] = affinity
    name = "cmd_%0*d_%s.json" % (SEQ_WIDTH, seq, cmd_id)
    _write_atomic(os.path.join(sdir, "queue", name), json.dumps(cmd))
    return {"session": session, "cmd_id": cmd_id, "name": name}


def pool_locate(pool_dir, where):
    """Follow forward/ records: (session directory, name) where the
    command is now."""
    sdir, name = os.path.join(pool_dir, where["session"]), where["name"]
    for _ in range(16):
        _revalidate(os.path.join(sdir, "result"))
        if os.path.exists(os.path.join(sdir, "result", name)):
            break
        fwd = _read_json(os.path.join(sdir, "forward", name), 1 << 16)
        if not fwd or not isinstance(fwd.get("to_name"), str) or os.path.basename(fwd["to_name"]) != fwd["to_name"]:
            break
        sdir, name = os.path.normpath(os.path.join(sdir, fwd["to_session"])), fwd["to_name"]
    return sdir, name


def pool_wait(pool_dir, where, timeout=None, poll=0.05):
    """Wait for the result of a pool_submit command wherever it was moved;
    returns the result dict (any status)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        sdir, name = pool_locate(pool_dir, where)
        res = _read_json(os.path.join(sdir, "result", name), 64 << 20)
        if res is not None:
            return res
        if deadline is not None and time.monotonic() > deadline:
            raise PoolWaitTimeout("no result for %s within %ss" % (where["cmd_id"], timeout))
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
