"""The parts of a status a person reads, and its text layout: the same
fields (Session.status keys, as the Go master's Status JSON) and the same
lines as the Go ``master status`` (master/cli_status.go, writeStatus).
"""

import datetime
import json
from typing import Any, Dict, List, Optional

from . import _fs, _names
from .errors import MasterError

MAX_STATE = 1 << 20



#: The running row of a busy runner with no command running (the Go CLI's busyNothing).
BUSY_NOTHING = "nothing: the tool is being started again (it ended with the last command); the next command waits for it"

def parse_time(v: Any) -> Optional[float]:
    """Seconds since the epoch of a protocol timestamp (RFC 3339 text, or a
    number of Unix milliseconds); None when absent or unreadable."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v) / 1000.0
    if not isinstance(v, str) or not v:
        return None
    t = v.strip().replace("Z", "+00:00").replace("z", "+00:00")
    date, dot, rest = t.partition(".")
    if dot:  # At most 6 fractional digits for fromisoformat.
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        t = date + "." + (rest[:i] + "000000")[:6] + rest[i:]
    try:
        d = datetime.datetime.fromisoformat(t)
    except ValueError:
        return None
    if d.tzinfo is None:
        d = d.replace(tzinfo=datetime.timezone.utc)
    return d.timestamp()


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


int_of = _int  # For session.py.


# state.json's retention (PROTOCOL.md section 23), in protocol.Retention's order.
_RETENTION_KEYS = ("keep_results_s", "keep_last", "prune_grace_s", "keep_ids", "max_spool_bytes", "max_meta_bytes",
                   "kept", "pruned", "spool_cut")


def _num(v: Any) -> Any:
    """A JSON number as the Go master re-encodes it (0 for anything else)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return 0
    return int(v) if float(v).is_integer() else v


def details(sfs: _fs.SessionFS, out: Dict[str, Any], state: Dict[str, Any], hb: Dict[str, Any]) -> None:
    """Fill out (a status dict) as the Go master's Status does: the running
    command's elapsed time, last line and quiet time, the counts of skipped
    and rejected commands, a full disk, the lease and the last five results."""
    for key in ("skipped_count", "rejected_count"):
        if _int(state.get(key)):
            out[key] = _int(state.get(key))
    if state.get("disk_full") is True:
        out["disk_full"] = True
    cur = out.get("current_cmd_id")
    if cur:
        # All three times are the runner's clock: no skew.
        now = parse_time(hb.get("timestamp")) or 0.0
        upd = parse_time(state.get("updated_at"))
        if upd is not None and upd > now:
            now = upd
        start = parse_time(state.get("current_start_ts"))
        elapsed = max(now - start, 0.0) if start is not None else max(now, 0.0)
        out["current_elapsed_ns"] = round_ns(int(elapsed * 1e9), 1000000)
        line = state.get("current_last_line")
        if isinstance(line, str):
            out["current_last_line"] = line
        else:
            out["current_last_line"] = _last_line(sfs, str(cur))
        if not out["current_last_line"]:
            del out["current_last_line"]
        if isinstance(state.get("current_trace_id"), str) and state["current_trace_id"]:
            out["current_trace_id"] = state["current_trace_id"]
        if isinstance(state.get("current_labels"), dict) and state["current_labels"]:
            out["current_labels"] = state["current_labels"]
        # The heartbeat and state.json each carry the count as of their own
        # write; it only grows while the command runs: the larger is newer.
        n = _int(state.get("current_output_bytes"))
        if cur == state.get("current_cmd_id") and n > _int(out.get("current_output_bytes")):
            out["current_output_bytes"] = n
        quiet = state.get("current_quiet_ms")
        if isinstance(quiet, (int, float)) and not isinstance(quiet, bool):
            out["current_quiet_ns"] = int(quiet) * 1000000
    lease = _lease(sfs, hb, str(state.get("lease_error") or ""))
    if lease is not None:
        out["lease"] = lease
    ret = state.get("retention")
    if isinstance(ret, dict):
        # protocol.Retention's fields, as the Go master marshals them.
        out["retention"] = {k: _num(ret.get(k)) for k in _RETENTION_KEYS}
    last = last_results(sfs, 5)
    if last:
        out["last_results"] = last


