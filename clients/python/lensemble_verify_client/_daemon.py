"""Asking lensemble-verifyd about a content hash: its status object, or its
signed verdict (a DSSE envelope over an in-toto Statement, checked with an
Ed25519 public key)."""

import base64
import binascii
import hashlib
import os
import urllib.error
import urllib.parse
import urllib.request

from . import _json
from ._errors import UNTRUSTED, VerificationError, need

MAX_ANSWER = 64 * 1024
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:lensemble-verifyd:verdict:v1"
_ENVELOPE_FIELDS = {"payloadType", "payload", "signatures"}
_STATEMENT_FIELDS = {"_type", "subject", "predicateType", "predicate"}


def _untrusted(fmt, *args):
    raise VerificationError(UNTRUSTED, fmt % args if args else fmt)


def check_url(url):
    """The daemon's base URL: http or https, nothing else."""
    if not isinstance(url, str):
        raise TypeError("daemon must be a URL string such as 'http://127.0.0.1:8420'")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("daemon must be an http:// or https:// URL, not %r" % url)
    return url.rstrip("/")


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects to http and https only."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _error_detail(body):
    try:
        err = _json.loads(body)["error"]
        return "%s: %s" % (err["code"], err["detail"])
    except Exception:       # noqa: BLE001 - any body that is not the error object
        return None


def get_json(base, path, timeout):
    """GET base + path; the answer as strict JSON (at most 64 KiB)."""
    url = base + path
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.build_opener(_Redirects).open(req, timeout=timeout) as r:
            body = r.read(MAX_ANSWER + 1)
    except urllib.error.HTTPError as e:
        try:
            detail = _error_detail(e.read(MAX_ANSWER + 1))
        except OSError:
            detail = None
        finally:
            e.close()
        if e.code == 404:
            _untrusted("the daemon at %s knows no such artifact (%s)", base,
                       detail or "404 Not Found")
        err = VerificationError(UNTRUSTED, "the daemon at %s answered %d to GET %s (%s)"
                                % (base, e.code, path, detail or e.reason))
        err.http_status = e.code
        raise err
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        _untrusted("cannot get an answer from the daemon at %s: %s", base, reason)
    if len(body) > MAX_ANSWER:
        _untrusted("the daemon's answer to GET %s is larger than %d bytes", path, MAX_ANSWER)
    try:
        return _json.loads(body)
    except _json.JSONError as e:
        _untrusted("the daemon's answer to GET %s is not valid JSON (%s)", path, e)


def _why_not(obj):
    """A few words on why a status or verdict is not trusted."""
    parts = []
    if isinstance(obj, dict):
        if obj.get("untrusted_reason") is not None:
            parts.append("untrusted_reason %s" % obj.get("untrusted_reason"))
        if obj.get("state") is not None:
            parts.append("state %s" % obj.get("state"))
        if obj.get("code"):
            parts.append("code %s" % obj.get("code"))
        chain = obj.get("chain")
        if isinstance(chain, dict) and chain.get("status") is not None:
            parts.append("chain %s" % chain.get("status"))
        if "commitment" in obj and obj.get("commitment") is None:
            parts.append("not committed")
    return ", ".join(str(p) for p in parts) or "no reason given"


def check_status(base, content_hash, timeout):
    """The daemon's status object for content_hash, which must say trusted."""
    st = get_json(base, "/artifact/" + content_hash, timeout)
    if not isinstance(st, dict):
        _untrusted("the daemon's answer for %s is not a status object", content_hash)
    if st.get("content_hash") != content_hash:
        _untrusted("the daemon answered about %r, not %s", st.get("content_hash"), content_hash)
    if st.get("trusted") is not True:
        reason = st.get("untrusted_reason")
        raise VerificationError(UNTRUSTED, "the daemon does not vouch for %s (%s)"
                                % (content_hash, _why_not(st)),
                                reason if isinstance(reason, str) else None)
    return st


def _status_reason(base, content_hash, timeout):
    """The untrusted_reason of the daemon's status object, or None: only to
    say why a signed verdict refused, for the status object is unsigned."""
    try:
        st = get_json(base, "/artifact/" + content_hash, timeout)
    except VerificationError:
        return None
    if not isinstance(st, dict) or st.get("content_hash") != content_hash or \
            st.get("trusted") is True:
        return None
    reason = st.get("untrusted_reason")
    return reason if isinstance(reason, str) else None


def _refuse_with_reason(detail, reason, signed):
    if reason is None:
        raise VerificationError(UNTRUSTED, detail)
    if not signed:
        detail += "; the daemon's unsigned status object gives untrusted_reason %s" % reason
    raise VerificationError(UNTRUSTED, detail, reason)


