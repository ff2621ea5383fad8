"""The daemon path against a stub lensemble-verifyd (a local http.server):
its status object, and its signed verdict, with keys made and envelopes
signed by the openssl command line, not by the client's code."""

import base64
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import threading
import unittest

from helpers import TempDirTest, write_artifact

from lensemble_verify_client import VerificationError, load_verified

os.environ["no_proxy"] = "127.0.0.1,localhost"
OPENSSL = shutil.which("openssl")
try:
    import cryptography  # noqa: F401
except ImportError:
    cryptography = None

PAYLOAD_TYPE = "application/vnd.in-toto+json"


class Stub(http.server.ThreadingHTTPServer):
    """Answers GET path with routes[path] = (status, body); 404 otherwise."""

    daemon_threads = True

    def __init__(self):
        self.routes = {}
        self.requests = []
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests.append(self.path)
        status, body = self.server.routes.get(
            self.path, (404, {"error": {"code": "not_found", "detail": "no artifact claims it"}}))
        if not isinstance(body, bytes):
            body = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def status_object(h, trusted=True, state="verified", untrusted_reason=None):
    st = {
        "content_hash": h, "state": state, "code": None, "detail": None,
        "copies": [{"path": "run/round-00001", "state": state, "code": None, "detail": None,
                    "verified_at": "2026-06-02T12:00:01Z", "duration_ms": 3}],
        "header": {"schema_version": 2, "round_index": 0, "parent_hash": None,
                   "wmcp_version": "wmcp-1.0.0", "config_hash": "cfg",
                   "param_groups": ["encoder", "predictor"], "created_at": "2026-06-02T12:00:00Z"},
        "tensors": 5, "bytes": 40,
        "commitment": {"round_index": 0, "source": "pinned", "where": "api", "matches": True}
        if trusted else None,
        "chain": {"status": "intact", "length": 1, "root": h, "breaks": []},
        "trusted": trusted,
    }
    if untrusted_reason is not None:
        st["untrusted_reason"] = untrusted_reason
    return st


def statement(h, trusted=True, subjects=None, untrusted_reason=None):
    st = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": subjects or [{"name": "run/round-00001", "digest": {"sha256": h}}],
        "predicateType": "urn:lensemble-verifyd:verdict:v1",
        "predicate": {
            "state": "verified", "trusted": trusted,
            "chain": {"status": "intact", "length": 1, "root": h},
            "commitment": {"round_index": 0, "source": "pinned", "where": "api",
                           "matches": True, "signed": False},
            "verified_at": "2026-06-02T12:00:01Z", "issued_at": "2026-06-02T12:00:02Z",
            "verifier": {"name": "lensemble-verifyd", "version": "0.1.0"},
        },
    }
    if untrusted_reason is not None:
        st["predicate"]["untrusted_reason"] = untrusted_reason
    return st


