"""Tar artifacts: every golden case packed by tarfile (each format, in one
directory and at the top level) gives the verdict of its directory and the
verdict of the C verifier on the same tar; broken archives, and archives
that GNU tar and tarfile would read two ways, are refused with the C
verifier's code and sentence, word for word."""

import glob
import io
import os
import shutil
import subprocess
import tarfile
import unittest

from helpers import GOLDEN, DATA, TempDirTest, c_verdict, have_cli, need_cli, py_verdict

from lensemble_verify_client import VerificationError, load_verified

FORMATS = {"default": {}, "ustar": {"format": tarfile.USTAR_FORMAT},
           "gnu": {"format": tarfile.GNU_FORMAT}, "pax": {"format": tarfile.PAX_FORMAT}}
CORPUS = os.path.join(DATA, "..", "..", "fuzz", "corpus")
# The fuzzer's seeds, and the differential check's kept archives: the
# accepted shapes it found, and those that once read two ways.
SEEDS = os.path.join(CORPUS, "fuzz_tar")
TAR_DIFF = os.path.join(CORPUS, "tar-diff")
NOT_TAR = "not a valid artifact tar: "


def pack(path, src, arcdir, fmt="default"):
    """src's files into the tar at path, under arcdir ("" for the top level)."""
    with tarfile.open(path, "w", **FORMATS[fmt]) as t:
        if arcdir:
            t.add(src, arcname=arcdir)
        else:
            for f in sorted(os.listdir(src)):
                t.add(os.path.join(src, f), arcname=f)
    return path


def member(t, name, data=b"", kind=tarfile.REGTYPE, **kw):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.size = len(data) if kind in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    for k, v in kw.items():
        setattr(ti, k, v)
    t.addfile(ti, io.BytesIO(data) if ti.size else None)


def raw_member(name, data=b"", kind=tarfile.REGTYPE, fmt=tarfile.USTAR_FORMAT, **patch):
    """A header block and its data, padded: the header written by tarfile,
    then each patch at_OFFSET=bytes written at OFFSET, and the checksum made
    right again."""
    ti = tarfile.TarInfo(name)
    ti.type, ti.size, ti.mode, ti.mtime = kind, len(data), 0o644, 1700000000
    h = bytearray(ti.tobuf(fmt)[-tarfile.BLOCKSIZE:])
    for k, v in patch.items():
        off = int(k[3:])
        h[off:off + len(v)] = v
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h) + data + bytes(-len(data) % tarfile.BLOCKSIZE)


def rec(key, value):
    """One pax record, "LEN key=value\\n", LEN counting the whole record."""
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(b"%d" % n) + len(body) != n:
        n += 1
    return b"%d" % n + body


def raw_pax(records, kind=tarfile.XHDTYPE, padding=b""):
    """A pax header of exactly these records, its padding starting with
    `padding`."""
    blk = raw_member("././@PaxHeader", records, kind)
    if padding:
        at = tarfile.BLOCKSIZE + len(records)
        blk = blk[:at] + padding + blk[at + len(padding):]
    return blk


def raw_end(body):
    """body, the end marker and zeros to a whole record, as tarfile writes."""
    body += bytes(2 * tarfile.BLOCKSIZE)
    return body + bytes(-len(body) % tarfile.RECORDSIZE)


def golden_member(case, name, **kw):
    with open(os.path.join(GOLDEN, case, name), "rb") as f:
        return raw_member(name, f.read(), **kw)


def without_json_diagnostic(verdict):
    code, detail = verdict
    cut = detail.find(" is not valid JSON (")
    return code, detail if cut < 0 else detail[:cut] + " is not valid JSON (...)"


