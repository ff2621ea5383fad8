"""python3 -m lensemble_verify_client [--expect HASH] [--daemon URL
[--public-key PEM]] ARTIFACT...

Verifies each artifact (a directory, or an uncompressed tar of one) as
load_verified does (framework=None) and prints one JSON object per
artifact, like ``lensemble-verify --json``. Exit 0 when every artifact
verified, 1 when one did not, 2 on a usage error or when --public-key
needs the cryptography package and it is not installed.
"""

import argparse
import json
import sys
import time

from . import MissingPackage, VerificationError, load_verified


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m lensemble_verify_client",
                                description="Verify Lensemble artifacts as load_verified does.")
    p.add_argument("--expect", metavar="HASH", help="the hash the artifact must have")
    p.add_argument("--daemon", metavar="URL", help="lensemble-verifyd base URL")
    p.add_argument("--public-key", metavar="PEM", help="the daemon's Ed25519 public key")
    p.add_argument("--timeout", type=float, default=30.0, help="HTTP timeout in seconds")
    p.add_argument("paths", nargs="+", metavar="ARTIFACT",
                   help="an artifact directory, or an uncompressed tar of one")
    a = p.parse_args(argv)
    failed = 0
    for path in a.paths:
        t0 = time.monotonic()
        try:
            r = load_verified(path, daemon=a.daemon, expect=a.expect,
                              public_key=a.public_key, framework=None, timeout=a.timeout)
        except MissingPackage as e:
            print("%s: %s" % (p.prog, e.detail), file=sys.stderr)
            return 2
        except VerificationError as e:
            failed += 1
            out = {"path": path, "ok": False, "code": e.code, "detail": e.detail}
        except (ValueError, TypeError, OSError, ImportError) as e:
            print("%s: %s" % (p.prog, e), file=sys.stderr)
            return 2
        else:
            out = {"path": path, "ok": True, "content_hash": r.content_hash,
                   "round_index": r.round_index, "parent_hash": r.parent_hash,
                   "schema_version": r.schema_version, "tensors": len(r), "bytes": r.nbytes,
                   "trust": r.trust, "seconds": round(time.monotonic() - t0, 6)}
        print(json.dumps(out), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
