"""OpenSSF Model Signing (OMS v1.0): a model directory (or one file)
checked against its detached bundle (``model.sig``) and an ECDSA public
key, by the rules of the C verifier (src/lib/vd_oms.c, src/lib/vd_oms_model.c,
docs/OMS.md): the key method only, ``files`` and ``shards``
serialization, ignore paths as OMS 6.2, symbolic links refused."""

import base64
import binascii
import hashlib
import os
import stat

from . import _json
from ._errors import IO_ERROR, UNTRUSTED, VerificationError, need

MEDIA_TYPES = ("application/vnd.dev.sigstore.bundle.v0.3+json",
               "application/vnd.dev.sigstore.bundle+json;version=0.3")
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
PREDICATE_V01 = "https://model_signing/Digests/v0.1"
SIGNATURE_NAME = "model.sig"
DEFAULT_IGNORES = (".git", ".gitattributes", ".github", ".gitignore")

# The bounds of src/lib/vd_limits.h (VD_OMS_*).
MAX_BUNDLE = 16 << 20
MAX_DEPTH = 16             # JSON nesting in a bundle and its statement
MAX_RESOURCES = 200000
MAX_NAME = 4096
MAX_IGNORE = 1024
MAX_SIG = 512
MAX_KEY = 16 << 10
MAX_FILES = 200000
MAX_DIR_DEPTH = 64
MAX_DIFFS = 16
NAME_MAX = 256              # VD_NAME_MAX: the subject's name, NUL included
READ_STEP = 1 << 20
QUOTE = 160

# The codes of lensemble-verify verify-oms (docs/OMS.md), as ``oms_code``.
MALFORMED = "malformed"
UNSUPPORTED = "unsupported"
KEY_MISMATCH = "key_mismatch"
BAD_SIGNATURE = "bad_signature"
MISMATCH = "mismatch"
UNREADABLE = "unreadable"

_PURPOSE = "verify_oms (an OMS bundle's ECDSA signature)"


class OMSResult:
    """What verify_oms found: ``verified`` (always True: a bundle that
    does not verify raises), ``key_hint`` (the lowercase hex SHA-256 of
    the key's PEM SubjectPublicKeyInfo, as model_signing names a key),
    ``subject`` and ``root_digest`` (the statement's), ``serialization``
    ("files" or "shards"), ``hash_type`` and ``resources``: the
    manifest's names (PATH:START:END for shards) -> hex digest, in the
    order signed."""

    __slots__ = ("verified", "key_hint", "subject", "root_digest", "serialization",
                 "hash_type", "resources")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    def __repr__(self):
        return ("OMSResult(verified=%r, key_hint=%r, subject=%r, serialization=%r, "
                "resources=%d)" % (self.verified, self.key_hint, self.subject,
                                   self.serialization, len(self.resources or ())))


class OMSError(VerificationError):
    """A bundle that does not verify: ``code`` is ``untrusted`` (``io_error``
    when the model or the bundle cannot be read), ``oms_code`` the code
    lensemble-verify verify-oms --json gives (malformed, unsupported,
    key_mismatch, bad_signature, mismatch, unreadable), ``differences``
    the sentences of every difference found (the first 16) for a
    mismatch."""

    def __init__(self, oms_code, detail, differences=()):
        super().__init__(IO_ERROR if oms_code == UNREADABLE else UNTRUSTED, detail)
        self.oms_code = oms_code
        self.differences = list(differences)


def _fail(oms_code, fmt, *args):
    raise OMSError(oms_code, fmt % args if args else fmt)


def _q(s, n=80):
    """An untrusted string quoted in a sentence, cut short."""
    return s if len(s) <= n else s[:n]


# ---- paths (OMS 6.1.2, 6.2.1) ---------------------------------------------

def path_valid(s):
    """A relative /-separated path without empty, "." or ".." components."""
    if not isinstance(s, str) or not s or "\0" in s:
        return False
    try:
        n = len(s.encode("utf-8"))
    except UnicodeEncodeError:          # lone surrogates: not UTF-8
        return False
    if n > MAX_NAME:
        return False
    return all(c not in ("", ".", "..") for c in s.split("/"))


def ignore_valid(s):
    return path_valid(s) and not any(c in s for c in "*?[")


def ignored(rel, ignores):
    return any(rel == p or rel.startswith(p + "/") for p in ignores)


