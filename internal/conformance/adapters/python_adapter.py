"""Conformance adapter for the Python master (see internal/conformance/doc.go).

Reads one step per line on stdin ("op key=value ..."; *_b64 values are
base64) and prints one JSON outcome per line on stdout. The session
directory is argv[1]; it may not exist yet (the runner creates it).
"""

import base64
import json
import os
import re
import sys
from typing import Any, Dict, Optional

import skillpilot as sp
from skillpilot import pool as sp_pool

SESSION = sys.argv[1]
_session: Optional[sp.Session] = None
_keeper: Optional[sp.LeaseKeeper] = None
POOL = os.path.dirname(os.path.abspath(SESSION))  # A pool scenario's session is POOL/s00.
_where: Dict[str, Dict[str, Any]] = {}  # pool_submit's reply by cmd_id, for pool_wait.


def session() -> sp.Session:
    global _session
    if _session is None:
        _session = sp.Session(SESSION)
    return _session


def ms(step: Dict[str, str], key: str) -> Optional[float]:
    return int(step[key]) / 1000.0 if key in step else None


def raw(text: str) -> Any:
    """A raw value (timeout_s, ttl, cols, ...) as a Python caller holds
    it: true/false a bool, an integer an int, what float() reads a float
    (inf, nan, .5, 1e999 included), anything else the str itself."""
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"[+-]?[0-9]+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def command_options(step: Dict[str, str]) -> Dict[str, Any]:
    """The step's command options, the same for submit, run and
    pool_submit (one table: _command.SUBMIT_OPTIONS)."""
    opts: Dict[str, Any] = {"timeout": ms(step, "timeout_ms"), "cmd_id": step.get("id")}
    if "timeout_s" in step:
        opts["timeout"] = raw(step["timeout_s"])
    if "trace_id" in step:
        opts["trace_id"] = step["trace_id"]
    if "labels" in step:
        opts["labels"] = dict(kv.split("=", 1) for kv in step["labels"].split(","))
    if "max_output_bytes" in step:
        opts["max_output_bytes"] = raw(step["max_output_bytes"])
    if "cancel_policy" in step:
        opts["cancel_policy"] = step["cancel_policy"]
    return opts


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def text(step: Dict[str, str], key: str) -> str:
    return base64.b64decode(step[key + "_b64"]).decode("utf-8")


def of_result(res: Dict[str, Any]) -> Dict[str, Any]:
    err = res.get("error") or {}
    out = {"outcome": res.get("status"), "exit": {"ok": 0, "error": 1, "timeout": 3, "cancelled": 4}[res["status"]],
           "cmd_id": res.get("cmd_id"), "value": res.get("value"), "error_message": err.get("message", ""),
           "output_b64": b64(session().output_bytes(res))}
    if res.get("status") != "ok":  # The context of the ResultError the master raises for it.
        out["context"] = sp.errors.result_error(res).context
    return out


def of_error(e: sp.MasterError) -> Dict[str, Any]:
    if isinstance(e, sp.ResultError):
        return of_result(e.result)
    out: Dict[str, Any] = {"outcome": e.code, "exit": e.exit_code, "message": str(e)}
    if e.context:
        out["context"] = e.context
    reply = getattr(e, "reply", None)
    if isinstance(reply, dict) and reply.get("cmd_state"):
        out["cmd_state"] = reply["cmd_state"]
    if hasattr(e, "resume_cursor"):
        out["resume_cursor"] = e.resume_cursor  # type: ignore[attr-defined]
        out["reply"] = {"resume_cursor": e.resume_cursor}  # type: ignore[attr-defined]
    return out


def cursor_fields(obj: Any) -> Dict[str, Any]:
    """The resume_cursor of a submit or status reply, when it has one."""
    if isinstance(obj, dict):
        return {"resume_cursor": obj["resume_cursor"]} if "resume_cursor" in obj else {}
    return {"resume_cursor": obj.resume_cursor} if hasattr(obj, "resume_cursor") else {}


def of_reply(reply: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"outcome": reply["outcome"], "exit": 0}
    for k in ("bytes", "match_start", "match_end", "cmd_state"):
        if reply.get(k) is not None:
            out[k] = reply[k]
    return out