def _last_line(sfs: _fs.SessionFS, cmd_id: str) -> str:
    """The last non-empty line of the running command's output (its last
    4 KiB), cut at 256 bytes."""
    try:
        for d in (_names.DIR_INFLIGHT, _names.DIR_QUEUE, _names.DIR_RESULT):
            for n in sfs.list(d):
                p = _names.parse_name(n)
                if p is not None and p[1] == cmd_id:
                    size = sfs.stat(_names.DIR_OUTPUT, _names.output_name(n)).st_size
                    b = sfs.read_range(_names.DIR_OUTPUT, _names.output_name(n), max(size - 4096, 0), 4096)
                    b = b.rstrip(b"\r\n")
                    i = max(b.rfind(b"\r"), b.rfind(b"\n"))
                    if i >= 0:
                        b = b[i + 1:]
                    return b[-256:].decode("utf-8", "replace")
    except (OSError, MasterError):
        pass
    return ""


def _lease(sfs: _fs.SessionFS, hb: Dict[str, Any], runner_err: str) -> Optional[Dict[str, Any]]:
    """The lease as the Go master's leaseStatus sees it (remaining_ns is an
    estimate on the session's filesystem clock), or None without one."""
    ls: Dict[str, Any] = {"remaining_ns": 0}
    if runner_err:
        ls["error"] = runner_err
    try:
        data = sfs.read(*_names.LEASE, limit=1 << 16)
    except (OSError, MasterError) as e:
        ls["error"] = str(e)
        return ls
    if data is None:
        return ls if runner_err else None
    try:
        lease = json.loads(data.decode("utf-8"))
        if not isinstance(lease, dict):
            raise ValueError("lease.json is not a JSON object")
        ttl = lease.get("ttl_ms", 0) or 0
        if isinstance(ttl, bool) or not isinstance(ttl, int):
            raise ValueError("ttl_ms must be an integer")
        if ttl < 0:
            raise ValueError("ttl_ms must not be negative")
        expires = parse_time(lease.get("expires_at"))
        if ttl == 0 and expires is None:
            raise ValueError("a lease needs expires_at or ttl_ms")
    except (UnicodeDecodeError, ValueError) as e:
        ls.setdefault("error", "lease.json: %s" % e)
        return ls
    ls["lease_id"] = str(lease.get("lease_id") or "")
    if ttl:
        ls["ttl_ms"] = ttl
    if lease.get("owner"):
        ls["owner"] = str(lease["owner"])
    if ttl > 0:
        try:
            age = sfs.stat(*_names.HEARTBEAT).st_mtime_ns - sfs.stat(*_names.LEASE).st_mtime_ns
            ls["remaining_ns"] = ttl * 1000000 - max(age, 0)
        except (OSError, MasterError):
            pass
    else:
        ts = parse_time(hb.get("timestamp"))
        if ts is not None and expires is not None:
            ls["remaining_ns"] = int((expires - ts) * 1e9)
    return ls


def last_results(sfs: _fs.SessionFS, n: int) -> List[Dict[str, Any]]:
    """The n results with the highest seqs, newest first."""
    try:
        names = sfs.list(_names.DIR_RESULT)
    except (OSError, MasterError):
        return []
    seqs = []
    for name in names:
        p = _names.parse_name(name)
        if p is not None and not name.startswith("."):
            seqs.append((p[0], name, p[1]))
    seqs.sort(reverse=True)
    out = []
    for seq, name, cid in seqs[:n]:
        try:
            r = sfs.read_json(_names.DIR_RESULT, name)
        except (OSError, MasterError):
            continue
        if r is None:
            continue
        brief: Dict[str, Any] = {"cmd_id": r.get("cmd_id") or cid, "seq": seq, "status": r.get("status") or "",
                                 "duration_ms": _int((r.get("stats") or {}).get("duration_ms"))
                                 if isinstance(r.get("stats"), dict) else 0}
        if r.get("exit_reason"):
            brief["exit_reason"] = r["exit_reason"]
        if r.get("end_ts"):
            brief["end_ts"] = r["end_ts"]
        if isinstance(r.get("trace_id"), str) and r["trace_id"]:
            brief["trace_id"] = r["trace_id"]
        out.append(brief)
    return out


