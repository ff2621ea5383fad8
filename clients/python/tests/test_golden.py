"""Every golden case: the verdict, code and hash cases.json gives, and the
same verdict and code as the C verifier."""

import json
import os
import struct
import unittest

from helpers import GOLDEN, TempDirTest, c_verdict, need_cli, py_verdict

from lensemble_verify_client import VerificationError, load_verified


def cases():
    with open(os.path.join(GOLDEN, "cases.json"), encoding="utf-8") as f:
        return json.load(f)["cases"]


class GoldenCases(unittest.TestCase):
    """One test per case (added below), each against cases.json and the C
    verifier."""

    def test_every_case_directory_is_listed(self):
        dirs = {e for e in os.listdir(GOLDEN) if os.path.isdir(os.path.join(GOLDEN, e))}
        self.assertEqual(dirs, {c["path"] for c in cases()})

    def check_case(self, case):
        path = os.path.join(GOLDEN, case["path"])
        code, what = py_verdict(path)
        if case["expect"] == "ok":
            self.assertEqual(code, "ok", what)
            self.assertEqual(what, case["content_hash"])
            r = load_verified(path, framework=None)
            self.assertEqual(r.round_index, case["round_index"])
            self.assertEqual(r.parent_hash, case["parent_hash"])
            self.assertEqual(r.trust, "header")
        else:
            self.assertEqual(code, case["code"], what)
            self.assertIsInstance(what, str)
            self.assertTrue(what)
        need_cli(self)
        c_code, c_what = c_verdict(path)
        self.assertEqual(code, c_code, "client: %s; C verifier: %s" % (what, c_what))
        if code == "ok":
            self.assertEqual(what, c_what)


def _add_case(case):
    def test(self):
        self.check_case(case)
    test.__doc__ = "%s: %s" % (case["name"], case["why"])
    setattr(GoldenCases, "test_case_" + case["name"].replace("-", "_"), test)


for _case in cases():
    _add_case(_case)


class GoldenMore(unittest.TestCase):
    def test_expected_hash_of_each_ok_case(self):
        for case in cases():
            if case["expect"] != "ok":
                continue
            with self.subTest(case=case["name"]):
                path = os.path.join(GOLDEN, case["path"])
                r = load_verified(path, expect=case["content_hash"].upper(), framework=None)
                self.assertEqual(r.trust, "expect")
                with self.assertRaises(VerificationError) as cm:
                    load_verified(path, expect="0" * 64, framework=None)
                self.assertEqual(cm.exception.code, "checkpoint_integrity")

    def test_error_carries_code_and_detail(self):
        with self.assertRaises(VerificationError) as cm:
            load_verified(os.path.join(GOLDEN, "schema-too-new"), framework=None)
        e = cm.exception
        self.assertEqual(e.code, "schema_version_mismatch")
        self.assertIn("999", e.detail)
        self.assertTrue(str(e).startswith("schema_version_mismatch: "))


class Sharded(TempDirTest):
    def test_sharded_equals_unsharded(self):
        a = load_verified(os.path.join(GOLDEN, "round-00000"), framework=None)
        b = load_verified(os.path.join(GOLDEN, "round-00000-sharded"), framework=None)
        self.assertEqual(a.content_hash, b.content_hash)
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertEqual(a[name].tobytes(), b[name].tobytes())

    def test_missing_shard(self):
        d = self.copy_case("round-00000-sharded")
        os.unlink(os.path.join(d, "weights-00001-of-00003.safetensors"))
        self.agree(d, "checkpoint_integrity")

    def test_shard_swapped_for_another(self):
        d = self.copy_case("round-00000-sharded")
        os.rename(os.path.join(d, "weights-00000-of-00003.safetensors"), os.path.join(d, "x"))
        os.rename(os.path.join(d, "weights-00002-of-00003.safetensors"),
                  os.path.join(d, "weights-00000-of-00003.safetensors"))
        os.rename(os.path.join(d, "x"), os.path.join(d, "weights-00002-of-00003.safetensors"))
        # The same tensors in other files: the hash does not bind the files.
        self.agree(d, "ok")

    def test_golden_bytes_decode(self):
        r = load_verified(os.path.join(GOLDEN, "round-00002"), framework=None)
        self.assertEqual(r.dtypes["predictor.brain"], "bfloat16")
        self.assertEqual(r.dtypes["encoder.half"], "float16")
        self.assertEqual(r.shapes["predictor.brain"], (2, 3, 2))
        with open(os.path.join(GOLDEN, "round-00002", "weights.safetensors"), "rb") as f:
            raw = f.read()
        hlen = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + hlen])
        for name, t in hdr.items():
            b, e = t["data_offsets"]
            self.assertEqual(r[name].tobytes(), raw[8 + hlen + b:8 + hlen + e], name)


if __name__ == "__main__":
    unittest.main()