class Key:
    """An Ed25519 key pair made by openssl genpkey; signs with pkeyutl."""

    def __init__(self, tmp, name):
        self.tmp = tmp
        self.priv = os.path.join(tmp, name + ".key")
        self.pub = os.path.join(tmp, name + ".pub")
        self._run("genpkey", "-algorithm", "ed25519", "-out", self.priv)
        self._run("pkey", "-in", self.priv, "-pubout", "-out", self.pub)
        der = self._run("pkey", "-in", self.priv, "-pubout", "-outform", "DER")
        self.keyid = hashlib.sha256(der[-32:]).hexdigest()

    def _run(self, *args):
        r = subprocess.run([OPENSSL] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        if r.returncode != 0:
            raise AssertionError("openssl %s: %s" % (" ".join(args), r.stderr.decode()))
        return r.stdout

    def sign(self, data):
        p = os.path.join(self.tmp, "msg.bin")
        with open(p, "wb") as f:
            f.write(data)
        return self._run("pkeyutl", "-sign", "-inkey", self.priv, "-rawin", "-in", p)


def pae(ptype, payload):
    t = ptype.encode("utf-8")
    return b"DSSEv1 " + str(len(t)).encode() + b" " + t + b" " + \
        str(len(payload)).encode() + b" " + payload


def envelope(payload_obj, signers, ptype=PAYLOAD_TYPE, keyids=None, tamper=None):
    payload = json.dumps(payload_obj, separators=(",", ":")).encode("utf-8")
    sigs = []
    for i, k in enumerate(signers):
        sig = k.sign(pae(ptype, payload))
        sigs.append({"keyid": keyids[i] if keyids else k.keyid,
                     "sig": base64.b64encode(sig).decode("ascii")})
    if tamper is not None:
        payload = tamper(payload)
    return {"payloadType": ptype, "payload": base64.b64encode(payload).decode("ascii"),
            "signatures": sigs}


class DaemonTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.srv = Stub()
        t = threading.Thread(target=self.srv.serve_forever, args=(0.05,), daemon=True)
        t.start()
        self.addCleanup(self.srv.server_close)
        self.addCleanup(self.srv.shutdown)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        self.d = os.path.join(self.tmp, "art")
        _, self.h = write_artifact(self.d)

    def route(self, path, status, body):
        self.srv.routes[path] = (status, body)

    def refused(self, code="untrusted", **kw):
        kw.setdefault("framework", None)
        with self.assertRaises(VerificationError) as cm:
            load_verified(self.d, daemon=self.url, **kw)
        self.assertEqual(cm.exception.code, code, cm.exception.detail)
        return cm.exception


class Status(DaemonTest):
    def test_trusted(self):
        self.route("/artifact/" + self.h, 200, status_object(self.h))
        r = load_verified(self.d, daemon=self.url + "/", framework=None)
        self.assertEqual((r.content_hash, r.trust), (self.h, "daemon"))
        self.assertEqual(self.srv.requests, ["/artifact/" + self.h])

    def test_not_trusted(self):
        self.route("/artifact/" + self.h, 200, status_object(self.h, trusted=False))
        e = self.refused()
        self.assertIn("not committed", e.detail)

    def test_legacy_untrusted(self):
        st = status_object(self.h, trusted=False)
        st["legacy"], st["migrated_from"], st["untrusted_reason"] = True, 1, "legacy"
        self.route("/artifact/" + self.h, 200, st)
        e = self.refused()
        self.assertIn("untrusted_reason legacy", e.detail)
        self.assertEqual(e.untrusted_reason, "legacy")

    def test_failed_verdict(self):
        self.route("/artifact/" + self.h, 200,
                   status_object(self.h, trusted=False, state="failed", untrusted_reason="failed"))
        e = self.refused()
        self.assertEqual(e.untrusted_reason, "failed")

    def test_no_reason_given(self):
        self.route("/artifact/" + self.h, 200, status_object(self.h, trusted=False))
        self.assertIsNone(self.refused().untrusted_reason)

    def test_trusted_must_be_true_itself(self):
        st = status_object(self.h)
        st["trusted"] = "true"
        self.route("/artifact/" + self.h, 200, st)
        self.refused()

    def test_unknown_to_the_daemon(self):
        self.refused()

    def test_answer_about_another_hash(self):
        self.route("/artifact/" + self.h, 200, status_object("1" * 64))
        self.refused()

    def test_error_status(self):
        self.route("/artifact/" + self.h, 503,
                   {"error": {"code": "overloaded", "detail": "try later"}})
        e = self.refused()
        self.assertIn("overloaded", e.detail)

    def test_not_json(self):
        self.route("/artifact/" + self.h, 200, b"<html>trusted</html>")
        self.refused()

    def test_duplicate_keys(self):
        # A lenient parser takes the last "trusted", which says true.
        body = json.dumps(status_object(self.h, trusted=False))[:-1] + ', "trusted": true}'
        self.route("/artifact/" + self.h, 200, body.encode())
        e = self.refused()
        self.assertIn("duplicate", e.detail)

    def test_answer_too_large(self):
        st = status_object(self.h)
        st["padding"] = "x" * 70000
        self.route("/artifact/" + self.h, 200, st)
        self.refused()

    def test_unreachable(self):
        self.srv.shutdown()
        self.srv.server_close()
        e = self.refused(timeout=5)
        self.assertIn("cannot get an answer", e.detail)

    def test_trusted_hash_but_bytes_changed(self):
        # The daemon vouches for the hash the header claims; the bytes here
        # are not those: refused by the hash, whatever the daemon says.
        self.route("/artifact/" + self.h, 200, status_object(self.h))
        p = os.path.join(self.d, "weights.safetensors")
        with open(p, "r+b") as f:
            f.seek(-2, 2)
            b = f.read(1)
            f.seek(-2, 2)
            f.write(bytes([b[0] ^ 1]))
        self.refused("checkpoint_integrity")

    def test_expect_is_what_the_daemon_is_asked(self):
        other = "2" * 64
        self.route("/artifact/" + other, 200, status_object(other))
        self.refused("checkpoint_integrity", expect=other)
        self.assertEqual(self.srv.requests, ["/artifact/" + other])

    def test_invalid_header_asks_nothing(self):
        with open(os.path.join(self.d, "header.json"), "w") as f:
            f.write("{}")
        self.refused("schema_version_mismatch")
        self.assertEqual(self.srv.requests, [])

    def test_urls(self):
        for bad in ("file:///etc/passwd", "ftp://127.0.0.1/", "127.0.0.1:8420", "http://"):
            with self.assertRaises(ValueError, msg=bad):
                load_verified(self.d, daemon=bad, framework=None)


@unittest.skipIf(OPENSSL is None, "no openssl command")
@unittest.skipIf(cryptography is None, "the cryptography package is not installed")
class Attestation(DaemonTest):
    @classmethod
    def setUpClass(cls):
        cls.keydir = __import__("tempfile").mkdtemp(prefix="lvc-keys.")
        cls.key = Key(cls.keydir, "daemon")
        cls.other = Key(cls.keydir, "other")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.keydir, True)

    def attest(self, env, status=200):
        self.route("/artifact/%s/attestation" % self.h, status, env)

    def test_signed_by_the_daemon_key(self):
        self.attest(envelope(statement(self.h), [self.key]))
        r = load_verified(self.d, daemon=self.url, public_key=self.key.pub, framework=None)
        self.assertEqual((r.content_hash, r.trust), (self.h, "attestation"))
        self.assertEqual(self.srv.requests, ["/artifact/%s/attestation" % self.h])

    def test_key_as_pem_bytes(self):
        self.attest(envelope(statement(self.h), [self.key]))
        with open(self.key.pub, "rb") as f:
            pem = f.read()
        r = load_verified(self.d, daemon=self.url, public_key=pem, framework=None)
        self.assertEqual(r.trust, "attestation")

    def test_signed_by_another_key(self):
        self.attest(envelope(statement(self.h), [self.other]))
        e = self.refused(public_key=self.key.pub)
        self.assertIn(self.key.keyid, e.detail)

    def test_another_key_under_our_key_id(self):
        self.attest(envelope(statement(self.h), [self.other], keyids=[self.key.keyid]))
        self.refused(public_key=self.key.pub)

    def test_other_signature_first(self):
        self.attest(envelope(statement(self.h), [self.other, self.key]))
        r = load_verified(self.d, daemon=self.url, public_key=self.key.pub, framework=None)
        self.assertEqual(r.trust, "attestation")

    def test_signed_but_not_trusted(self):
        # The daemon's predicate carries no untrusted_reason: the refusal
        # takes it from the status object, and says that it is unsigned.
        self.attest(envelope(statement(self.h, trusted=False), [self.key]))
        self.route("/artifact/" + self.h, 200,
                   status_object(self.h, trusted=False, untrusted_reason="uncommitted"))
        e = self.refused(public_key=self.key.pub)
        self.assertEqual(e.untrusted_reason, "uncommitted")
        self.assertIn("signed verdict does not vouch for " + self.h, e.detail)
        self.assertIn("the daemon's unsigned status object gives untrusted_reason uncommitted",
                      e.detail)
        self.assertEqual(self.srv.requests,
                         ["/artifact/%s/attestation" % self.h, "/artifact/" + self.h])

    def test_signed_reason_in_the_predicate(self):
        self.attest(envelope(statement(self.h, trusted=False, untrusted_reason="chain_broken"),
                             [self.key]))
        self.route("/artifact/" + self.h, 200,
                   status_object(self.h, trusted=False, untrusted_reason="uncommitted"))
        e = self.refused(public_key=self.key.pub)
        self.assertEqual(e.untrusted_reason, "chain_broken")
        self.assertIn("untrusted_reason chain_broken", e.detail)
        self.assertNotIn("unsigned", e.detail)
        self.assertEqual(self.srv.requests, ["/artifact/%s/attestation" % self.h])

    def test_signed_refusal_without_a_reason_to_be_had(self):
        for status in ((404, {"error": {"code": "not_found", "detail": "gone"}}),
                       (200, status_object(self.h)),
                       (200, status_object("4" * 64, trusted=False, untrusted_reason="failed"))):
            with self.subTest(status=status[0]):
                self.attest(envelope(statement(self.h, trusted=False), [self.key]))
                self.route("/artifact/" + self.h, *status)
                e = self.refused(public_key=self.key.pub)
                self.assertIsNone(e.untrusted_reason)
                self.assertIn("signed verdict does not vouch", e.detail)

    def test_signed_about_another_artifact(self):
        self.attest(envelope(statement("3" * 64), [self.key]))
        self.refused(public_key=self.key.pub)

    def test_one_subject_of_another_artifact(self):
        subjects = [{"name": "a", "digest": {"sha256": self.h}},
                    {"name": "b", "digest": {"sha256": "3" * 64}}]
        self.attest(envelope(statement(self.h, subjects=subjects), [self.key]))
        self.refused(public_key=self.key.pub)

    def test_wrong_payload_type(self):
        self.attest(envelope(statement(self.h), [self.key],
                             ptype="application/vnd.lensemble.roundclose+json"))
        self.refused(public_key=self.key.pub)

    def test_payload_changed_after_signing(self):
        self.attest(envelope(statement(self.h, trusted=False), [self.key],
                             tamper=lambda p: p.replace(b'"trusted":false', b'"trusted":true')))
        self.refused(public_key=self.key.pub)

    def test_not_verified_yet(self):
        self.attest({"error": {"code": "not_verified", "detail": "verifying"}}, status=409)
        e = self.refused(public_key=self.key.pub)
        self.assertIn("not_verified", e.detail)
        self.assertIsNone(e.untrusted_reason)
        self.route("/artifact/" + self.h, 200, status_object(
            self.h, trusted=False, state="verifying", untrusted_reason="unverified"))
        e = self.refused(public_key=self.key.pub)
        self.assertIn("not_verified", e.detail)
        self.assertEqual(e.untrusted_reason, "unverified")
        self.assertIn("untrusted_reason unverified", e.detail)

    def test_unknown_envelope_field(self):
        env = envelope(statement(self.h), [self.key])
        env["note"] = "x"
        self.attest(env)
        self.refused(public_key=self.key.pub)

    def test_signature_not_base64(self):
        env = envelope(statement(self.h), [self.key])
        env["signatures"][0]["sig"] = "!!" + env["signatures"][0]["sig"]
        self.attest(env)
        self.refused(public_key=self.key.pub)

    def test_status_alone_does_not_do(self):
        # An unsigned "trusted": true is not asked for, nor enough, with a key.
        self.route("/artifact/" + self.h, 200, status_object(self.h))
        self.refused(public_key=self.key.pub)

    def test_attested_but_bytes_changed(self):
        self.attest(envelope(statement(self.h), [self.key]))
        with open(os.path.join(self.d, "weights.safetensors"), "r+b") as f:
            f.seek(-1, 2)
            f.write(b"\x55")
        self.refused("checkpoint_integrity", public_key=self.key.pub)

    def test_public_key_needs_daemon(self):
        with self.assertRaises(ValueError):
            load_verified(self.d, public_key=self.key.pub, framework=None)

    def test_not_an_ed25519_key(self):
        p = os.path.join(self.tmp, "ec.key")
        self.key._run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-out", p)
        pub = self.key._run("pkey", "-in", p, "-pubout")
        with self.assertRaises(ValueError):
            load_verified(self.d, daemon=self.url, public_key=pub, framework=None)
        with self.assertRaises(ValueError):
            load_verified(self.d, daemon=self.url, public_key=b"not a key", framework=None)


if __name__ == "__main__":
    unittest.main()