# --- the text layout (master/cli_status.go) ------------------------------

def round_ns(ns: int, m: int) -> int:
    """Go's Duration.Round: to a multiple of m, halves away from zero."""
    if m <= 0:
        return ns
    r = abs(ns) % m
    q = abs(ns) - r + (m if r + r >= m else 0)
    return q if ns >= 0 else -q


def _frac(v: int, unit: int) -> str:
    whole, rest = divmod(v, unit)
    if not rest:
        return str(whole)
    digits = len(str(unit)) - 1
    return "%d.%s" % (whole, ("%0*d" % (digits, rest)).rstrip("0"))


def go_duration(ns: int) -> str:
    """A duration in nanoseconds as Go's time.Duration.String prints it."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1000:
        return "%s%dns" % (sign, u)
    if u < 1000000:
        return sign + _frac(u, 1000) + "µs"
    if u < 1000000000:
        return sign + _frac(u, 1000000) + "ms"
    secs, sub = divmod(u, 1000000000)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    text = _frac(s * 1000000000 + sub, 1000000000) + "s"
    if h:
        return "%s%dh%dm%s" % (sign, h, m, text)
    if m:
        return "%s%dm%s" % (sign, m, text)
    return sign + text


def round_dur(ns: int) -> str:
    """cli_status.go's roundDur."""
    if ns >= 60 * 1000000000:
        return go_duration(round_ns(ns, 1000000000))
    if ns >= 1000000000:
        return go_duration(round_ns(ns, 100000000))
    return go_duration(round_ns(ns, 1000000))


def size(n: int) -> str:
    if n >= 1 << 30:
        return "%.1f GiB" % (n / float(1 << 30))
    if n >= 1 << 20:
        return "%.1f MiB" % (n / float(1 << 20))
    if n >= 1 << 10:
        return "%.1f KiB" % (n / float(1 << 10))
    return "%d bytes" % n


