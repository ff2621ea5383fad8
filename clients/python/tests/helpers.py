"""Shared by the client's tests: where the data and the C verifier are, an
artifact writer with its own (independent) canonical hash, and a way to
ask the C verifier for its verdict."""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.dirname(HERE)
sys.path.insert(0, CLIENT)

# make check sets these; run by hand, the defaults are the source tree and
# the usual build directory.
DATA = os.environ.get("LVC_DATA") or os.path.join(CLIENT, "..", "..", "tests", "data")
GOLDEN = os.path.join(DATA, "golden-cases")
_builddir = os.environ.get("top_builddir") or os.path.join(CLIENT, "..", "..", "_build")
CLI = os.environ.get("LVC_CLI") or os.path.join(_builddir, "lensemble-verify")


def have_cli():
    return os.access(CLI, os.X_OK)


def need_cli(test):
    """In make check the C verifier must be there: comparing with it is
    the point. Run by hand without a build, the comparison is skipped."""
    if not have_cli():
        if os.environ.get("LVC_REQUIRE_CLI"):
            test.fail("the C verifier %s is not built" % CLI)
        test.skipTest("no C verifier at %s" % CLI)


def c_verdict(path, expect=None):
    """The C verifier's verdict: ("ok", hash) or (code, detail)."""
    cmd = [CLI, "--json"]
    if expect is not None:
        cmd += ["--expect", expect]
    r = subprocess.run(cmd + [path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    lines = r.stdout.decode("utf-8").splitlines()
    if len(lines) != 1 or r.returncode not in (0, 1):
        raise AssertionError("lensemble-verify --json %s: exit %d, %r, %r"
                             % (path, r.returncode, r.stdout, r.stderr))
    out = json.loads(lines[0])
    if out["ok"]:
        return "ok", out["content_hash"]
    return out["code"], out["detail"]


def py_verdict(path, **kw):
    """The client's verdict, in the same form."""
    from lensemble_verify_client import VerificationError, load_verified
    kw.setdefault("framework", None)
    try:
        r = load_verified(path, **kw)
    except VerificationError as e:
        return e.code, e.detail
    return "ok", r.content_hash


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lvc-test.")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def copy_case(self, name, to=None):
        dst = os.path.join(self.tmp, to or name)
        shutil.copytree(os.path.join(GOLDEN, name), dst, symlinks=True)
        return dst

    def agree(self, path, code, expect=None, **kw):
        """The client's verdict is `code`, and the C verifier's too."""
        got = py_verdict(path, expect=expect, **kw)
        self.assertEqual(got[0], code, "client: %r" % (got,))
        if have_cli() or os.environ.get("LVC_REQUIRE_CLI"):
            want = c_verdict(path, expect)
            self.assertEqual(got[0], want[0], "client %r, C verifier %r" % (got, want))
            if code == "ok":
                self.assertEqual(got[1], want[1])
        return got


# ---- an artifact writer ----------------------------------------------------

TOKENS = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I32": 4, "U8": 1}


def canonical_hash(header, tensors):
    """canonical-hash.md section 4, written out again from the text.
    tensors: (name, dtype, shape, data) in any order."""
    h = hashlib.sha256(b"lensemble/artifact/v1" + b"\x00tensors\x00")
    for name, dtype, shape, data in sorted(tensors, key=lambda t: t[0].encode("utf-8")):
        nb = name.encode("utf-8")
        tok = TOKENS.get(dtype, dtype).encode()
        h.update(struct.pack("<I", len(nb)) + nb + bytes([len(tok)]) + tok)
        h.update(struct.pack("<I", len(shape)))
        for d in shape:
            h.update(struct.pack("<Q", d))
        h.update(data)
    frame = json.dumps({
        "param_groups": sorted(header["param_groups"]),
        "parent_hash": header["parent_hash"] or "",
        "round_index": header["round_index"],
        "schema_version": header["schema_version"],
        "wmcp_version": header["wmcp_version"],
    }, sort_keys=True, separators=(",", ":")).encode("ascii")
    h.update(b"\x00struct\x00" + struct.pack("<I", len(frame)) + frame)
    return h.hexdigest()


def safetensors(tensors, meta=None):
    """A safetensors file: tensors (name, dtype, shape, data) stored in the
    given order, header padded to 8 bytes like the reference writer."""
    hdr, off, blobs = {}, 0, []
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, data in tensors:
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    js = json.dumps(hdr, separators=(",", ":")).encode("utf-8")
    js += b" " * (-len(js) % 8)
    return struct.pack("<Q", len(js)) + js + b"".join(blobs)


def default_tensors():
    """Three small float32 tensors and one each of float16 and bfloat16."""
    return [
        ("encoder.a", "F32", (2, 3), struct.pack("<6f", 1, 2, 3, 4, 5, 6)),
        ("encoder.b", "F16", (4,), struct.pack("<4e", 0.5, -1, 2, 65504)),
        ("predictor.c", "BF16", (2,), bytes.fromhex("803f") + bytes.fromhex("00c0")),
        ("predictor.d", "F32", (), struct.pack("<f", 3.25)),
        ("predictor.e", "F32", (0, 3), b""),
    ]


def write_artifact(dirpath, tensors=None, shards=None, header=None, index=False,
                   schema_version=2):
    """Write an artifact; returns (header dict, content hash).

    shards: a list of lists of tensor names (one per weight file) to shard;
    header: fields to override after the hash is computed (None removes a
    field) or a callable(header) that edits it; index: write
    weights.index.json."""
    tensors = default_tensors() if tensors is None else tensors
    os.makedirs(dirpath, exist_ok=True)
    by_name = {t[0]: t for t in tensors}
    if shards is None:
        files = {"weights.safetensors": [t[0] for t in tensors]}
    else:
        n = len(shards)
        files = {"weights-%05d-of-%05d.safetensors" % (i, n): names
                 for i, names in enumerate(shards)}
    for fname, names in files.items():
        with open(os.path.join(dirpath, fname), "wb") as f:
            f.write(safetensors([by_name[n] for n in names]))
    groups = sorted({t[0].split(".", 1)[0] for t in tensors}) or ["encoder", "predictor"]
    h = {
        "schema_version": schema_version,
        "content_hash": "",
        "parent_hash": None,
        "wmcp_version": "wmcp-1.0.0",
        "round_index": 0,
        "config_hash": "cfg",
        "param_groups": groups,
        "tensor_manifest": [
            {"name": n, "group": n.split(".", 1)[0], "dtype": TOKENS.get(d, d), "shape": list(s)}
            for n, d, s, _ in sorted(tensors, key=lambda t: t[0].encode("utf-8"))],
        "weight_files": list(files),
        "created_at": "2026-06-02T12:00:00Z",
    }
    if schema_version >= 2:
        h["model_arch"] = None
    if callable(header):
        header(h)
    elif header:
        h.update({k: v for k, v in header.items()})
    if not h["content_hash"]:
        h["content_hash"] = canonical_hash(h, tensors)
    write_header(dirpath, h)
    if index:
        wm = {n: fname for fname, names in files.items() for n in names}
        with open(os.path.join(dirpath, "weights.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, f)
    return h, h["content_hash"]


def write_header(dirpath, h, raw=None):
    with open(os.path.join(dirpath, "header.json"), "wb") as f:
        f.write(raw if raw is not None else json.dumps(h, indent=2).encode("utf-8"))