class GoldenTars(TempDirTest):
    def test_every_case_as_tar(self):
        for case in sorted(os.listdir(GOLDEN)):
            src = os.path.join(GOLDEN, case)
            if not os.path.isdir(src):
                continue
            want = py_verdict(src)
            for fmt in FORMATS:
                for arcdir in (case, ""):
                    with self.subTest(case=case, format=fmt, top=not arcdir):
                        tar = pack(os.path.join(self.tmp, "%s-%s-%d.tar" % (case, fmt, not arcdir)),
                                   src, arcdir, fmt)
                        self.assertEqual(py_verdict(tar), want)
                        if have_cli():
                            self.assertEqual(c_verdict(tar), want)

    def test_same_bytes_and_expect(self):
        src = os.path.join(GOLDEN, "round-00002")
        tar = pack(os.path.join(self.tmp, "r2.tar"), src, "round-00002", "pax")
        a = load_verified(src, framework=None)
        b = load_verified(tar, expect=a.content_hash, framework=None)
        self.assertEqual(b.trust, "expect")
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertEqual(a[name].tobytes(), b[name].tobytes(), name)
        with self.assertRaises(VerificationError) as cm:
            load_verified(tar, expect="0" * 64, framework=None)
        self.assertEqual(cm.exception.code, "checkpoint_integrity")

    def test_missing_weight_file(self):
        tar = os.path.join(self.tmp, "x.tar")
        with tarfile.open(tar, "w") as t:
            t.add(os.path.join(GOLDEN, "round-00000", "header.json"), arcname="header.json")
        self.assertEqual(self.agree(tar, "checkpoint_integrity")[1],
                         "weights.safetensors is missing")


class BrokenTars(TempDirTest):
    """Each refused by the client with the C verifier's very sentence."""

    def same_refusal(self, path, needle):
        code, detail = py_verdict(path)
        self.assertEqual(code, "artifact_invalid", detail)
        self.assertTrue(detail.startswith(NOT_TAR), detail)
        self.assertIn(needle, detail)
        need_cli(self)
        self.assertEqual(c_verdict(path), (code, detail))

    def build(self, name, fn, fmt="default"):
        path = os.path.join(self.tmp, name)
        with tarfile.open(path, "w", **FORMATS[fmt]) as t:
            fn(t)
        return path

    def test_links_devices_fifo(self):
        for kind, why in ((tarfile.SYMTYPE, "is a symbolic link"),
                          (tarfile.LNKTYPE, "is a hard link"),
                          (tarfile.CHRTYPE, "is a character device"),
                          (tarfile.BLKTYPE, "is a block device"),
                          (tarfile.FIFOTYPE, "is a FIFO")):
            with self.subTest(why=why):
                path = self.build("k.tar", lambda t: (
                    member(t, "header.json", b"{}"),
                    member(t, "weights.safetensors", kind=kind, linkname="header.json")))
                self.same_refusal(path, why)

    def test_names(self):
        for name, why in (("../header.json", 'has a ".." component'),
                          ("/header.json", "has an absolute name"),
                          ("d/sub/header.json", "nested deeper than one directory")):
            with self.subTest(name=name):
                path = self.build("n.tar", lambda t: member(t, name, b"{}"))
                self.same_refusal(path, why)

    def test_layouts(self):
        self.same_refusal(self.build("two.tar", lambda t: (
            member(t, "a/header.json", b"{}"), member(t, "b/w", b"w"))),
            "more than one top directory")
        self.same_refusal(self.build("mixed.tar", lambda t: (
            member(t, "header.json", b"{}"), member(t, "d/w", b"w"))),
            "while files lie at the top level")
        self.same_refusal(self.build("dup.tar", lambda t: (
            member(t, "header.json", b"{}"), member(t, "./header.json", b"{}"))),
            'member "header.json" appears twice')

    def test_pax(self):
        self.same_refusal(self.build("sparse.tar", lambda t: member(
            t, "w", b"x", pax_headers={"GNU.sparse.major": "1"}), "pax"),
            "sparse file (GNU.sparse.major)")
        self.same_refusal(self.build("long.tar", lambda t: member(
            t, "w", b"x", pax_headers={"path": "p" * 4097}), "pax"),
            "above the limit of 4096")

    def test_cut_and_padded(self):
        good = pack(os.path.join(self.tmp, "g.tar"), os.path.join(GOLDEN, "round-00000"),
                    "", "ustar")
        with open(good, "rb") as f:
            raw = f.read()
        for name, data, why in (
                ("cut.tar", raw[:2048], "bytes of data but the archive ends"),
                ("noend.tar", raw[:2560], "without its end marker"),
                ("odd.tar", raw[:-100], "not a whole number of 512-byte blocks"),
                ("garbage.tar", raw + b"x" + bytes(511), "other than zero follow the end marker"),
                ("sum.tar", b"H" + raw[1:], "bad checksum"),
                ("empty.tar", b"", "the file is empty")):
            with self.subTest(name=name):
                path = os.path.join(self.tmp, name)
                with open(path, "wb") as f:
                    f.write(data)
                self.same_refusal(path, why)

    def test_fuzz_seeds_agree_with_c(self):
        """Every fuzz seed and every archive the differential check kept,
        valid or not: the client's verdict is the C verifier's, sentence
        for sentence. Where the archive is sound and its header.json is
        not JSON, the parser's own diagnostic in parentheses is worded by
        each parser its own way; the sentence up to it is the same."""
        need_cli(self)
        seeds = sorted(glob.glob(os.path.join(SEEDS, "*.tar")))
        kept = sorted(glob.glob(os.path.join(TAR_DIFF, "*.tar")))
        self.assertGreater(len(seeds), 20)
        self.assertGreater(len(kept), 50)
        for seed in seeds + kept:
            with self.subTest(seed=os.path.relpath(seed, CORPUS)):
                self.assertEqual(without_json_diagnostic(py_verdict(seed)),
                                 without_json_diagnostic(c_verdict(seed)))


