#!/usr/bin/env python3
"""Ask lensemble-verifyd whether a model may be loaded (standard library only).

As a module::

    from check_before_load import assert_trusted, CheckError

    status = assert_trusted("https://verifyd.example.org:8420", global_model_hash,
                            round=round_close["round_index"])
    # returns the daemon's status object; raises CheckError (or a subclass)
    # when the model must not be loaded

As a command, the same as check-before-load.sh::

    check_before_load.py [-w SECONDS] [-C CAFILE] URL HASH [ROUND]

The daemon re-hashes the artifact now (POST /verify), so the answer is about
the bytes in its store at this moment, not a cached verdict. A model is fit
to load only when the verdict is "ok" (the bytes are right) AND "trusted" is
true (verified, lineage intact, committed by its run).

A refusal prints the daemon's untrusted_reason as it gives it, and says
NOT TRUSTED only when the daemon's "trusted" is false (a trusted artifact
that fails this check, e.g. against the RoundClose, is DO NOT LOAD).

Exit status (and the exception raised by assert_trusted):
  0  trusted
  1  not fit to load (NotTrusted): failed verification, not committed,
     contradicts the RoundClose, or its lineage is broken
  2  usage error (ValueError)
  3  unknown (UnknownArtifact): no artifact in the daemon's store claims HASH
  4  no answer (NoAnswer): unreachable, an error status, or the verification
     did not finish within the wait
"""

import argparse
import json
import re
import ssl
import sys
import urllib.error
import urllib.request

__all__ = ["assert_trusted", "explain", "headline", "CheckError", "NotTrusted", "UnknownArtifact",
           "NoAnswer", "main"]

_HASH = re.compile(r"[0-9a-f]{64}")
_EPILOG = """\
The daemon re-hashes the artifact now (POST /verify). A model is fit to
load only when the verdict is "ok" and "trusted" is true; a refusal prints
the daemon's untrusted_reason as it gives it.

exit status:
  0  trusted: load it
  1  not fit to load: failed verification, not committed, contradicts the
     RoundClose, or its lineage is broken
  2  usage error
  3  unknown: no artifact in the daemon's store claims HASH
  4  no answer: unreachable, an error status, or not finished within -w
Anything but 0 means: do not load."""


class CheckError(Exception):
    """The model must not be loaded. `status` is the daemon's answer, if any."""

    exit_code = 4

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class NotTrusted(CheckError):
    """The daemon knows the artifact, and it is not fit to load."""

    exit_code = 1

    @property
    def reasons(self):
        return explain(self.status or {})


class UnknownArtifact(CheckError):
    """No artifact in the daemon's store claims the hash."""

    exit_code = 3


class NoAnswer(CheckError):
    """No verdict: unreachable, an error status, or not finished in time."""

    exit_code = 4


def explain(status):
    """Why a status object is not fit to load, one line each: first the
    daemon's own untrusted_reason, verbatim, then what the status says."""
    lines = []
    if status.get("trusted") is not True and status.get("untrusted_reason") is not None:
        lines.append("untrusted_reason: %s" % status.get("untrusted_reason"))
    if status.get("verdict") != "ok":
        lines.append("verdict: %s" % status.get("verdict"))
    lines.extend("reason: %s" % r for r in status.get("reasons") or [])
    if status.get("state") != "verified":
        line = "state: %s" % status.get("state")
        if status.get("code"):
            line += " (%s: %s)" % (status["code"], status.get("detail"))
        lines.append(line)
    chain = status.get("chain") or {}
    if chain.get("status") != "intact":
        lines.append("lineage: %s" % chain.get("status"))
        for b in chain.get("breaks") or []:
            lines.append("  breaks at %s (round %s): %s"
                         % (b.get("content_hash"), b.get("round_index"), b.get("reason")))
    commitment = status.get("commitment")
    header_round = (status.get("header") or {}).get("round_index")
    if commitment is None and header_round == 0:
        lines.append("commitment: none; no round commits round 0: the operator must pin it "
                     "(genesis_hash)")
    elif commitment is None:
        lines.append("commitment: none; no trusted commitment names a hash for round %s"
                     % (header_round - 1 if isinstance(header_round, int) else "?"))
    elif commitment.get("matches") is not True:
        by = "commitment: %s (%s)" % (commitment.get("source"), commitment.get("where"))
        if commitment.get("global_model_hash") != status.get("content_hash"):
            lines.append("%s commits %s for round %s, not this artifact"
                         % (by, commitment.get("global_model_hash"),
                            commitment.get("round_index")))
        elif commitment.get("equivocation") is True:
            lines.append("%s names this artifact for round %s, but the round is an "
                         "equivocation: another commitment names another hash"
                         % (by, commitment.get("round_index")))
        else:
            lines.append("%s names this artifact for round %s, but does not count under "
                         "the daemon's commitment_policy" % (by, commitment.get("round_index")))
    lines.append("trusted: %s" % json.dumps(status.get("trusted")))
    return lines


