#!/usr/bin/env python3
"""Wait for a run's next trusted model over lensemble-verifyd's event stream
(GET /events), instead of polling; standard library only.

As a module::

    from wait_for_head import wait_for_head, NoAnswer

    head = wait_for_head("https://verifyd.example.org:8420", after_round=4)
    # {"run": ".", "round_index": 5, "content_hash": "..."} as soon as the
    # daemon trusts an artifact of a later round than 4 in the run

As a command::

    wait_for_head.py [-r RUN] [-a ROUND] [-t SECONDS] [-C CAFILE] URL

prints that head as one line of JSON. Without -a it waits for the next head
after the one the run has now.

The stream is opened first and the run's current head read after (GET
/chain?run=), so that a head that comes in between is not missed. A head
event is a hint: before it is returned, GET /artifact/<hash> must say
"trusted": true. A dropped connection is opened again with Last-Event-ID,
so no event is missed meanwhile; when the daemon no longer holds the
events asked for (a "lost" event), the current head is read again.

What it returns is the hash to load, not a licence to load whatever bytes
you have: check before loading (check_before_load.py), or load through
load_verified (clients/python).

Exit status (and the exception raised by wait_for_head):
  0  a trusted head of a later round
  2  usage error (ValueError)
  4  no answer (NoAnswer): the daemon could not be reached, answered an
     error, or no such head came within the timeout
"""

import argparse
import json
import re
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["wait_for_head", "NoAnswer", "main"]

_HASH = re.compile(r"[0-9a-f]{64}")
# The daemon comments every event_keepalive seconds (15 by default) on an
# idle stream: this long without a byte, the connection is taken for dead.
READ_TIMEOUT = 60
RETRY_MIN, RETRY_MAX = 1, 30
MAX_ANSWER = 1 << 20
_EPILOG = """\
Prints the head as one line of JSON: {"content_hash", "round_index", "run"}.
Every head it prints was checked with GET /artifact/<hash> ("trusted": true);
check the bytes you load as well (check_before_load.py, load_verified).

exit status:
  0  a trusted head of a later round
  2  usage error
  4  no answer: the daemon could not be reached, answered an error, or no
     such head came within the timeout"""


class NoAnswer(Exception):
    """No trusted head: unreachable, an error status, or the timeout passed."""

    exit_code = 4


class _Lost(Exception):
    """The daemon no longer holds events the stream asked for."""


def _get(base, path, timeout, context):
    req = urllib.request.Request(base + path, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return json.loads(resp.read(MAX_ANSWER))
    except urllib.error.HTTPError as e:
        raise NoAnswer("the daemon answered %d to GET %s" % (e.code, path)) from e
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise NoAnswer("GET %s: %s" % (path, getattr(e, "reason", e))) from e


def current_head(base, run, timeout=30, context=None):
    """The run's committed head now, {"round_index", "content_hash"}, or None."""
    q = urllib.parse.urlencode({"run": run, "limit": 1})
    ans = _get(base, "/chain?" + q, timeout, context)
    return ans.get("committed_head") if isinstance(ans, dict) else None


def trusted(base, content_hash, timeout=30, context=None):
    """Whether the daemon trusts the artifact now."""
    try:
        st = _get(base, "/artifact/" + content_hash, timeout, context)
    except NoAnswer:
        return False
    return isinstance(st, dict) and st.get("trusted") is True


def events(resp):
    """(id, event, data) for each event of an open text/event-stream, a field
    split over several data lines joined; (None, None, None) for a comment
    (the daemon's keepalive), so that the caller can watch the clock."""
    eid = event = None
    data = []
    for raw in resp:
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


def _later(base, run, head, after_round, timeout, context):
    """The head if it is a trusted one of a later round in the run."""
    if not isinstance(head, dict) or not isinstance(head.get("round_index"), int):
        return None
    h = head.get("content_hash")
    if head["round_index"] <= after_round or not isinstance(h, str) or not _HASH.fullmatch(h):
        return None
    if not trusted(base, h, timeout, context):
        return None
    return {"run": run, "round_index": head["round_index"], "content_hash": h}


def wait_for_head(url, run=".", after_round=None, timeout=None, cafile=None):
    """The first trusted head of `run` of a round above `after_round` (by
    default the round of the run's head now), as {"run", "round_index",
    "content_hash"}. Waits at most `timeout` seconds (None: for ever).
    Raises ValueError for bad arguments and NoAnswer when none comes."""
    if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ValueError("url must be an http:// or https:// URL")
    if after_round is not None and (isinstance(after_round, bool) or not isinstance(after_round, int)):
        raise ValueError("after_round must be an integer")
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout must be positive")
    run = "." if run in ("", ".") else run
    base = url.rstrip("/")
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    deadline = None if timeout is None else time.monotonic() + timeout
    last_id, retry, check_now = None, RETRY_MIN, True

    def left():
        if deadline is None:
            return READ_TIMEOUT
        rest = deadline - time.monotonic()
        if rest <= 0:
            raise NoAnswer("no trusted head of run %s after round %s within %s s"
                           % (run, after_round, timeout))
        return min(rest, READ_TIMEOUT)

    while True:
        headers = {"Accept": "text/event-stream"}
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        req = urllib.request.Request(base + "/events", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=left(), context=context) as resp:
                retry = RETRY_MIN
                if check_now:
                    head = current_head(base, run, left(), context)
                    if after_round is None:
                        after_round = head["round_index"] if head else -1
                    found = _later(base, run, head, after_round, left(), context)
                    if found:
                        return found
                    check_now = False
                for eid, event, data in events(resp):
                    left()
                    last_id = eid if eid is not None else last_id
                    if event == "lost":
                        raise _Lost()
                    if event != "head":
                        continue
                    try:
                        head = json.loads(data)
                    except ValueError:
                        continue
                    if not isinstance(head, dict) or head.get("run") != run:
                        continue
                    found = _later(base, run, head, after_round, left(), context)
                    if found:
                        return found
        except _Lost:
            check_now = True
            continue
        except urllib.error.HTTPError as e:
            if e.code not in (503,):
                raise NoAnswer("the daemon answered %d to GET /events" % e.code) from e
        except (urllib.error.URLError, OSError) as e:
            if deadline is not None and time.monotonic() >= deadline:
                raise NoAnswer("no trusted head of run %s within %s s" % (run, timeout)) from e
        # The stream ended (the daemon stopped, or cut a client too slow),
        # or could not be opened: again shortly, from the last event seen.
        time.sleep(min(retry, left()))
        retry = min(retry * 2, RETRY_MAX)


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Wait until lensemble-verifyd trusts a later round of a run; print it.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG)
    p.add_argument("-r", dest="run", default=".", metavar="RUN",
                   help="the run: its directory relative to the store, '.' for the root (default)")
    p.add_argument("-a", dest="after", type=int, metavar="ROUND",
                   help="wait for a round above this one (default: the run's head now)")
    p.add_argument("-t", dest="timeout", type=float, metavar="SECONDS",
                   help="give up after this many seconds (default: never)")
    p.add_argument("-C", dest="cafile", help="CA certificate file for an HTTPS daemon")
    p.add_argument("url", metavar="URL", help="the daemon, e.g. https://verifyd.example.org:8420")
    args = p.parse_args(argv)
    try:
        head = wait_for_head(args.url, args.run, args.after, args.timeout, args.cafile)
    except ValueError as e:
        p.error(str(e))
    except NoAnswer as e:
        print("NO ANSWER: %s" % e, file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    print(json.dumps(head, sort_keys=True))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