class TwoReadings(TempDirTest):
    """Archives that GNU tar and Python's tarfile read two ways, and members
    the verifier does not read: refused, as the C verifier refuses them,
    never resolved one way."""

    def refused(self, body, needle, name="t.tar"):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(raw_end(body))
        code, detail = py_verdict(path)
        self.assertEqual(code, "artifact_invalid", detail)
        self.assertIn(needle, detail)
        with self.assertRaises(VerificationError) as cm:
            load_verified(path, framework=None)
        self.assertEqual((cm.exception.code, cm.exception.detail), (code, detail))
        need_cli(self)
        self.assertEqual(c_verdict(path), (code, detail))
        return detail

    def smuggle(self, pax):
        """The genuine header.json and weights of round-00000, then `pax`
        and a notes.txt whose data is a second weights.safetensors with its
        last byte changed; (the archive, the changed weights)."""
        with open(os.path.join(GOLDEN, "round-00000", "weights.safetensors"), "rb") as f:
            weights = f.read()
        changed = weights[:-1] + bytes([weights[-1] ^ 1])
        body = golden_member("round-00000", "header.json") + \
            golden_member("round-00000", "weights.safetensors") + pax + \
            raw_member("notes.txt", raw_member("weights.safetensors", changed))
        return body, changed

    def test_smuggled_weights(self):
        """An empty pax size is 0 to tarfile, which then reads notes.txt's
        data as a second weights.safetensors, and "the header's size" to
        GNU tar, which reads the genuine one the verifier would hash."""
        body, changed = self.smuggle(raw_pax(b"8 size=\n"))
        with tarfile.open(fileobj=io.BytesIO(raw_end(body))) as t:
            self.assertEqual(t.extractfile("weights.safetensors").read(), changed)
        if shutil.which("tar"):
            r = subprocess.run(["tar", "-xOf", "-", "weights.safetensors"],
                               input=raw_end(body), stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, timeout=60)
            with open(os.path.join(GOLDEN, "round-00000", "weights.safetensors"), "rb") as f:
                self.assertEqual(r.stdout, f.read())
        detail = self.refused(body, "has an empty size record", "smuggle.tar")
        at = body.index(b"././@PaxHeader")
        self.assertEqual(detail, NOT_TAR + "the pax header at offset %d has an empty size "
                         "record, which GNU tar takes for unset and Python's tarfile for a "
                         "value" % at)

    def test_smuggled_weights_other_records(self):
        # The record one byte too long, its last byte a NUL of the padding.
        self.refused(self.smuggle(raw_pax(b"9 size=\n"))[0], "has a malformed record")
        # Hidden in the padding, which tarfile reads as more records.
        self.refused(self.smuggle(raw_pax(rec(b"mtime", b"1"), padding=b"8 size=\n"))[0],
                     "has bytes other than zero after its data")
        # Without the pax header both readers see notes.txt.
        self.refused(self.smuggle(b"")[0],
                     'member "notes.txt" is neither header.json, weights.index.json nor a '
                     'weight file header.json lists')

    def test_a_member_not_read(self):
        """A sound artifact with one more file: the directory verifies, its
        tar does not (whoever extracts it would write unverified bytes)."""
        body = golden_member("round-00000", "header.json") + \
            golden_member("round-00000", "weights.safetensors")
        path = os.path.join(self.tmp, "good.tar")
        with open(path, "wb") as f:
            f.write(raw_end(body))
        self.assertEqual(py_verdict(path), py_verdict(os.path.join(GOLDEN, "round-00000")))
        self.refused(body + raw_member("README", b"hello"), 'member "README" is neither')

    def test_plain_pax_taken(self):
        """What both readers read alike is taken: a pax path and size, times,
        owners and extended attributes, a global comment."""
        with open(os.path.join(GOLDEN, "round-00000", "header.json"), "rb") as f:
            hdata = f.read()
        with open(os.path.join(GOLDEN, "round-00000", "weights.safetensors"), "rb") as f:
            weights = f.read()
        body = raw_pax(rec(b"comment", b"round 0"), tarfile.XGLTYPE) + \
            raw_pax(rec(b"path", b"round-00000/header.json") +
                    rec(b"size", b"%d" % len(hdata)) + rec(b"mtime", b"-1.5") +
                    rec(b"uid", b"0") + rec(b"uname", b"root") +
                    rec(b"SCHILY.xattr.user.a", b"b")) + \
            raw_member("header.json", hdata, at_124=b"00000000000\0") + \
            raw_member("round-00000/weights.safetensors", weights)
        path = os.path.join(self.tmp, "pax.tar")
        with open(path, "wb") as f:
            f.write(raw_end(body))
        want = py_verdict(os.path.join(GOLDEN, "round-00000"))
        self.assertEqual(want[0], "ok")
        self.assertEqual(py_verdict(path), want)
        need_cli(self)
        self.assertEqual(c_verdict(path), want)

    def test_pax_records(self):
        hj = golden_member("round-00000", "header.json")
        size = rec(b"size", b"%d" % os.path.getsize(os.path.join(GOLDEN, "round-00000",
                                                                 "header.json")))
        for records, needle in (
                (b"08 a=b\n", "has a malformed record"),               # leading zero
                (b" 7 a=b\n", "has a malformed record"),               # a blank
                (rec(b"comment", b"c") + b"\n", "has a malformed record"),  # past the records
                (b"14  comment=c\n", "has a keyword with a blank"),
                (b"8 a\tb=c\n", "has a keyword with a blank or a control character"),
                (rec(b"comment", b""), "has an empty comment record"),
                (rec(b"path", b""), "has an empty path record"),
                (rec(b"mtime", b""), "has an empty mtime record"),
                (rec(b"SCHILY.xattr.user.a", b""), "has an empty SCHILY.xattr. record"),
                (rec(b"size", b"+916"), "has a size that is not a decimal number"),
                (rec(b"size", b" 916"), "has a size that is not a decimal number"),
                (rec(b"size", b"0916"), "has a size that is not a decimal number"),
                (rec(b"uid", b"-1"), "has a uid that is not a decimal number"),
                (rec(b"mtime", b"1e9"), "has a mtime that is not a decimal time"),
                (size + size, "has two size records"),
                (rec(b"path", b"header.json") * 2, "has two path records"),
                (rec(b"linkpath", b"weights"), 'has keyword "linkpath", which this reader'),
                (rec(b"hdrcharset", b"BINARY"), 'has keyword "hdrcharset"'),
                (rec(b"GNU.volume.size", b"1"), 'has keyword "GNU.volume.size"')):
            with self.subTest(records=records):
                self.refused(raw_pax(records) + hj, needle)

    def test_global_headers(self):
        hj = golden_member("round-00000", "header.json")
        self.refused(raw_pax(rec(b"path", b"header.json"), tarfile.XGLTYPE) + hj,
                     "the global pax header at offset 0 sets path, which readers apply to "
                     "different members")
        self.refused(raw_pax(rec(b"size", b"916"), tarfile.XGLTYPE) + hj,
                     "the global pax header at offset 0 sets size")
        self.refused(raw_pax(rec(b"mtime", b"1")) +
                     raw_pax(rec(b"comment", b"c"), tarfile.XGLTYPE) + hj,
                     "a global pax header at offset 1024 comes between an extended header "
                     "and its member")
        self.refused(hj + raw_pax(rec(b"comment", b"c"), tarfile.XGLTYPE),
                     "the extended header before offset %d describes no member" % (len(hj) + 1024))

    def test_long_names_and_name_fields(self):
        hj = golden_member("round-00000", "header.json")
        with open(os.path.join(GOLDEN, "round-00000", "header.json"), "rb") as f:
            hdata = f.read()
        for data in (b"header.json\0x\0", b"header.json", b"header.json\0\0"):
            with self.subTest(long_name=data):
                self.refused(raw_member("././@LongLink", data, tarfile.GNUTYPE_LONGNAME,
                                        tarfile.GNU_FORMAT) + hj,
                             "is not a name ended by its only NUL byte")
        # tarfile makes a file whose own name field ends in '/' a directory.
        self.refused(raw_pax(rec(b"path", b"header.json")) +
                     raw_member("x", hdata, at_0=b"dir/\0", at_156=b"\0"),
                     "is not a directory but its header's name field ends in '/'")
        self.refused(raw_member("d/.", hdata), 'file member "d/." ends in a "." component')
        # tarfile reads a GNU header's prefix field as part of its name.
        self.refused(raw_member("header.json", hdata, fmt=tarfile.GNU_FORMAT, at_345=b"d"),
                     "has bytes where ustar keeps a name prefix")

    def test_header_numbers(self):
        """tarfile ends the archive at a field it cannot read as a number
        (GNU tar reads on); GNU tar refuses a negative owner."""
        with open(os.path.join(GOLDEN, "round-00000", "header.json"), "rb") as f:
            hdata = f.read()
        hj = raw_member("header.json", hdata)
        for field, at, value in (("mode", 100, b"0000x44\0"), ("mtime", 136, b" " * 12),
                                 ("devminor", 337, b"-1\0\0\0\0\0\0"),
                                 ("gid", 116, b"\xff" * 8), ("uid", 108, b"+1\0\0\0\0\0\0")):
            with self.subTest(field=field):
                self.refused(hj + raw_member("weights.safetensors", b"w", **{"at_%d" % at: value}),
                             "the header at offset %d has a %s field that GNU tar or Python's "
                             "tarfile cannot read as a number" % (len(hj), field))
        # A time before 1970, in base-256, is a number to both.
        neg = raw_member("header.json", hdata, at_136=b"\xff" * 12)
        path = os.path.join(self.tmp, "neg.tar")
        with open(path, "wb") as f:
            f.write(raw_end(neg))
        want = ("checkpoint_integrity", "weights.safetensors is missing")
        self.assertEqual(py_verdict(path), want)
        need_cli(self)
        self.assertEqual(c_verdict(path), want)


class ChangedTar(TempDirTest):
    def test_rewritten_while_read(self):
        tar = pack(os.path.join(self.tmp, "r.tar"), os.path.join(GOLDEN, "round-00000"), "")
        from lensemble_verify_client import _verify
        real = _verify.Artifact._compute_hash

        def touch_then_hash(art, *a):
            os.utime(tar, (1, 1))
            return real(art, *a)
        _verify.Artifact._compute_hash = touch_then_hash
        try:
            code, detail = py_verdict(tar)
        finally:
            _verify.Artifact._compute_hash = real
        self.assertEqual((code, detail),
                         ("io_error", "the archive changed while it was being verified"))

    def test_not_a_file_nor_directory(self):
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        self.assertEqual(py_verdict(fifo)[0], "artifact_invalid")
        self.assertEqual(py_verdict(os.path.join(self.tmp, "missing.tar"))[0],
                         "artifact_invalid")


if __name__ == "__main__":
    unittest.main()