def headline(hash, status):
    """The first line of a refusal, true to the daemon's "trusted" flag."""
    if status.get("content_hash") != hash:
        return "DO NOT LOAD: %s: the daemon answered for %s" % (hash, status.get("content_hash"))
    if status.get("trusted") is not True:
        return "NOT TRUSTED: %s" % hash
    return ("DO NOT LOAD: %s: the daemon trusts this artifact, but its verdict on this "
            "check is %s" % (hash, status.get("verdict")))


def _error_detail(body):
    try:
        err = json.loads(body)["error"]
        return "%s: %s" % (err.get("code"), err.get("detail"))
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", "replace") if isinstance(body, bytes) else str(body)[:200]


def assert_trusted(url, hash, round=None, wait=120, cafile=None, timeout=None):
    """Return the daemon's status object if the artifact `hash` is fit to load.

    url: the daemon, e.g. "https://verifyd.example.org:8420".
    hash: the content hash you were told (a RoundClose's global_model_hash).
    round: that RoundClose's round_index; the daemon then also checks that
        `hash` is the artifact of round `round` + 1.
    wait: seconds the daemon may take to re-verify (0-300).
    cafile: CA certificate file for an HTTPS daemon.
    timeout: socket timeout in seconds (default: wait + 30).

    Raises ValueError for bad arguments, NotTrusted, UnknownArtifact or
    NoAnswer (all CheckError) when the model must not be loaded.
    """
    if not isinstance(hash, str) or not _HASH.fullmatch(hash):
        raise ValueError("hash must be 64 lowercase hex characters")
    if round is not None and (isinstance(round, bool) or not isinstance(round, int) or round < 0):
        raise ValueError("round must be a non-negative integer")
    if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= 300:
        raise ValueError("wait must be 0 to 300 seconds")
    if round is None:
        body = {"content_hash": hash}
    else:
        body = {"schema_version": 2, "kind": "round_close", "round_index": round,
                "global_model_hash": hash}
    req = urllib.request.Request(
        "%s/verify?wait=%d" % (url.rstrip("/"), wait),
        data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"})
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    try:
        with urllib.request.urlopen(req, timeout=timeout or wait + 30, context=context) as resp:
            code, data = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        code, data = e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        raise NoAnswer("cannot reach %s: %s" % (url, getattr(e, "reason", e))) from e

    if code == 202:
        raise NoAnswer("the verification of %s did not finish within %d s; try again"
                       % (hash, wait))
    if code == 404:
        raise UnknownArtifact("no artifact in the daemon's store claims %s (%s)"
                              % (hash, _error_detail(data)))
    if code != 200:
        raise NoAnswer("the daemon answered %d (%s)" % (code, _error_detail(data)))
    try:
        status = json.loads(data)
    except ValueError as e:
        raise NoAnswer("the daemon's answer is not JSON") from e
    if not isinstance(status, dict):
        raise NoAnswer("the daemon's answer is not a JSON object")
    if status.get("content_hash") != hash:
        raise NotTrusted("the daemon answered for %s, not %s"
                         % (status.get("content_hash"), hash), status)
    if status.get("trusted") is not True:
        raise NotTrusted("%s is not trusted: %s" % (hash, "; ".join(explain(status))), status)
    if status.get("verdict") != "ok":
        raise NotTrusted("%s must not be loaded: the daemon trusts it, but its verdict on this "
                         "check is %s: %s" % (hash, status.get("verdict"),
                                              "; ".join(explain(status))), status)
    return status


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Exit 0 only if lensemble-verifyd re-verifies HASH and trusts it.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG)
    p.add_argument("-w", dest="wait", type=int, default=120, metavar="SECONDS",
                   help="seconds the daemon may take to re-verify (0-300, default 120)")
    p.add_argument("-C", dest="cafile", help="CA certificate file for an HTTPS daemon")
    p.add_argument("url", metavar="URL", help="the daemon, e.g. https://verifyd.example.org:8420")
    p.add_argument("hash", metavar="HASH", help="the content hash you were told")
    p.add_argument("round", metavar="ROUND", nargs="?", type=int,
                   help="the RoundClose round_index, when you have the message")
    args = p.parse_args(argv)
    try:
        status = assert_trusted(args.url, args.hash, args.round, args.wait, args.cafile)
    except ValueError as e:
        p.error(str(e))
    except NotTrusted as e:
        if not e.status:
            print("NOT TRUSTED: %s" % e, file=sys.stderr)
            return e.exit_code
        print(headline(args.hash, e.status), file=sys.stderr)
        # A status object about another artifact says nothing about this one.
        if e.status.get("content_hash") == args.hash:
            for line in explain(e.status):
                print("  " + line, file=sys.stderr)
        return e.exit_code
    except UnknownArtifact as e:
        print("UNKNOWN: %s" % e, file=sys.stderr)
        return e.exit_code
    except NoAnswer as e:
        print("NO ANSWER: %s" % e, file=sys.stderr)
        return e.exit_code
    c = status.get("commitment") or {}
    chain = status.get("chain") or {}
    print("TRUSTED: %s (round %s, committed by %s %s, lineage of %s from %s)"
          % (status["content_hash"], (status.get("header") or {}).get("round_index"),
             c.get("source"), c.get("where"), chain.get("length"), chain.get("root")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