def _offset(s):
    if not s or len(s) > 20 or (len(s) > 1 and s[0] == "0") or \
            not all("0" <= c <= "9" for c in s):
        return None
    v = int(s)
    return v if v < (1 << 64) else None


def shard_split(name):
    """PATH:START:END split at its last two colons: (path, start, end) or None."""
    parts = name.rsplit(":", 2)
    if len(parts) != 3:
        return None
    start, end = _offset(parts[1]), _offset(parts[2])
    if start is None or end is None or start >= end:
        return None
    return parts[0], start, end


def _norm_ignore(p):
    """A caller's ignore path: "./a/b/" is a/b, how a shell completes it."""
    if isinstance(p, os.PathLike):
        p = os.fspath(p)
    if not isinstance(p, str):
        raise TypeError("ignore_paths must be strings, not %r" % (p,))
    q = p
    while q.startswith("./"):
        q = q[2:]
    while len(q) > 1 and q.endswith("/"):
        q = q[:-1]
    if not ignore_valid(q):
        raise ValueError("ignore path %r is not a path relative to the model without '..', "
                         "'.', empty components or glob characters" % (p,))
    return q


# ---- the key --------------------------------------------------------------

def load_key(key):
    """An ECDSA public key (P-256, P-384, P-521): a PEM file path, PEM
    bytes or a cryptography public key object; the key and its hint."""
    serialization = need("cryptography.hazmat.primitives.serialization", _PURPOSE)
    ec = need("cryptography.hazmat.primitives.asymmetric.ec", _PURPOSE)
    if hasattr(key, "public_bytes") and not isinstance(key, (bytes, bytearray, memoryview)):
        k = key                 # a cryptography public key object
    else:
        if isinstance(key, (bytes, bytearray, memoryview)):
            pem = bytes(key)
        elif isinstance(key, (str, os.PathLike)):
            with open(key, "rb") as f:
                pem = f.read(MAX_KEY + 1)
            if len(pem) > MAX_KEY:
                raise ValueError("the key file %s is larger than %d bytes" % (key, MAX_KEY))
        else:
            raise TypeError("key must be a PEM file path, PEM bytes or an ECDSA public key")
        try:
            k = serialization.load_pem_public_key(pem)
        except (ValueError, TypeError) as e:
            raise ValueError("key is not a PEM public key: %s" % e) from None
    if not isinstance(k, ec.EllipticCurvePublicKey):
        raise ValueError("OMS bundles are signed with ECDSA keys (P-256, P-384, P-521); "
                         "the key given is a %s" % type(k).__name__)
    if k.curve.name not in ("secp256r1", "secp384r1", "secp521r1"):
        raise ValueError("OMS bundles are signed with ECDSA keys on P-256, P-384 or P-521, "
                         "not %s" % k.curve.name)
    return k, key_hint(k)


