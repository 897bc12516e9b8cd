"""Names of a session (PROTOCOL.md sections 2, 3 and 5) and seq allocation."""

import os
import re
import secrets
import time
from typing import Optional, Tuple

from . import _fs
from .errors import MasterError, UsageError

PROTOCOL_VERSION = 1
SEQ_WIDTH = 10

DIR_QUEUE, DIR_INFLIGHT, DIR_RESULT, DIR_OUTPUT = "queue", "inflight", "result", "output"
DIR_CTL, DIR_ACK, DIR_STATE, DIR_SEQ, DIR_LOG = "ctl", os.path.join("ctl", "ack"), "state", "seq", "log"
FILE_STATE = os.path.join("state", "state.json")
FILE_HEARTBEAT = os.path.join("state", "heartbeat.json")
FILE_LEASE = os.path.join("state", "lease.json")
FILE_LOCK = os.path.join("state", "runner.lock")
FILE_SPOOL = os.path.join("log", "session.out")
FILE_SEQ_HINT = os.path.join("seq", "hint")

_CMD_ID = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")
_NAME = re.compile(r"(cmd|req)_([0-9]{1,18})_(.+)\.json\Z", re.S)


def valid_id(cmd_id: str) -> bool:
    """A safe cmd_id or req_id: 1-128 of [A-Za-z0-9._-], not "." or ".."."""
    return bool(_CMD_ID.match(cmd_id)) and cmd_id not in (".", "..")


def command_name(seq: int, cmd_id: str) -> str:
    """cmd_<seq, 10 digits>_<cmd_id>.json"""
    return "cmd_%0*d_%s.json" % (SEQ_WIDTH, seq, cmd_id)


def request_name(seq: int, req_id: str) -> str:
    """req_<seq, 10 digits>_<req_id>.json: a control request in ctl/."""
    return "req_%0*d_%s.json" % (SEQ_WIDTH, seq, req_id)


def parse_name(name: str, prefix: str = "cmd") -> Optional[Tuple[int, str]]:
    """(seq, id) of cmd_<seq>_<id>.json (or req_...), None for any other
    name. The id is matched exactly: cmd_1_a_b.json has id "a_b", never "b"."""
    m = _NAME.match(name)
    if not m or m.group(1) != prefix or not valid_id(m.group(3)):
        return None
    return int(m.group(2)), m.group(3)


def output_name(command_file: str) -> str:
    return command_file[:-len(".json")] + ".out"


def new_id() -> str:
    """A UUID version 7: 48 bits of Unix milliseconds, then random bits,
    so that ids sort by creation time."""
    b = bytearray(secrets.token_bytes(16))
    b[0:6] = int(time.time() * 1000).to_bytes(6, "big")
    b[6] = (b[6] & 0x0F) | 0x70
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def now_iso() -> str:
    """RFC 3339 UTC with milliseconds (informational timestamps)."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def _read_hint(session_dir: str) -> Optional[int]:
    try:
        data = _fs.read_small(os.path.join(session_dir, FILE_SEQ_HINT), 64)
    except MasterError:
        return None
    if data is None:
        return None
    text = data.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() and len(text) <= 18 else None


def _max_reserved(seq_dir: str) -> int:
    try:
        names = os.listdir(seq_dir)
    except FileNotFoundError as e:
        raise MasterError("no seq/ directory in the session: %s" % seq_dir) from e
    return max([int(n) for n in names if n.isdigit() and len(n) <= 18] or [0])


def alloc_seq(session_dir: str) -> int:
    """Reserve the next seq by exclusive create in seq/ (PROTOCOL.md section
    5): the same scheme as every SkillPilot master, on any host."""
    seq_dir = os.path.join(session_dir, DIR_SEQ)
    n = _read_hint(session_dir)
    if n is None:
        n = _max_reserved(seq_dir)
    tries = 0
    while True:
        n += 1
        try:
            if _fs.create_exclusive(os.path.join(seq_dir, "%0*d" % (SEQ_WIDTH, n))):
                break
        except OSError as e:
            raise MasterError("reserve seq %d: %s" % (n, e)) from e
        tries += 1
        if tries % 64 == 0:
            n = max(n, _max_reserved(seq_dir))
    cur = _read_hint(session_dir)
    if cur is None or cur < n:
        try:
            _fs.write_atomic(os.path.join(session_dir, FILE_SEQ_HINT), b"%d\n" % n)
        except OSError:
            pass  # Best effort: a lost hint costs the next allocator a few EEXIST.
    return n


def check_id(cmd_id: str, what: str = "cmd_id") -> str:
    if not isinstance(cmd_id, str) or not valid_id(cmd_id):
        raise UsageError("invalid %s %r: 1-128 characters of [A-Za-z0-9._-]" % (what, cmd_id))
    return cmd_id
