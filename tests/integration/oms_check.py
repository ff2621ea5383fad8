#!/usr/bin/env python3
"""An OpenSSF Model Signing (OMS v1.0) verifier and bundle maker written
from the specification with Python's `cryptography` alone, to check
lensemble-verify against something that is not itself.

  oms_check.py verify --key PUB.pem --signature SIG [--ignore-path P]... PATH
      OMS section 8 for the key method: exit 0 verified, 1 not (reason on
      stderr).
  oms_check.py statement NAME=HEX... [--subject S] [--shards N]
      An OMS statement listing these resources in this order, with the
      root digest of OMS 6.5, to standard output.
  oms_check.py sign --key PRIV.pem --statement FILE [--cert LEAF.pem
      [--chain CA.pem]...] > SIG
      A bundle over any statement: the key method (hint), or the
      certificate method with the leaf and chain.
  oms_check.py mkca DIR
      DIR/ca.pem, ca.key, leaf.pem, leaf.key (valid now) and expired.pem,
      expired.key (a leaf whose validity ended), all ECDSA P-256.
"""
import argparse
import base64
import datetime
import hashlib
import json
import os
import sys

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
DEFAULT_IGNORES = [".git", ".gitattributes", ".github", ".gitignore"]
CURVE_HASH = {256: hashes.SHA256, 384: hashes.SHA384, 521: hashes.SHA512}


class NotVerified(Exception):
    pass


def pae(payload):
    t = PAYLOAD_TYPE.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def hint_of(public_key):
    pem = public_key.public_bytes(
        serialization.Encoding.PEM,
        serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def ecdsa(key):
    return ec.ECDSA(CURVE_HASH[key.curve.key_size]())


def check_signature(bundle, public_key):
    if bundle.get("mediaType") != MEDIA_TYPE:
        raise NotVerified("mediaType %r" % bundle.get("mediaType"))
    hint = bundle["verificationMaterial"]["publicKey"].get("hint")
    if hint is not None and hint != hint_of(public_key):
        raise NotVerified("the hint names another key")
    env = bundle["dsseEnvelope"]
    if env["payloadType"] != PAYLOAD_TYPE or len(env["signatures"]) != 1:
        raise NotVerified("not one in-toto signature")
    payload = base64.b64decode(env["payload"], validate=True)
    sig = base64.b64decode(env["signatures"][0]["sig"], validate=True)
    try:
        public_key.verify(sig, pae(payload), ecdsa(public_key))
    except InvalidSignature:
        raise NotVerified("the signature does not verify")
    return json.loads(payload)


def canonical(name):
    parts = name.split("/")
    return (name and not name.startswith("/") and "" not in parts
            and "." not in parts and ".." not in parts)


def check_statement(st):
    if st["_type"] != STATEMENT_TYPE or st["predicateType"] != PREDICATE_TYPE:
        raise NotVerified("not an OMS statement")
    if len(st["subject"]) != 1 or not st["subject"][0]["name"]:
        raise NotVerified("not one named subject")
    pred = st["predicate"]
    ser = pred["serialization"]
    if ser["hash_type"] != "sha256" or not isinstance(ser["allow_symlinks"], bool):
        raise NotVerified("serialization %r" % ser)
    res = pred["resources"]
    names = [r["name"] for r in res]
    if not res or names != sorted(names) or len(set(names)) != len(names):
        raise NotVerified("resources not sorted, or listed twice")
    root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in res))
    if root.hexdigest() != st["subject"][0]["digest"]["sha256"]:
        raise NotVerified("root digest")
    return pred


def ignored(rel, ignores):
    return any(rel == p or rel.startswith(p + "/") for p in ignores)


def local_files(root, ignores):
    files = {}
    if os.path.isfile(root):
        return {".": root}
    for d, dirs, names in os.walk(root, followlinks=False):
        for n in dirs + names:
            full = os.path.join(d, n)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if ignored(rel, ignores):
                continue
            if os.path.islink(full):
                raise NotVerified("symbolic link %s" % rel)
            if n in names:
                files[rel] = full
        dirs[:] = [x for x in dirs
                   if not ignored(os.path.relpath(os.path.join(d, x), root), ignores)]
    return files


def shard_digests(path, size):
    out = {}
    with open(path, "rb") as f:
        start = 0
        while True:
            data = f.read(size)
            if not data:
                return out
            out[(start, start + len(data))] = hashlib.sha256(data).hexdigest()
            start += len(data)