def load_public_key(public_key):
    """An Ed25519 public key (PEM SubjectPublicKeyInfo, a path or the bytes)
    and its key id. Needs the cryptography package."""
    purpose = "checking the daemon's signed verdict (public_key)"
    serialization = need("cryptography.hazmat.primitives.serialization", purpose)
    Ed25519PublicKey = need("cryptography.hazmat.primitives.asymmetric.ed25519",
                            purpose).Ed25519PublicKey
    if isinstance(public_key, (bytes, bytearray, memoryview)):
        pem = bytes(public_key)
    elif isinstance(public_key, (str, os.PathLike)):
        with open(public_key, "rb") as f:
            pem = f.read(MAX_ANSWER)
    else:
        raise TypeError("public_key must be a PEM file path or PEM bytes")
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as e:
        raise ValueError("public_key is not a PEM public key: %s" % e) from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("public_key is not an Ed25519 public key")
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return key, hashlib.sha256(raw).hexdigest()


def pae(payload_type, payload):
    """DSSE v1 pre-authentication encoding."""
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(payload), payload)


def _b64(s, what):
    if not isinstance(s, str):
        _untrusted("the attestation's %s is not a string", what)
    try:
        return base64.b64decode(s.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        _untrusted("the attestation's %s is not standard base64", what)


def check_attestation(base, content_hash, key, keyid, timeout):
    """The daemon's signed verdict on content_hash: a DSSE envelope signed by
    `key`, over an in-toto Statement whose subjects are content_hash and
    whose predicate says trusted. Returns the statement.

    A refusal carries the daemon's untrusted_reason: the predicate's, when
    it signs one; else, to say why only, the one of its unsigned status
    object (GET /artifact/<hash>), named as such in the detail."""
    InvalidSignature = need("cryptography.exceptions",
                            "checking the daemon's signed verdict (public_key)").InvalidSignature

    try:
        env = get_json(base, "/artifact/%s/attestation" % content_hash, timeout)
    except VerificationError as e:
        if getattr(e, "http_status", None) != 409:      # 409 not_verified
            raise
        _refuse_with_reason(e.detail, _status_reason(base, content_hash, timeout), False)
    if not isinstance(env, dict) or set(env) != _ENVELOPE_FIELDS:
        _untrusted("the daemon's attestation for %s is not a DSSE envelope", content_hash)
    ptype = env["payloadType"]
    if ptype != PAYLOAD_TYPE:
        _untrusted("the attestation's payloadType is %r, not %s", ptype, PAYLOAD_TYPE)
    payload = _b64(env["payload"], "payload")
    sigs = env["signatures"]
    if not isinstance(sigs, list):
        _untrusted("the attestation's signatures are not a list")
    signed = False
    for s in sigs:
        if not isinstance(s, dict) or s.get("keyid") != keyid:
            continue            # signatures by other keys are ignored
        sig = _b64(s.get("sig"), "signature")
        try:
            key.verify(sig, pae(ptype.encode("utf-8"), payload))
        except InvalidSignature:
            continue
        signed = True
        break
    if not signed:
        _untrusted("the attestation for %s carries no valid signature by key %s",
                   content_hash, keyid)
    try:
        stmt = _json.loads(payload)
    except _json.JSONError as e:
        _untrusted("the signed statement is not valid JSON (%s)", e)
    if not isinstance(stmt, dict) or set(stmt) != _STATEMENT_FIELDS:
        _untrusted("the signed payload is not an in-toto Statement")
    if stmt["_type"] != STATEMENT_TYPE or stmt["predicateType"] != PREDICATE_TYPE:
        _untrusted("the signed statement is a %r of type %r, not a lensemble-verifyd verdict",
                   stmt["_type"], stmt["predicateType"])
    subjects = stmt["subject"]
    if not isinstance(subjects, list) or not subjects:
        _untrusted("the signed statement names no subject")
    for s in subjects:
        digest = s.get("digest") if isinstance(s, dict) else None
        if not isinstance(digest, dict) or digest.get("sha256") != content_hash:
            _untrusted("the signed statement is about another artifact than %s", content_hash)
    pred = stmt["predicate"]
    if not isinstance(pred, dict):
        _untrusted("the signed statement has no verdict")
    if pred.get("trusted") is not True:
        detail = "the daemon's signed verdict does not vouch for %s (%s)" % (
            content_hash, _why_not(pred))
        reason = pred.get("untrusted_reason")
        if isinstance(reason, str):
            _refuse_with_reason(detail, reason, True)
        _refuse_with_reason(detail, _status_reason(base, content_hash, timeout), False)
    return stmt