def _retention_policy(r: Dict[str, Any]) -> str:
    """cli_status.go's retentionPolicy."""
    parts = []
    keep_ns = int(float(r.get("keep_results_s") or 0) * 1e9)  # Go converts by truncating.
    day = 24 * 3600 * 1000000000
    if keep_ns >= day and keep_ns % day == 0:
        parts.append("results for %dd" % (keep_ns // day))
    elif keep_ns > 0:
        parts.append("results for " + round_dur(keep_ns))
    if _int(r.get("keep_last")) > 0:
        parts.append("the last %d" % _int(r.get("keep_last")))
    if _int(r.get("max_spool_bytes")) > 0:
        parts.append("spool " + size(_int(r.get("max_spool_bytes"))))
    if _int(r.get("max_meta_bytes")) > 0:
        parts.append("event log " + size(_int(r.get("max_meta_bytes"))))
    grace = int(float(r.get("prune_grace_s") or 0) * 1e9)
    return "keeps " + ", ".join(parts) + " (grace %s)" % round_dur(grace)


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def _go_quote(s: str) -> str:
    """Go's strconv.Quote for the text a status prints (printable
    characters as they are, the rest escaped)."""
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\a":
            out.append("\\a")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\v":
            out.append("\\v")
        elif c < 0x20 or c == 0x7F:
            out.append("\\x%02x" % c)
        elif ch == "\ufffd" or ch.isprintable() or ch == " ":
            out.append(ch)
        elif c < 0x10000:
            out.append("\\u%04x" % c)
        else:
            out.append("\\U%08x" % c)
    out.append('"')
    return "".join(out)


def format_status(st: Dict[str, Any]) -> str:
    """The compact, aligned view of a status: the lines of the Go CLI's
    ``master status`` (writeStatus), in the same order and words."""
    lines: List[str] = []

    def row(label: str, text: str) -> None:
        lines.append("%-9s %s\n" % (label, text))

    row("session", str(st.get("dir", "")))
    where = ""
    if _int(st.get("runner_pid")):
        where = ", pid %d on %s" % (_int(st.get("runner_pid")), st.get("runner_host") or "")
    row("runner", "%s (%s)%s" % ("alive" if st.get("alive") else "NOT ALIVE", st.get("alive_reason") or "", where))
    phase = str(st.get("phase") or "") or "-"
    if st.get("reason"):
        phase += ": " + str(st["reason"])
    if st.get("phase") == "error" or (st.get("alive") and not st.get("can_serve")):
        phase += "  (cannot serve commands)"
    # A runner that is not alive wrote its last state.json before it died.
    stale = not st.get("alive") and st.get("phase") not in (None, "", "stopped")
    if stale:
        phase += "  (as last written: the runner is not alive)"
    row("phase", phase)
    if st.get("disk_full"):
        row("disk", "FULL: output files and log/session.out are not written until there is room (results are)")
    starts, tool_pid = _int(st.get("tool_starts")), _int(st.get("tool_pid"))
    if starts > 0 or tool_pid:
        tool = "%s, started %d time%s" % (st.get("kind") or "-", starts, _plural(starts))
        if tool_pid:
            tool += ", pid %d" % tool_pid
        if starts > 1:
            tool += " (restarted: what earlier starts of the tool held is gone)"
        row("tool", tool)
    if st.get("current_cmd_id") and stale:
        row("running", "%s when the runner was last seen; a runner started later ends it (runner_restarted)"
            % st["current_cmd_id"])
    elif st.get("current_cmd_id"):
        run = "%s for %s, %s of output" % (st["current_cmd_id"], round_dur(_int(st.get("current_elapsed_ns"))),
                                           size(_int(st.get("current_output_bytes"))))
        if st.get("current_quiet_ns") is not None:
            run += ", quiet " + round_dur(_int(st.get("current_quiet_ns")))
        if st.get("current_trace_id"):
            run += ", trace " + str(st["current_trace_id"])
        if st.get("current_last_line"):
            run += " at: " + _go_quote(str(st["current_last_line"]))
        row("running", run)
    elif st.get("phase") == "busy" and not stale:
        # Busy with nothing running: a tool that died with its command (a
        # Ctrl-C killed plain tclsh, signal KILL) is being started again
        # (PROTOCOL.md section 8), right after a cancel or a timeout.
        row("running", BUSY_NOTHING)
    else:
        row("running", "nothing")
    row("queue", "%d waiting" % _int(st.get("queue_depth")))
    lease = st.get("lease")
    if not lease:
        row("lease", "none (the runner runs until stopped)")
    elif not lease.get("lease_id"):
        row("lease", "unreadable: %s" % (lease.get("error") or ""))
    else:
        rem = _int(lease.get("remaining_ns"))
        left = "expired" if rem < 0 else round_dur(rem) + " left"
        extra = ""
        if _int(lease.get("ttl_ms")) > 0:
            extra = " (ttl %s)" % round_dur(_int(lease["ttl_ms"]) * 1000000)
        if lease.get("error"):
            extra += "; runner says: " + str(lease["error"])
        row("lease", "%s: %s%s" % (lease["lease_id"], left, extra))
    done_n = _int(st.get("commands_done"))
    # commands_done counts this runner's commands (0 again at each start).
    done = "%d command%s since the runner started" % (done_n, _plural(done_n))
    skipped, rejected = _int(st.get("skipped_count")), _int(st.get("rejected_count"))
    # Not counted in commands_done: say so, naming only what is not zero
    # (the Go CLI's notCounted).
    parts = []
    if skipped > 0:
        parts.append("%d skipped as already done" % skipped)
    if rejected > 0:
        parts.append("%d rejected as invalid" % rejected)
    if parts:
        done += " (not counting " + ", ".join(parts) + ")"
    row("done", done)
    ret = st.get("retention")
    if isinstance(ret, dict):
        kept = _int(ret.get("kept"))
        row("retention", "%s; %d result%s kept, %d pruned by this runner"
            % (_retention_policy(ret), kept, _plural(kept), _int(ret.get("pruned"))))
    for i, r in enumerate(st.get("last_results") or []):
        status = str(r.get("status") or "")
        if status != "ok" and r.get("exit_reason"):
            status += " (%s)" % r["exit_reason"]
        trace = ", trace %s" % r["trace_id"] if r.get("trace_id") else ""
        row("last" if i == 0 else "", "%-34s %8s  %s%s" % (status, round_dur(_int(r.get("duration_ms")) * 1000000),
                                                         r.get("cmd_id") or "", trace))
    return "".join(lines)