def check_manifest(pred, root, extra_ignores, signature):
    ser = pred["serialization"]
    ignores = DEFAULT_IGNORES + ser.get("ignore_paths", []) + extra_ignores
    rel_sig = os.path.relpath(os.path.abspath(signature), os.path.abspath(root))
    if not rel_sig.startswith(".."):
        ignores.append(rel_sig)
    for p in ser.get("ignore_paths", []):
        if not canonical(p) or any(c in p for c in "*?["):
            raise NotVerified("ignore path %r" % p)
    files = local_files(root, ignores)
    expected = {}
    for r in pred["resources"]:
        name = r["name"]
        if ser["method"] == "shards":
            path, start, end = name.rsplit(":", 2)
            key = (path, (int(start), int(end)))
        else:
            path, key = name, (name, None)
        if not canonical(path) and path != ".":
            raise NotVerified("resource name %r" % name)
        expected[key] = r["digest"]
    actual = {}
    for rel, full in files.items():
        if ser["method"] == "shards":
            for rng, d in shard_digests(full, ser["shard_size"]).items():
                actual[(rel, rng)] = d
        else:
            with open(full, "rb") as f:
                actual[(rel, None)] = hashlib.sha256(f.read()).hexdigest()
    if actual != expected:
        raise NotVerified("the files differ: %s" % sorted(
            set(actual.items()) ^ set(expected.items())))


def cmd_verify(a):
    with open(a.key, "rb") as f:
        public_key = serialization.load_pem_public_key(f.read())
    with open(a.signature) as f:
        bundle = json.load(f)
    try:
        pred = check_statement(check_signature(bundle, public_key))
        check_manifest(pred, a.path, a.ignore_path or [], a.signature)
    except (NotVerified, KeyError, ValueError, TypeError) as e:
        print("oms_check: not verified: %s" % e, file=sys.stderr)
        return 1
    return 0


def cmd_statement(a):
    res = []
    for item in a.resources:
        name, digest = item.rsplit("=", 1)
        res.append({"name": name, "algorithm": "sha256", "digest": digest})
    root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in res))
    ser = {"method": "shards" if a.shards else "files", "hash_type": "sha256",
           "allow_symlinks": False, "ignore_paths": DEFAULT_IGNORES + ["model.sig"]}
    if a.shards:
        ser["shard_size"] = a.shards
    print(json.dumps({
        "_type": STATEMENT_TYPE,
        "subject": [{"name": a.subject, "digest": {"sha256": root.hexdigest()}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {"serialization": ser, "resources": res}}))
    return 0


def load_pem_key(path):
    with open(path, "rb") as f:
        return serialization.load_pem_private_key(f.read(), None)


def cmd_sign(a):
    key = load_pem_key(a.key)
    with open(a.statement, "rb") as f:
        payload = f.read().strip()
    sig = key.sign(pae(payload), ecdsa(key))
    if a.cert:
        chain = []
        for p in [a.cert] + (a.chain or []):
            with open(p, "rb") as f:
                cert = x509.load_pem_x509_certificate(f.read())
            chain.append({"rawBytes": base64.b64encode(
                cert.public_bytes(serialization.Encoding.DER)).decode()})
        material = {"x509CertificateChain": {"certificates": chain}, "tlogEntries": []}
    else:
        material = {"publicKey": {"hint": hint_of(key.public_key())}, "tlogEntries": []}
    print(json.dumps({
        "mediaType": MEDIA_TYPE,
        "verificationMaterial": material,
        "dsseEnvelope": {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": PAYLOAD_TYPE,
            "signatures": [{"sig": base64.b64encode(sig).decode(), "keyid": ""}]}}))
    return 0


def write_pem(path, obj):
    if isinstance(obj, x509.Certificate):
        data = obj.public_bytes(serialization.Encoding.PEM)
    else:
        data = obj.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def make_cert(subject, key, issuer, issuer_key, start, end, ca):
    name = lambda cn: x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    b = (x509.CertificateBuilder().subject_name(name(subject))
         .issuer_name(name(issuer)).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(start).not_valid_after(end)
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                          False, False), critical=True)
    else:
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, False, False,
                                          False, False), critical=True)
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]),
                            critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def cmd_mkca(a):
    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = make_cert("test-ca", ca_key, "test-ca", ca_key, now - day, now + 3650 * day, True)
    write_pem(os.path.join(a.dir, "ca.key"), ca_key)
    write_pem(os.path.join(a.dir, "ca.pem"), ca)
    for name, start, end in (("leaf", now - day, now + 365 * day),
                             ("expired", now - 30 * day, now - 2 * day)):
        key = ec.generate_private_key(ec.SECP256R1())
        write_pem(os.path.join(a.dir, name + ".key"), key)
        write_pem(os.path.join(a.dir, name + ".pem"),
                  make_cert(name, key, "test-ca", ca_key, start, end, False))
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify")
    v.add_argument("--key", required=True)
    v.add_argument("--signature", required=True)
    v.add_argument("--ignore-path", action="append")
    v.add_argument("path")
    s = sub.add_parser("statement")
    s.add_argument("--subject", default="model")
    s.add_argument("--shards", type=int)
    s.add_argument("resources", nargs="+")
    g = sub.add_parser("sign")
    g.add_argument("--key", required=True)
    g.add_argument("--statement", required=True)
    g.add_argument("--cert")
    g.add_argument("--chain", action="append")
    m = sub.add_parser("mkca")
    m.add_argument("dir")
    a = p.parse_args()
    return {"verify": cmd_verify, "statement": cmd_statement, "sign": cmd_sign,
            "mkca": cmd_mkca}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
