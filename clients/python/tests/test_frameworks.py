"""What load_verified returns: NumPy views, memoryviews and (when PyTorch is
installed) torch tensors of the verified bytes, without copies."""

import mmap
import os
import struct
import unittest

from helpers import GOLDEN, TempDirTest, default_tensors, write_artifact

from lensemble_verify_client import VerificationError, bfloat16_to_float32, load_verified

try:
    import numpy as np
except ImportError:         # pragma: no cover - numpy is a test dependency
    np = None
try:
    import torch
except ImportError:
    torch = None

# bfloat16 1.0 and -2.0 (little-endian bit patterns)
BF16 = bytes.fromhex("803f") + bytes.fromhex("00c0")


class Memoryviews(TempDirTest):
    def setUp(self):
        super().setUp()
        self.d = os.path.join(self.tmp, "a")
        write_artifact(self.d)

    def test_formats_and_shapes(self):
        r = load_verified(self.d, framework=None)
        self.assertEqual(list(r), ["encoder.a", "encoder.b", "predictor.c", "predictor.d",
                                   "predictor.e"])
        a = r["encoder.a"]
        self.assertIsInstance(a, memoryview)
        self.assertEqual((a.format, a.shape), ("f", (2, 3)))
        self.assertEqual(a.tolist(), [[1, 2, 3], [4, 5, 6]])
        self.assertEqual((r["encoder.b"].format, r["encoder.b"].shape), ("H", (4,)))
        self.assertEqual(r["encoder.b"].tobytes(), struct.pack("<4e", 0.5, -1, 2, 65504))
        self.assertEqual(r["predictor.c"].tobytes(), BF16)
        self.assertEqual(r["predictor.d"].shape, ())
        self.assertEqual(r["predictor.d"].tolist(), 3.25)
        self.assertEqual(r["predictor.e"].nbytes, 0)
        self.assertEqual(r.dtypes, {"encoder.a": "float32", "encoder.b": "float16",
                                    "predictor.c": "bfloat16", "predictor.d": "float32",
                                    "predictor.e": "float32"})
        self.assertEqual(r.shapes["predictor.e"], (0, 3))
        self.assertEqual(r.nbytes, 24 + 8 + 4 + 4)

    def test_no_third_party_import(self):
        import subprocess
        import sys
        code = ("import sys, builtins\n"
                "real = builtins.__import__\n"
                "def imp(name, *a, **k):\n"
                "    if name.split('.')[0] in ('numpy', 'torch', 'cryptography'):\n"
                "        raise ImportError('blocked ' + name)\n"
                "    return real(name, *a, **k)\n"
                "builtins.__import__ = imp\n"
                "sys.path.insert(0, sys.argv[1])\n"
                "from lensemble_verify_client import load_verified\n"
                "r = load_verified(sys.argv[2], framework=None)\n"
                "print(len(r))\n")
        client = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out = subprocess.run([sys.executable, "-c", code, client, self.d],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertEqual(out.stdout.strip(), b"5")

    def test_bad_framework(self):
        with self.assertRaises(ValueError):
            load_verified(self.d, framework="jax")


@unittest.skipIf(np is None, "NumPy is not installed")
class NumPy(TempDirTest):
    def setUp(self):
        super().setUp()
        self.d = os.path.join(self.tmp, "a")
        write_artifact(self.d)

    def test_dtypes_values_shapes(self):
        r = load_verified(self.d)           # framework="numpy" is the default
        a = r["encoder.a"]
        self.assertIsInstance(a, np.ndarray)
        self.assertEqual((a.dtype, a.shape), (np.dtype("<f4"), (2, 3)))
        np.testing.assert_array_equal(a, [[1, 2, 3], [4, 5, 6]])
        b = r["encoder.b"]
        self.assertEqual(b.dtype, np.dtype("<f2"))
        np.testing.assert_array_equal(b, np.array([0.5, -1, 2, 65504], dtype=np.float16))
        c = r["predictor.c"]
        self.assertEqual(c.dtype, np.dtype("<u2"))
        np.testing.assert_array_equal(bfloat16_to_float32(c), np.array([1, -2], np.float32))
        self.assertEqual(r["predictor.d"].shape, ())
        self.assertEqual(float(r["predictor.d"]), 3.25)
        self.assertEqual(r["predictor.e"].shape, (0, 3))

    def test_zero_copy_views_of_one_buffer(self):
        r = load_verified(self.d)
        a, d = r["encoder.a"], r["predictor.d"]
        self.assertFalse(a.flags.owndata)
        def root(x):
            while isinstance(x, np.ndarray) and x.base is not None:
                x = x.base
            return x.obj if isinstance(x, memoryview) else x
        self.assertIs(root(a), root(d))         # one buffer for the file
        self.assertIsInstance(root(a), (bytearray, mmap.mmap))
        # the tensors sit where the file has them, relative to each other
        self.assertEqual(d.ctypes.data - a.ctypes.data, 24 + 8 + 4)

    def test_golden_mixed_dtypes(self):
        r = load_verified(os.path.join(GOLDEN, "round-00002"))
        self.assertEqual(r["predictor.brain"].dtype, np.dtype("<u2"))
        self.assertEqual(r["predictor.brain"].shape, (2, 3, 2))
        self.assertEqual(r["encoder.half"].dtype, np.dtype("<f2"))
        f = bfloat16_to_float32(r["predictor.brain"])
        self.assertEqual(f.dtype, np.float32)
        # exact: bfloat16 is the upper half of a float32
        raw = r["predictor.brain"].astype(np.uint32) << 16
        np.testing.assert_array_equal(f.view(np.uint32), raw)

    def test_unaligned_offsets(self):
        tensors = [("encoder.a", "F16", (1,), b"\0\x3c"),
                   ("encoder.b", "F32", (2,), struct.pack("<2f", 1.5, -7))]
        write_artifact(os.path.join(self.tmp, "u"), tensors)
        r = load_verified(os.path.join(self.tmp, "u"))
        np.testing.assert_array_equal(r["encoder.b"], [1.5, -7])

    def test_bfloat16_helper_refuses_floats(self):
        with self.assertRaises(TypeError):
            bfloat16_to_float32(np.zeros(2, np.float32))

    def test_failure_returns_nothing(self):
        with self.assertRaises(VerificationError):
            load_verified(os.path.join(GOLDEN, "tamper-weight-byte"))


@unittest.skipIf(torch is None, "PyTorch is not installed")
class Torch(TempDirTest):
    def test_tensors(self):
        d = os.path.join(self.tmp, "a")
        write_artifact(d, default_tensors())
        r = load_verified(d, framework="torch")
        self.assertEqual(r["encoder.a"].dtype, torch.float32)
        self.assertEqual(tuple(r["encoder.a"].shape), (2, 3))
        self.assertEqual(r["encoder.a"].tolist(), [[1, 2, 3], [4, 5, 6]])
        self.assertEqual(r["encoder.b"].dtype, torch.float16)
        self.assertEqual(r["predictor.c"].dtype, torch.bfloat16)
        self.assertEqual(r["predictor.c"].float().tolist(), [1.0, -2.0])
        self.assertEqual(r["predictor.d"].item(), 3.25)
        self.assertEqual(tuple(r["predictor.e"].shape), (0, 3))

    def test_golden(self):
        r = load_verified(os.path.join(GOLDEN, "round-00002"), framework="torch")
        self.assertEqual(r["predictor.brain"].dtype, torch.bfloat16)
        self.assertEqual(tuple(r["predictor.brain"].shape), (2, 3, 2))


if __name__ == "__main__":
    unittest.main()
