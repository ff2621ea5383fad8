"""What load_verified returns: NumPy views, memoryviews and PyTorch tensors
of the verified bytes, without copies, and who owns that memory."""

import mmap
import os
import struct
import subprocess
import sys
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


def need_framework(test, module, what, debian):
    """make check (LVC_REQUIRE_FRAMEWORKS=1) tests NumPy and PyTorch for
    real: a missing one fails there, and is skipped only when run by hand."""
    if module is None:
        if os.environ.get("LVC_REQUIRE_FRAMEWORKS"):
            test.fail("%s is not installed: install %s (scripts/install-deps)" % (what, debian))
        test.skipTest("%s is not installed" % what)


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


class NumPy(TempDirTest):
    def setUp(self):
        super().setUp()
        need_framework(self, np, "NumPy", "python3-numpy")
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


class Torch(TempDirTest):
    """framework="torch", what participants use: dtypes, shards, empty
    tensors, alignment, and who owns the memory."""

    def setUp(self):
        super().setUp()
        need_framework(self, torch, "PyTorch", "python3-torch")

    def load(self, tensors, **kw):
        d = os.path.join(self.tmp, "t")
        write_artifact(d, tensors, **kw)
        return d, load_verified(d, framework="torch")

    @staticmethod
    def bits(t):
        """A 16- or 32-bit tensor's raw bit patterns, as a list of ints."""
        return t.reshape(-1).view(torch.int16 if t.element_size() == 2 else torch.int32).tolist()

    def test_tensors(self):
        d = os.path.join(self.tmp, "a")
        write_artifact(d, default_tensors())
        r = load_verified(d, framework="torch")
        self.assertEqual(r.framework, "torch")
        self.assertEqual(r["encoder.a"].dtype, torch.float32)
        self.assertEqual(tuple(r["encoder.a"].shape), (2, 3))
        self.assertEqual(r["encoder.a"].tolist(), [[1, 2, 3], [4, 5, 6]])
        self.assertEqual(r["encoder.b"].dtype, torch.float16)
        self.assertEqual(r["encoder.b"].tolist(), [0.5, -1, 2, 65504])
        self.assertEqual(r["predictor.c"].dtype, torch.bfloat16)
        self.assertEqual(r["predictor.c"].float().tolist(), [1.0, -2.0])
        self.assertEqual(r["predictor.d"].item(), 3.25)
        self.assertEqual(tuple(r["predictor.e"].shape), (0, 3))

    def test_every_bit_pattern_kept(self):
        # Subnormals, signed zeros, infinities and NaN payloads, bit for bit.
        f16 = [0x0001, 0x8000, 0x7c00, 0xfc00, 0x7e01, 0x3555, 0x7bff]
        bf16 = [0x0001, 0x8000, 0x7f80, 0xff80, 0x7fc1, 0x3eab, 0x7f7f]
        f32 = [0x00000001, 0x80000000, 0x7f800000, 0x7fc00001, 0x3eaaaaab, 0x7f7fffff]
        _, r = self.load([
            ("encoder.h", "F16", (7,), struct.pack("<7H", *f16)),
            ("encoder.b", "BF16", (7,), struct.pack("<7H", *bf16)),
            ("predictor.f", "F32", (2, 3), struct.pack("<6I", *f32))])
        s16 = lambda xs: [x - 0x10000 if x >= 0x8000 else x for x in xs]  # noqa: E731
        s32 = lambda xs: [x - (1 << 32) if x >= 1 << 31 else x for x in xs]  # noqa: E731
        self.assertEqual((r["encoder.h"].dtype, self.bits(r["encoder.h"])),
                         (torch.float16, s16(f16)))
        self.assertEqual((r["encoder.b"].dtype, self.bits(r["encoder.b"])),
                         (torch.bfloat16, s16(bf16)))
        self.assertEqual((r["predictor.f"].dtype, self.bits(r["predictor.f"])),
                         (torch.float32, s32(f32)))
        self.assertEqual(r["encoder.b"][5].item(), struct.unpack("<f", b"\0\0\xab\x3e")[0])

    def test_sharded(self):
        tensors = default_tensors() + [("predictor.z", "BF16", (2, 2), struct.pack("<4H", 1, 2, 3, 4))]
        shards = [["encoder.a", "predictor.e"], ["encoder.b", "predictor.c"],
                  ["predictor.d", "predictor.z"]]
        for index in (False, True):
            with self.subTest(index=index):
                d, r = self.load(tensors, shards=shards, index=index)
                self.assertEqual(len(os.listdir(d)), 4 + index)
                self.assertEqual(list(r), ["encoder.a", "encoder.b", "predictor.c",
                                           "predictor.d", "predictor.e", "predictor.z"])
                self.assertEqual(r["encoder.a"].tolist(), [[1, 2, 3], [4, 5, 6]])
                self.assertEqual(r["encoder.b"].tolist(), [0.5, -1, 2, 65504])
                self.assertEqual(r["predictor.c"].float().tolist(), [1, -2])
                self.assertEqual(r["predictor.d"].item(), 3.25)
                self.assertEqual(self.bits(r["predictor.z"]), [1, 2, 3, 4])
                self.assertEqual(r.dtypes["predictor.z"], "bfloat16")

    def test_zero_size(self):
        tensors = [("encoder.a", "F32", (0,), b""), ("encoder.b", "F16", (0, 3), b""),
                   ("encoder.c", "BF16", (3, 0), b""), ("encoder.d", "F32", (2, 0, 4), b""),
                   ("predictor.x", "F32", (1,), struct.pack("<f", 2.5))]
        # One shard holds nothing but empty tensors: a file with no data at all.
        for shards in (None, [["encoder.a", "encoder.b", "encoder.c", "encoder.d"],
                              ["predictor.x"]]):
            with self.subTest(shards=shards):
                _, r = self.load(tensors, shards=shards)
                want = {"encoder.a": (torch.float32, (0,)), "encoder.b": (torch.float16, (0, 3)),
                        "encoder.c": (torch.bfloat16, (3, 0)),
                        "encoder.d": (torch.float32, (2, 0, 4))}
                for n, (dt, shape) in want.items():
                    t = r[n]
                    self.assertEqual((t.dtype, tuple(t.shape), t.numel()), (dt, shape, 0), n)
                    self.assertEqual(torch.cat([t.reshape(-1), t.reshape(-1)]).numel(), 0)
                self.assertEqual(r["predictor.x"].tolist(), [2.5])
                self.assertEqual(r.nbytes, 4)

    def test_unaligned_tensors_are_copied_aligned(self):
        # A 2-byte tensor first puts the float32 after it at an odd offset
        # (for its dtype): a float pointer PyTorch must never be handed.
        _, r = self.load([("encoder.a", "F16", (1,), b"\0\x3c"),
                          ("encoder.b", "F32", (2,), struct.pack("<2f", 1.5, -7)),
                          ("encoder.c", "BF16", (1,), b"\x80\x3f"),
                          ("encoder.d", "F32", (1,), struct.pack("<f", 9))])
        for n, t in r.items():
            self.assertEqual(t.data_ptr() % t.element_size(), 0, n)
        self.assertEqual(r["encoder.b"].tolist(), [1.5, -7])
        self.assertEqual(r["encoder.c"].item(), 1.0)
        self.assertEqual(r["encoder.d"].item(), 9)

    def test_views_of_one_buffer_per_file(self):
        # Not copies: one read of the file, the tensors where it has them.
        _, r = self.load(default_tensors())
        a, d = r["encoder.a"], r["predictor.d"]
        self.assertEqual(d.data_ptr() - a.data_ptr(), 24 + 8 + 4)

    def test_changes_in_place_stay_in_the_tensor(self):
        d, r = self.load(default_tensors())
        p = os.path.join(d, "weights.safetensors")
        with open(p, "rb") as f:
            before = f.read()
        r["encoder.a"].add_(100)
        r["encoder.b"].fill_(0)
        r["predictor.c"].mul_(2)
        self.assertEqual(r["encoder.a"].tolist(), [[101, 102, 103], [104, 105, 106]])
        # the neighbours in the same buffer, the file and a new load are as they were
        self.assertEqual(r["predictor.d"].item(), 3.25)
        with open(p, "rb") as f:
            self.assertEqual(f.read(), before)
        again = load_verified(d, framework="torch")
        self.assertEqual(again.content_hash, r.content_hash)
        self.assertEqual(again["encoder.a"].tolist(), [[1, 2, 3], [4, 5, 6]])
        self.assertEqual(again["encoder.b"].tolist(), [0.5, -1, 2, 65504])
        self.assertEqual(again["predictor.c"].float().tolist(), [1, -2])

    def test_tensors_own_their_memory(self):
        # In a child, so that a tensor left pointing at freed or unmapped
        # memory fails the test rather than the runner. Large enough for
        # the anonymous-map buffer; the files are then rewritten and removed.
        code = r"""
import gc, os, shutil, struct, sys
sys.path.insert(0, sys.argv[1])
import torch
from helpers import write_artifact
from lensemble_verify_client import load_verified
n = 1 << 19
big = struct.pack("<f", 1.5) * n
d = sys.argv[2]
write_artifact(d, [("encoder.big", "F32", (n,), big), ("encoder.s", "BF16", (2,), b"\x80\x3f\x00\xc0")],
               shards=[["encoder.big"], ["encoder.s"]])
r = load_verified(d, framework="torch")
big_t, small = r["encoder.big"], r["encoder.s"]
del r
gc.collect()
for name in os.listdir(d):
    with open(os.path.join(d, name), "r+b") as f:
        f.write(b"\xff" * 64)
shutil.rmtree(d)
junk = [bytearray(1 << 20) for _ in range(64)]
del junk
gc.collect()
ok = (big_t.sum().item() == 1.5 * n and big_t[-1].item() == 1.5 and
      small.float().tolist() == [1.0, -2.0])
big_t.fill_(3)
print("ok" if ok and big_t.sum().item() == 3 * n else "wrong values")
"""
        out = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(
            __file__)), os.path.join(self.tmp, "own")], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, timeout=120)
        self.assertEqual((out.returncode, out.stdout.strip()), (0, b"ok"), out.stderr.decode())

    def test_golden(self):
        r = load_verified(os.path.join(GOLDEN, "round-00002"), framework="torch")
        self.assertEqual(r["predictor.brain"].dtype, torch.bfloat16)
        self.assertEqual(tuple(r["predictor.brain"].shape), (2, 3, 2))
        with open(os.path.join(GOLDEN, "round-00002", "weights.safetensors"), "rb") as f:
            raw = f.read()
        for n, t in r.items():      # each tensor's bytes are the file's
            b = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            self.assertIn(b, raw, n)


if __name__ == "__main__":
    unittest.main()