def do(step: Dict[str, str]) -> Dict[str, Any]:
    global _keeper
    op = step["op"]
    wfr = ms(step, "wait_for_runner_ms")
    if op == "submit" or op == "run":
        opts = command_options(step)
        if op == "run":  # Session.run itself: a status other than ok raises ResultError (of_error).
            return of_result(session().run(text(step, "payload"), wait_timeout=ms(step, "wait_timeout_ms"),
                                           wait_for_runner=wfr, **opts))
        sub = session().submit(text(step, "payload"), **opts)
        return {"outcome": "queued", "exit": 0, "cmd_id": sub.cmd_id, "reply": cursor_fields(sub)}
    if op == "pool_submit":
        w = sp_pool.pool_submit(POOL, text(step, "payload"), affinity=step.get("affinity"), **command_options(step))
        _where[w["cmd_id"]] = w
        return {"outcome": "queued", "exit": 0, "cmd_id": w["cmd_id"], "session": w["session"]}
    if op == "pool_wait":
        return of_result(sp_pool.pool_wait(POOL, _where[step["id"]], timeout=ms(step, "wait_timeout_ms")))
    if op == "wait":
        return of_result(session().wait(step["id"], timeout=ms(step, "wait_timeout_ms"), check=False,
                                        wait_for_runner=wfr))
    if op == "cancel":
        reply = session().cancel(step.get("id"), timeout=ms(step, "wait_timeout_ms"), wait_for_runner=wfr)
        return {"outcome": reply["outcome"], "exit": 0}
    if op == "stop":
        reply = session().stop(force=step.get("force") == "1", wait=step.get("wait") == "1",
                               timeout=ms(step, "wait_timeout_ms"), wait_for_runner=wfr)
        return {"outcome": reply["outcome"], "exit": 0}
    if op == "status":
        st = session().status()
        outcome = "ok" if st["can_serve"] else ("cannot_serve" if st["alive"] else "not_alive")
        return {"outcome": outcome, "exit": 0 if st["can_serve"] else 5, "alive": st["alive"],
                "phase": st["phase"], "can_serve": st["can_serve"], "reply": cursor_fields(st)}
    if op == "lease":
        ttl = raw(step["ttl"]) if "ttl" in step else int(step["ttl_ms"]) / 1000.0
        if step.get("keep") == "1":
            _keeper = session().keep_lease(ttl)
        else:
            session().write_lease(ttl)
        return {"outcome": "ok", "exit": 0}
    if op == "lease_stop":
        if _keeper is not None:
            _keeper.stop()
            _keeper.check()
            _keeper = None
        return {"outcome": "ok", "exit": 0}
    if op == "waitfor":
        m = session().wait_for(text(step, "re"), int(step.get("from", "0")), ms(step, "wait_timeout_ms"), wfr)
        return {"outcome": "matched", "exit": 0, "start": m.start, "end": m.end, "resume_cursor": m.resume_cursor,
                "match_b64": b64(m.text), "reply": m.to_dict()}
    if op == "send":
        data = text(step, "text") + ("" if step.get("no_newline") == "1" else "\n")
        et = raw(step["expect_timeout"]) if "expect_timeout" in step else ms(step, "expect_timeout_ms")
        reply = session().send(step["id"], data, expect=text(step, "expect") if "expect_b64" in step else None,
                               expect_timeout=et, secret=step.get("secret") == "1",
                               timeout=ms(step, "wait_timeout_ms"), wait_for_runner=wfr)
        return of_reply(reply)
    if op == "signal":
        return of_reply(session().signal(step["id"], step["sig"], timeout=ms(step, "wait_timeout_ms"),
                                         wait_for_runner=wfr))
    if op == "resize":
        return of_reply(session().resize(raw(step["cols"]), raw(step["rows"]), timeout=ms(step, "wait_timeout_ms"),
                                         wait_for_runner=wfr))
    if op == "output":
        data = session().output_bytes(step["id"], int(step.get("offset", 0)), int(step.get("length", -1) or -1))
        return {"outcome": "ok", "exit": 0, "output_b64": b64(data)}
    if op == "withdraw":
        reply = session().withdraw(step["id"])
        name = step["id"].rsplit("/", 1)[-1]  # A command file's name names its cmd_id (cmd_<seq>_<id>.json).
        want = re.sub(r"^cmd_[0-9]+_(.*)\.json$", r"\1", name)
        if reply.get("withdrawn") is not True or reply.get("cmd_id") != want or not reply.get("name"):
            return {"outcome": "bad_reply", "exit": 1, "message": "withdraw returned %r" % (reply,)}
        return {"outcome": "withdrawn", "exit": 0}
    if op == "ready":
        s = session()
        s.ready(ms(step, "wait_timeout_ms") or 60.0, wait_for_runner=wfr)
        return {"outcome": "ready", "exit": 0}
    return {"outcome": "usage", "exit": 2, "message": "unknown op %s" % op}


def main() -> None:
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        step = {"op": words[0]}
        step.update(w.split("=", 1) for w in words[1:])  # type: ignore[arg-type]
        try:
            out = do(step)
        except sp.MasterError as e:
            out = of_error(e)
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
