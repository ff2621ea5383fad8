"""Waiting for a run's next trusted model over lensemble-verifyd's event
stream (GET /events, Server-Sent Events) rather than polling."""

import json
import time
import urllib.error
import urllib.parse
import urllib.request

from . import _daemon
from ._errors import UNTRUSTED, VerificationError

# The daemon comments every event_keepalive seconds (15 by default) on an
# idle stream: this long without a byte, the connection is taken for dead.
READ_TIMEOUT = 60.0
# A dropped stream is opened again after this, doubling up to RETRY_MAX.
RETRY_MIN = 1.0
RETRY_MAX = 30.0


class _Lost(Exception):
    """The daemon no longer holds events the stream asked for."""


def sse_events(lines):
    """(id, event, data) for each event of a text/event-stream given as an
    iterable of byte lines, data lines joined; (None, None, None) for a
    comment (the daemon's keepalive), so that a caller can watch the clock."""
    eid = event = None
    data = []
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if data:
                yield eid, event or "message", "\n".join(data)
            eid = event = None
            data = []
        elif line.startswith(":"):
            yield None, None, None
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                eid = value
            elif field == "event":
                event = value
            elif field == "data":
                data.append(value)


def _is_hash(h):
    return isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)


def _later(base, run, head, after_round, timeout):
    """The head when it is of a later round and the daemon trusts it now."""
    if not isinstance(head, dict) or not _is_hash(head.get("content_hash")):
        return None
    r = head.get("round_index")
    if isinstance(r, bool) or not isinstance(r, int) or r <= after_round:
        return None
    try:
        _daemon.check_status(base, head["content_hash"], timeout)
    except VerificationError:
        return None
    return {"run": run, "round_index": r, "content_hash": head["content_hash"]}


def _current(base, run, timeout):
    q = urllib.parse.urlencode({"run": run, "limit": 1})
    ans = _daemon.get_json(base, "/chain?" + q, timeout)
    return ans.get("committed_head") if isinstance(ans, dict) else None


def wait_for_head(daemon, run=".", after_round=None, timeout=None):
    """Wait until lensemble-verifyd trusts an artifact of `run` (its
    directory relative to the store, "." for the root) of a round above
    `after_round` (by default the round of the run's head now), and return
    that head: {"run", "round_index", "content_hash"}.

    The event stream is opened first and the current head read after, so
    no head is missed in between; each head event is checked with GET
    /artifact/<hash> (it must say trusted) before it is returned; a dropped
    stream is opened again with Last-Event-ID. Load the model it names with
    ``load_verified(path, daemon=..., expect=head["content_hash"])``.

    Raises ValueError for bad arguments, TimeoutError when no such head
    came within `timeout` seconds (None: wait for ever), and
    VerificationError (code "untrusted") when the daemon answers an error.
    """
    base = _daemon.check_url(daemon)
    if after_round is not None and (isinstance(after_round, bool) or not isinstance(after_round, int)):
        raise TypeError("after_round must be an integer")
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout must be positive")
    run = "." if run in ("", ".") else run
    deadline = None if timeout is None else time.monotonic() + timeout
    last_id, retry, check_now = None, RETRY_MIN, True

    def left():
        if deadline is None:
            return READ_TIMEOUT
        rest = deadline - time.monotonic()
        if rest <= 0:
            raise TimeoutError("no trusted head of run %s after round %s within %s s"
                               % (run, after_round, timeout))
        return min(rest, READ_TIMEOUT)

    while True:
        headers = {"Accept": "text/event-stream"}
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        req = urllib.request.Request(base + "/events", headers=headers)
        try:
            with urllib.request.build_opener(_daemon._Redirects).open(req, timeout=left()) as resp:
                retry = RETRY_MIN
                if check_now:
                    head = _current(base, run, left())
                    if after_round is None:
                        after_round = head["round_index"] if isinstance(head, dict) else -1
                    found = _later(base, run, head, after_round, left())
                    if found:
                        return found
                    check_now = False
                for eid, event, data in sse_events(resp):
                    last_id = eid if eid is not None else last_id
                    if event == "lost":
                        raise _Lost()
                    if event == "head":
                        try:
                            head = json.loads(data)
                        except ValueError:
                            head = None
                        if isinstance(head, dict) and head.get("run") == run:
                            found = _later(base, run, head, after_round, left())
                            if found:
                                return found
                    left()
        except _Lost:
            check_now = True
            continue
        except urllib.error.HTTPError as e:
            e.close()
            if e.code != 503:     # 503: too many streams now; try again
                raise VerificationError(UNTRUSTED, "the daemon at %s answered %d to GET /events"
                                        % (base, e.code)) from None
        except (urllib.error.URLError, OSError):
            pass                  # not reachable, or the stream ended: again
        time.sleep(min(retry, left()))
        retry = min(retry * 2, RETRY_MAX)