def key_hint(k):
    """model_signing's name for a key: SHA-256 of its PEM SPKI text."""
    serialization = need("cryptography.hazmat.primitives.serialization", _PURPOSE)
    pem = k.public_bytes(serialization.Encoding.PEM,
                         serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def _spki(k):
    serialization = need("cryptography.hazmat.primitives.serialization", _PURPOSE)
    return k.public_bytes(serialization.Encoding.DER,
                          serialization.PublicFormat.SubjectPublicKeyInfo)


def _raw_key(raw):
    """The key a pre-v1.1 bundle carries (PEM text or DER), or None."""
    serialization = need("cryptography.hazmat.primitives.serialization", _PURPOSE)
    for load in (serialization.load_pem_public_key, serialization.load_der_public_key):
        try:
            return load(raw)
        except (ValueError, TypeError):
            pass
        except Exception:       # noqa: BLE001 - cryptography's unsupported algorithms
            return None
    return None


# ---- the bundle (strict: a field not known here is refused) ---------------

def _only(obj, keys, what):
    for k in obj:
        if k not in keys:
            _fail(MALFORMED, "%s has an unknown field \"%s\"", what, _q(k))


def _need(obj, key, typ, what):
    names = {dict: "object", list: "array", str: "string", bool: "boolean"}
    if key not in obj:
        _fail(MALFORMED, "%s has no \"%s\"", what, key)
    v = obj[key]
    if not isinstance(v, typ) or (typ is not bool and isinstance(v, bool)):
        _fail(MALFORMED, "%s: \"%s\" is not of type %s", what, key, names[typ])
    return v


def _b64(s, cap):
    try:
        out = base64.b64decode(s.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    return out if len(out) <= cap else None


class _Bundle:
    __slots__ = ("method", "hint", "raw_key", "payload", "sig")


def parse_bundle(data):
    if len(data) > MAX_BUNDLE:
        _fail(MALFORMED, "the bundle is larger than %d bytes", MAX_BUNDLE)
    try:
        root = _json.loads(data, MAX_DEPTH)
    except _json.JSONError as e:
        _fail(MALFORMED, "the bundle is not valid JSON: %s", e)
    if not isinstance(root, dict):
        _fail(MALFORMED, "the bundle is not a JSON object")
    if "messageSignature" in root:
        _fail(MALFORMED, "the bundle signs a message, not a DSSE envelope")
    _only(root, ("mediaType", "verificationMaterial", "dsseEnvelope"), "the bundle")
    mt = _need(root, "mediaType", str, "the bundle")
    vm = _need(root, "verificationMaterial", dict, "the bundle")
    env = _need(root, "dsseEnvelope", dict, "the bundle")
    if mt not in MEDIA_TYPES:
        _fail(MALFORMED, "mediaType is \"%s\", not a Sigstore bundle v0.3 (\"%s\")",
              _q(mt), MEDIA_TYPES[0])
    b = _Bundle()
    b.hint = ""
    b.raw_key = None
    _material(vm, b)
    _only(env, ("payload", "payloadType", "signatures"), "dsseEnvelope")
    ptype = _need(env, "payloadType", str, "dsseEnvelope")
    payload = _need(env, "payload", str, "dsseEnvelope")
    sigs = _need(env, "signatures", list, "dsseEnvelope")
    if ptype != PAYLOAD_TYPE:
        _fail(MALFORMED, "payloadType is \"%s\", not \"%s\"", _q(ptype), PAYLOAD_TYPE)
    b.payload = _b64(payload, MAX_BUNDLE)
    if b.payload is None:
        _fail(MALFORMED, "the payload is not standard padded base64")
    # model_signing writes one signature and checks the first: a second
    # one would be a signature nobody checks.
    if len(sigs) != 1:
        _fail(MALFORMED, "the envelope holds %d signatures; an OMS bundle has exactly one",
              len(sigs))
    s = sigs[0]
    if not isinstance(s, dict):
        _fail(MALFORMED, "the signature is not an object")
    _only(s, ("sig", "keyid"), "the signature")
    sig = _need(s, "sig", str, "the signature")
    if "keyid" in s and s["keyid"] is not None and not isinstance(s["keyid"], str):
        _fail(MALFORMED, "the signature's keyid is neither a string nor null")
    b.sig = _b64(sig, MAX_SIG)
    if not b.sig:
        _fail(MALFORMED, "the signature is not base64 of 1 to %d bytes", MAX_SIG)
    return b


def _hex64(s):
    return isinstance(s, str) and len(s) == 64 and all(c in "0123456789abcdef" for c in s)


def _material(vm, b):
    _only(vm, ("publicKey", "x509CertificateChain", "certificate", "tlogEntries",
               "timestampVerificationData"), "verificationMaterial")
    if "certificate" in vm:
        _fail(UNSUPPORTED, "the bundle is signed with the sigstore (keyless) method; only "
              "the key method is verified here")
    pk, ch, tl = vm.get("publicKey"), vm.get("x509CertificateChain"), vm.get("tlogEntries")
    if (pk is not None and not isinstance(pk, dict)) or \
            (ch is not None and not isinstance(ch, dict)) or \
            (tl is not None and not isinstance(tl, list)):
        _fail(MALFORMED, "verificationMaterial: publicKey, x509CertificateChain or "
              "tlogEntries is not of the right type")
    if (pk is None) == (ch is None):
        _fail(MALFORMED, "verificationMaterial must hold exactly one of publicKey and "
              "x509CertificateChain")
    if ch is not None:
        b.method = "certificate"
        return
    b.method = "key"
    _only(pk, ("hint", "rawBytes", "keyDetails"), "publicKey")
    hint = pk.get("hint")
    if hint is not None and (not isinstance(hint, str) or (hint and not _hex64(hint))):
        _fail(MALFORMED, "publicKey.hint is not a SHA-256 in lowercase hex")
    b.hint = hint or ""
    raw = pk.get("rawBytes")
    if raw is not None:
        b.raw_key = _b64(raw, MAX_KEY) if isinstance(raw, str) else None
        if b.raw_key is None:
            _fail(MALFORMED, "publicKey.rawBytes is not a base64 key")
    if "keyDetails" in pk and not isinstance(pk["keyDetails"], str):
        _fail(MALFORMED, "publicKey.keyDetails is not a string")


# ---- the signer and the signature -----------------------------------------

def check_signer(b, key, hint):
    if b.method != "key":
        _fail(KEY_MISMATCH, "the bundle is signed by a certificate chain, not a bare public "
              "key; this client verifies the key method only (lensemble-verify verify-oms "
              "--ca-cert checks a chain)")
    if b.hint and b.hint != hint:
        _fail(KEY_MISMATCH, "the bundle names key %s, not the key given (%s)", b.hint, hint)
    if b.raw_key is not None:
        raw = _raw_key(b.raw_key)
        if raw is None:
            _fail(MALFORMED, "the bundle's publicKey.rawBytes is not a public key")
        if _spki(raw) != _spki(key):
            _fail(KEY_MISMATCH, "the bundle's publicKey.rawBytes hold another public key than "
                  "the one given")


def pae(payload):
    t = PAYLOAD_TYPE.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def check_signature(b, key, hint):
    hashes = need("cryptography.hazmat.primitives.hashes", _PURPOSE)
    ec = need("cryptography.hazmat.primitives.asymmetric.ec", _PURPOSE)
    InvalidSignature = need("cryptography.exceptions", _PURPOSE).InvalidSignature
    algo = {"secp256r1": hashes.SHA256, "secp384r1": hashes.SHA384,
            "secp521r1": hashes.SHA512}[key.curve.name]
    try:
        key.verify(b.sig, pae(b.payload), ec.ECDSA(algo()))
    except (InvalidSignature, ValueError):
        _fail(BAD_SIGNATURE, "the DSSE signature does not verify with ECDSA key %s", hint)


# ---- the statement (fields not known are ignored, OMS 5.2.1) --------------

class _Res:
    __slots__ = ("name", "path", "start", "end", "digest")


class _Statement:
    __slots__ = ("subject", "root", "hash_type", "spelled", "digest_size", "shards",
                 "shard_size", "allow_symlinks", "ignore", "res")


def _components_key(r, shards):
    """model_signing's order: paths compared component by component
    (as pathlib does), then shard offsets as numbers."""
    k = [tuple(c.encode("utf-8") for c in r.path.split("/"))]
    if shards:
        k += [r.start, r.end]
    return k


def parse_statement(payload):
    try:
        root = _json.loads(payload, MAX_DEPTH)
    except _json.JSONError as e:
        _fail(MALFORMED, "the payload is not valid JSON: %s", e)
    if not isinstance(root, dict):
        _fail(MALFORMED, "the payload is not a JSON object")
    typ = _need(root, "_type", str, "the statement")
    ptype = _need(root, "predicateType", str, "the statement")
    if typ != STATEMENT_TYPE:
        _fail(MALFORMED, "_type is \"%s\", not an in-toto Statement v1", _q(typ))
    if ptype == PREDICATE_V01:
        _fail(UNSUPPORTED, "the predicate is model_signing v0.2's %s, which OMS deprecates",
              PREDICATE_V01)
    if ptype != PREDICATE_TYPE:
        _fail(MALFORMED, "predicateType is \"%s\", not \"%s\"", _q(ptype), PREDICATE_TYPE)
    subj = _need(root, "subject", list, "the statement")
    pred = _need(root, "predicate", dict, "the statement")
    ser = _need(pred, "serialization", dict, "the predicate")
    res = _need(pred, "resources", list, "the predicate")
    s = _Statement()
    _subject(subj, s)
    _serialization(ser, s)
    _resources(res, s)
    return s


def _subject(subj, s):
    if len(subj) != 1 or not isinstance(subj[0], dict):
        _fail(MALFORMED, "the statement must have exactly one subject, an object")
    name = _need(subj[0], "name", str, "the subject")
    digest = _need(subj[0], "digest", dict, "the subject")
    sha = _need(digest, "sha256", str, "the subject's digest")
    if not name or len(name.encode("utf-8", "surrogatepass")) >= NAME_MAX or "\0" in name:
        _fail(MALFORMED, "the subject's name must be 1 to %d bytes without NUL", NAME_MAX - 1)
    if not _hex64(sha):
        _fail(MALFORMED, "the subject's sha256 is not 64 lowercase hex digits")
    s.subject, s.root = name, sha


def _serialization(ser, s):
    method = _need(ser, "method", str, "serialization")
    ht = _need(ser, "hash_type", str, "serialization")
    s.allow_symlinks = _need(ser, "allow_symlinks", bool, "serialization")
    s.spelled = ht          # the resources' algorithm is spelled the same
    if ht == "sha256":
        s.hash_type, s.digest_size = "sha256", 32
    elif ht in ("blake2b", "blake2"):       # the registry's name, model_signing's
        s.hash_type, s.digest_size = "blake2b", 64
    elif ht == "blake3":
        _fail(UNSUPPORTED, "the files are hashed with blake3, which this verifier does not have")
    else:
        _fail(MALFORMED, "hash_type \"%s\" is not in the OMS registry", _q(ht))
    if method not in ("files", "shards"):
        _fail(UNSUPPORTED, "serialization method \"%s\" is neither files nor shards", _q(method))
    s.shards = method == "shards"
    size = ser.get("shard_size")
    if s.shards and (not isinstance(size, int) or isinstance(size, bool) or
                     isinstance(size, _json.NegZero) or size <= 0 or size >= 1 << 64):
        _fail(MALFORMED, "shards serialization needs a positive integer shard_size")
    if not s.shards and "shard_size" in ser:
        _fail(MALFORMED, "files serialization has no shard_size")
    s.shard_size = size if s.shards else None
    ign = ser.get("ignore_paths")
    if "ignore_paths" in ser and not isinstance(ign, list):
        _fail(MALFORMED, "ignore_paths is not an array")
    ign = ign or []
    if len(ign) > MAX_IGNORE:
        _fail(MALFORMED, "ignore_paths holds %d paths, more than %d", len(ign), MAX_IGNORE)
    for p in ign:
        if not isinstance(p, str) or not ignore_valid(p):
            _fail(MALFORMED, "ignore path \"%s\" is not a relative path in canonical form "
                  "without glob characters", _q(p) if isinstance(p, str) else "")
    s.ignore = list(ign)


def _resources(arr, s):
    if not arr or len(arr) > MAX_RESOURCES:
        _fail(MALFORMED, "the predicate lists %d resources, not 1 to %d", len(arr),
              MAX_RESOURCES)
    s.res = []
    for i, o in enumerate(arr):
        what = "resource %d" % (i + 1)
        if not isinstance(o, dict):
            _fail(MALFORMED, "%s is not an object", what)
        name = _need(o, "name", str, what)
        digest = _need(o, "digest", str, what)
        alg = _need(o, "algorithm", str, what)
        if alg != s.spelled:
            _fail(MALFORMED, "%s (\"%s\") has algorithm \"%s\", not the hash_type", what,
                  _q(name), _q(alg))
        if len(digest) != 2 * s.digest_size or \
                not all(c in "0123456789abcdef" for c in digest):
            _fail(MALFORMED, "%s (\"%s\"): the digest is not %d lowercase hex digits", what,
                  _q(name), 2 * s.digest_size)
        r = _Res()
        r.name, r.digest, r.path, r.start, r.end = name, digest, name, 0, 0
        if s.shards:
            split = shard_split(name)
            if split is None:
                _fail(MALFORMED, "%s: \"%s\" is not PATH:START:END", what, _q(name))
            r.path, r.start, r.end = split
        if not path_valid(r.path) and r.path != ".":
            _fail(MALFORMED, "%s: \"%s\" is not a relative path in canonical form (no '..', "
                  "'.', empty components or leading '/')", what, _q(name))
        s.res.append(r)
    _check_dot(s)
    _check_order(s)
    if s.shards:
        _check_shards(s)
    root = hashlib.sha256(b"".join(bytes.fromhex(r.digest) for r in s.res)).hexdigest()
    if root != s.root:
        _fail(MALFORMED, "the subject's root digest %s is not the digest of the resources' "
              "digests, %s", s.root, root)


def _check_dot(s):
    dots = sum(r.path == "." for r in s.res)
    if dots and (dots != len(s.res) or (not s.shards and len(s.res) != 1)):
        _fail(MALFORMED, "resource \".\" (a one-file model) is listed beside other files")


def _check_order(s):
    by_code_point = by_components = True
    for a, b in zip(s.res, s.res[1:]):
        ab, bb = a.name.encode("utf-8"), b.name.encode("utf-8")
        if ab == bb:
            _fail(MALFORMED, "resource \"%s\" is listed twice", _q(a.name))
        by_code_point = by_code_point and ab < bb
        by_components = by_components and \
            _components_key(a, s.shards) < _components_key(b, s.shards)
    if not by_code_point and not by_components:
        _fail(MALFORMED, "the resources are not sorted by name")


def _check_shards(s):
    ix = sorted(s.res, key=lambda r: (r.path.encode("utf-8"), r.start))
    for i, r in enumerate(ix):
        first = i == 0 or ix[i - 1].path != r.path
        last = i + 1 == len(ix) or ix[i + 1].path != r.path
        if (r.start != 0 if first else r.start != ix[i - 1].end) or \
                r.end - r.start > s.shard_size or \
                (not last and r.end - r.start != s.shard_size):
            _fail(MALFORMED, "shard \"%s\" does not follow the one before it by shard_size "
                  "%d bytes", _q(r.name), s.shard_size)


# ---- the model on disk -----------------------------------------------------

_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | \
    getattr(os, "O_NONBLOCK", 0)


class _Walk:
    def __init__(self, st, ignores, listed):
        self.st = st
        self.ignores = ignores
        self.listed = listed        # paths the manifest lists: only they are hashed
        self.files = {}             # rel -> (size, [digests])
        self.dirs = set()

    def _new_hash(self):
        if self.st.hash_type == "blake2b":
            return hashlib.blake2b()
        return hashlib.sha256()

    def hash_fd(self, fd, rel):
        """The file's digests, one per shard (one for files), read once."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _fail(MISMATCH, "\"%s\" is neither a regular file nor a directory", _q(rel, QUOTE))
        shard = self.st.shard_size
        digests, size, in_shard, h = [], 0, 0, self._new_hash()
        while True:
            want = READ_STEP if shard is None else min(READ_STEP, shard - in_shard)
            try:
                data = os.read(fd, want)
            except OSError as e:
                _fail(UNREADABLE, "cannot read \"%s\": %s", _q(rel, QUOTE), e.strerror)
            if not data:
                break
            h.update(data)
            size += len(data)
            if shard is not None:
                in_shard += len(data)
                if in_shard == shard:
                    digests.append(h.hexdigest())
                    h, in_shard = self._new_hash(), 0
        # files: always one digest; shards: the last partial one, none for
        # an empty file (OMS 6.3.2).
        if shard is None or in_shard > 0:
            digests.append(h.hexdigest())
        return size, digests

    def entry(self, fd, rel):
        if len(self.files) >= MAX_FILES:
            _fail(UNREADABLE, "the model holds more than %d files", MAX_FILES)
        if rel != "." and rel not in self.listed:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                _fail(MISMATCH, "\"%s\" is neither a regular file nor a directory",
                      _q(rel, QUOTE))
            self.files[rel] = (st.st_size, None)       # unlisted: no digest needed
            return
        self.files[rel] = self.hash_fd(fd, rel)

    def walk_dir(self, dfd, prefix, depth):
        if depth > MAX_DIR_DEPTH:
            _fail(UNREADABLE, "the model nests directories deeper than %d levels", MAX_DIR_DEPTH)
        try:
            names = sorted(os.listdir(dfd))
        except OSError as e:
            _fail(UNREADABLE, "cannot read directory \"%s\": %s", _q(prefix, QUOTE), e.strerror)
        for name in names:
            rel = prefix + "/" + name if prefix else name
            if not path_valid(rel):
                _fail(MISMATCH, "\"%s\" is not a path a manifest can name (not UTF-8, or too "
                      "long)", _q(rel.encode("utf-8", "replace").decode("utf-8"), QUOTE))
            if ignored(rel, self.ignores):
                continue
            self.walk_one(dfd, name, rel, depth)

    def walk_one(self, dfd, name, rel, depth):
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError as e:
            _fail(UNREADABLE, "cannot read \"%s\": %s", _q(rel, QUOTE), e.strerror)
        if stat.S_ISLNK(st.st_mode):
            _fail(MISMATCH, "\"%s\" is a symbolic link; symbolic links are refused%s",
                  _q(rel, QUOTE), " (this client follows none, even where the bundle allows "
                  "them)" if self.st.allow_symlinks else "")
        if not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
            _fail(MISMATCH, "\"%s\" is neither a regular file nor a directory", _q(rel, QUOTE))
        is_dir = stat.S_ISDIR(st.st_mode)
        try:
            fd = os.open(name, _OPEN | (os.O_DIRECTORY if is_dir else 0), dir_fd=dfd)
        except OSError as e:
            _fail(UNREADABLE, "cannot open \"%s\": %s", _q(rel, QUOTE), e.strerror)
        try:
            if is_dir:
                self.dirs.add(rel)
                self.walk_dir(fd, rel, depth + 1)
            else:
                self.entry(fd, rel)
        finally:
            os.close(fd)


def _walk(path, st, ignores):
    """The model at path: (files, directories, is_dir)."""
    listed = {r.path for r in st.res}
    w = _Walk(st, ignores, listed)
    try:
        lst = os.lstat(path)
    except OSError as e:
        _fail(UNREADABLE, "cannot read %s: %s", path, e.strerror)
    if stat.S_ISLNK(lst.st_mode):
        _fail(UNREADABLE, "%s is a symbolic link; give the model's own path", path)
    if not stat.S_ISDIR(lst.st_mode) and not stat.S_ISREG(lst.st_mode):
        _fail(UNREADABLE, "%s is neither a directory nor a regular file", path)
    is_dir = stat.S_ISDIR(lst.st_mode)
    try:
        fd = os.open(path, _OPEN | (os.O_DIRECTORY if is_dir else 0))
    except OSError as e:
        _fail(UNREADABLE, "cannot open %s: %s", path, e.strerror)
    try:
        if is_dir:
            w.walk_dir(fd, "", 0)
        else:
            w.entry(fd, ".")
    finally:
        os.close(fd)
    return w.files, w.dirs, is_dir


def _signature_rel(root_real, sig):
    """The signature's path relative to the model root when it lies inside
    it (it is then excluded, OMS 6.2); None otherwise."""
    d = os.path.realpath(os.path.dirname(os.path.abspath(sig)))
    base = os.path.basename(sig)
    if d == root_real:
        return base
    if d.startswith(root_real + os.sep):
        return d[len(root_real) + 1:].replace(os.sep, "/") + "/" + base
    return None


def compare(st, files, dirs, ignores):
    """The sentences of every difference between the manifest and the files."""
    diffs = []
    by_path = {}
    for r in st.res:
        by_path.setdefault(r.path, []).append(r)
    for rs in by_path.values():
        rs.sort(key=lambda r: r.start)
    for rel in sorted(files, key=lambda n: n.encode("utf-8")):
        size, digests = files[rel]
        rs = by_path.pop(rel, None)
        if rs is None:
            if not (st.shards and size == 0):   # an empty file has no shards
                diffs.append("\"%s\" is not in the signature (a file added, or one to ignore)"
                             % _q(rel, QUOTE))
            continue
        if not st.shards:
            if digests[0] != rs[0].digest:
                diffs.append("\"%s\" differs from the signature: its %s is %s, the signature "
                             "says %s" % (_q(rel, QUOTE), st.hash_type, digests[0], rs[0].digest))
            continue
        ok = len(rs) == len(digests)
        for i, r in enumerate(rs if ok else ()):
            start = i * st.shard_size
            ok = ok and r.start == start and r.end == min(start + st.shard_size, size)
        if not ok:
            diffs.append("\"%s\" is %d bytes long; the signature's shards of it end at byte %d"
                         % (_q(rel, QUOTE), size, rs[-1].end))
            continue
        for r, d in zip(rs, digests):
            if d != r.digest:
                diffs.append("\"%s\" bytes %d..%d differ from the signature: %s %s, signed %s"
                             % (_q(rel, QUOTE), r.start, r.end, st.hash_type, d, r.digest))
    for p in sorted(by_path, key=lambda n: n.encode("utf-8")):
        if p == ".":
            diffs.append("the signature is for a one-file model, not a directory")
        elif ignored(p, ignores):
            diffs.append("\"%s\" is in the signature but excluded by an ignore path" % _q(p, QUOTE))
        elif p in dirs:
            diffs.append("resource \"%s\" names a directory, not a file" % _q(p, QUOTE))
        else:
            diffs.append("\"%s\" is in the signature but missing from the model" % _q(p, QUOTE))
    return diffs


# ---- verify_oms --------------------------------------------------------------

def verify_oms(path, *, key, signature=None, ignore_paths=()):
    """Verify the model at `path` (a directory, or one file) against its
    OpenSSF Model Signing v1.0 bundle, signed by `key` (the key method).

    - ``key``: the signer's ECDSA public key (P-256, P-384 or P-521): a
      PEM file path, PEM bytes or a cryptography public key object. Its
      hint (SHA-256 of its PEM SubjectPublicKeyInfo) must be the one the
      bundle names, and a pre-v1.1 bundle's ``rawBytes`` must hold it.
    - ``signature``: the bundle; by default ``path/model.sig`` (a single
      file needs it). It is not part of the model when it lies inside.
    - ``ignore_paths``: paths relative to `path` left out, each with
      everything below it, as the bundle's own ``ignore_paths`` and the
      defaults ``.git``, ``.gitattributes``, ``.github``, ``.gitignore``
      at the top level (OMS 6.2: an exact path from the root, ``cache``
      does not match ``sub/cache``).

    Checks, in the order of lensemble-verify verify-oms: the bundle
    (strict JSON, a Sigstore bundle v0.3 with one DSSE signature over an
    in-toto statement), the key, the ECDSA signature, the OMS statement
    (canonical resource names, sorted, each once; shards contiguous; the
    root digest), then the files: ``files`` or ``shards`` serialization,
    SHA-256 or BLAKE2b, every resource present with its digest and no
    regular file neither listed nor ignored. Symbolic links are refused,
    even where the bundle allows them; the model path itself may not be
    one. Resource names with ``..``, a leading ``/`` or ``.`` components
    are refused before any file is opened, and files are opened only
    through the walk of the model directory, never by a name the bundle
    gives.

    Returns an OMSResult. Raises OMSError (a VerificationError, code
    ``untrusted``, or ``io_error`` when a file cannot be read; ``oms_code``
    as verify-oms --json) with a sentence naming what differs;
    MissingPackage (code ``missing_package``) without the cryptography
    package, before anything is read; ValueError or TypeError for bad
    arguments (a key that is not an ECDSA public key, a bad ignore path,
    a single file without ``signature``).
    """
    need("cryptography.hazmat.primitives.asymmetric.ec", _PURPOSE)
    if isinstance(ignore_paths, (str, bytes)):
        raise TypeError("ignore_paths must be a list of paths, not one string")
    ignores_given = [_norm_ignore(p) for p in ignore_paths]
    if len(ignores_given) > MAX_IGNORE:
        raise ValueError("more than %d ignore paths" % MAX_IGNORE)
    k, hint = load_key(key)
    path = os.fspath(path)
    if signature is None:
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError("%s is a single file: give its signature file (signature=)" % path)
        signature = os.path.join(path, SIGNATURE_NAME)
    signature = os.fspath(signature)
    try:
        with open(signature, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                _fail(UNREADABLE, "cannot read the signature %s: not a regular file", signature)
            data = f.read(MAX_BUNDLE + 1)
    except OSError as e:
        _fail(UNREADABLE, "cannot read the signature %s: %s", signature, e.strerror)
    if len(data) > MAX_BUNDLE:
        _fail(MALFORMED, "the signature %s is larger than %d bytes", signature, MAX_BUNDLE)

    b = parse_bundle(data)
    check_signer(b, k, hint)
    check_signature(b, k, hint)
    st = parse_statement(b.payload)

    root_real = os.path.realpath(path)
    ignores = list(DEFAULT_IGNORES)
    for p in st.ignore + ignores_given:
        if p not in ignores:
            ignores.append(p)
    sig_rel = _signature_rel(root_real, signature)
    if sig_rel and sig_rel not in ignores:
        ignores.append(sig_rel)
    files, dirs, is_dir = _walk(path, st, ignores)
    if not is_dir and st.res[0].path == os.path.basename(root_real):
        # One file: model_signing names it ".", OMS 6.1.2 its file name.
        files = {st.res[0].path: files["."]}
    diffs = compare(st, files, dirs, ignores)
    if diffs:
        detail = diffs[0] + (" (and more differences)" if len(diffs) > 1 else "")
        raise OMSError(MISMATCH, detail, diffs[:MAX_DIFFS])
    return OMSResult(verified=True, key_hint=hint, subject=st.subject, root_digest=st.root,
                     serialization="shards" if st.shards else "files", hash_type=st.hash_type,
                     resources={r.name: r.digest for r in st.res})
