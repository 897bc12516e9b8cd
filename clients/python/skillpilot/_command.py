"""What the Python master writes into a file: numbers (PROTOCOL.md section
19.1, "Numbers") and the fields of a command (section 4), checked before
anything is written, by every door that queues one (Session.submit,
Session.run, pool.pool_submit).
"""

import json
import math
import numbers
from typing import Any, Dict, Optional, Union

from . import _names
from .errors import UsageError

#: The options of every door that queues a command: Session.submit and
#: pool.pool_submit take exactly these (a pool door has every option a
#: session door has; the pool's own is affinity). command_fields checks
#: them; tests hold both signatures to this table.
SUBMIT_OPTIONS = ("kind", "timeout", "cancel_policy", "cmd_id", "trace_id", "labels", "max_output_bytes")

CANCEL_POLICIES = ("ctrl_c", "terminate_tool", "terminate_session")

_INT64 = 1 << 63


def json_number(what: str, value: Any, integer: bool = False, lo: Optional[float] = None,
                hi: Optional[float] = None) -> Union[int, float]:
    """value, given to the option what, as a number JSON can hold, or
    UsageError naming the option and the value: the one way the Python
    master puts a number into a file. Refused: a bool (True is an int to
    Python, not a number to the runner), anything but an int or a float
    (a str included), inf and nan (json.dumps would write Infinity and
    NaN, which are not JSON), for integer a float or a value outside 64
    bits, and a value outside [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UsageError("%s %r: not a number" % (what, value))
    if integer:
        if not isinstance(value, numbers.Integral):
            raise UsageError("%s %r: not an integer" % (what, value))
        value = int(value)
        if not -_INT64 <= value < _INT64:
            raise UsageError("%s %r: does not fit in 64 bits" % (what, value))
    elif isinstance(value, numbers.Integral):
        value = int(value)
    else:
        value = float(value)
        if not math.isfinite(value):
            raise UsageError("%s %r: not a finite number (JSON has no Infinity or NaN)" % (what, value))
    if lo is not None and value < lo:
        raise UsageError("%s %r: must be at least %s" % (what, value, lo))
    if hi is not None and value > hi:
        raise UsageError("%s %r: must be at most %s" % (what, value, hi))
    return value


def runner_kind(sfs: Any) -> str:
    """The kind of the session's runner (its state.json), else tcl."""
    kind = (sfs.read_json_quiet(*_names.STATE) or {}).get("kind")
    return kind if _names.valid_kind(kind) else "tcl"


def dumps(obj: Dict[str, Any]) -> bytes:
    """A file's JSON: allow_nan=False, so a number that slipped past
    json_number fails here rather than reaching the file as Infinity."""
    return json.dumps(obj, allow_nan=False).encode("utf-8")


def command_fields(kind: str, timeout: Any = None, cancel_policy: Optional[str] = None, cmd_id: Optional[str] = None,
                   trace_id: Optional[str] = None, labels: Optional[Dict[str, str]] = None,
                   max_output_bytes: Any = None) -> Dict[str, Any]:
    """The command file's fields but seq, payload and the informational
    ones, from SUBMIT_OPTIONS (kind resolved by the caller): UsageError
    before anything is written."""
    if not _names.valid_kind(kind):
        raise UsageError("kind must be tcl, sh or a driver's kind (1-32 characters of [a-z0-9_-]), not %r" % (kind,))
    if cancel_policy is not None and cancel_policy not in CANCEL_POLICIES:
        raise UsageError("cancel_policy must be one of %s" % ", ".join(CANCEL_POLICIES))
    if timeout is not None:
        timeout = json_number("timeout", timeout, lo=0)
    if max_output_bytes is not None:
        max_output_bytes = json_number("max_output_bytes", max_output_bytes, integer=True, lo=0)
    _names.check_correlation(trace_id, labels)
    fields: Dict[str, Any] = {"cmd_id": _names.check_id(cmd_id) if cmd_id is not None else _names.new_id(), "kind": kind}
    if timeout:
        fields["timeout_s"] = timeout
    if cancel_policy:
        fields["cancel_policy"] = cancel_policy
    if max_output_bytes:
        fields["max_output_bytes"] = max_output_bytes
    if trace_id:
        fields["trace_id"] = trace_id
    if labels:
        fields["labels"] = dict(labels)
    return fields
