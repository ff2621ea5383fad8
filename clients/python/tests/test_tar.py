"""Tar artifacts: every golden case packed by tarfile (each format, in one
directory and at the top level) gives the verdict of its directory and the
verdict of the C verifier on the same tar; broken archives are refused
with the C verifier's code and sentence, word for word."""

import glob
import io
import os
import tarfile
import unittest

from helpers import GOLDEN, DATA, TempDirTest, c_verdict, have_cli, need_cli, py_verdict

from lensemble_verify_client import VerificationError, load_verified

FORMATS = {"default": {}, "ustar": {"format": tarfile.USTAR_FORMAT},
           "gnu": {"format": tarfile.GNU_FORMAT}, "pax": {"format": tarfile.PAX_FORMAT}}
SEEDS = os.path.join(DATA, "..", "..", "fuzz", "corpus", "fuzz_tar")
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
        """Every fuzz seed, valid or not: the client's verdict is the C
        verifier's, sentence for sentence."""
        need_cli(self)
        seeds = sorted(glob.glob(os.path.join(SEEDS, "*.tar")))
        self.assertGreater(len(seeds), 20)
        for seed in seeds:
            with self.subTest(seed=os.path.basename(seed)):
                self.assertEqual(py_verdict(seed), c_verdict(seed))


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
