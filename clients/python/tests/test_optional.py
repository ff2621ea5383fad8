"""The client with the standard library alone. A child Python gets a meta
path finder that hides NumPy, PyTorch or cryptography as if they were not
installed: the default load must still work (plain Tensor objects), and
whatever needs a hidden package must say which one and how to install it,
as a VerificationError (MissingPackage), before it reads any file."""

import json
import os
import struct
import subprocess
import sys
import unittest

from helpers import CLIENT, TempDirTest, write_artifact

from lensemble_verify_client import MissingPackage, Tensor, VerificationError, load_verified

try:
    import numpy as np
except ImportError:
    np = None

# argv[1]: the top-level packages to hide, comma-separated; argv[2]: the client.
HIDE = r'''
import sys

class _Hide:
    """Finds nothing it hides: the import fails as for a package not installed."""
    def __init__(self, names):
        self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError("No module named %r" % name, name=name)
        return None

_hidden = set(n for n in sys.argv[1].split(",") if n)
sys.meta_path.insert(0, _Hide(_hidden))
for _n in _hidden:
    try:
        __import__(_n)
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit("%s is not hidden" % _n)
sys.path.insert(0, sys.argv[2])
import json
from lensemble_verify_client import VerificationError, load_verified

def refusal(call):
    """What a call that must fail raised, as JSON on stdout."""
    try:
        call()
    except VerificationError as e:
        print(json.dumps({"type": type(e).__name__, "code": e.code, "detail": e.detail,
                          "import_error": isinstance(e, ImportError),
                          "package": getattr(e, "package", None),
                          "debian": getattr(e, "debian", None)}))
    else:
        print(json.dumps({"type": None}))
'''


def hidden(test, packages, code, *args):
    """Run `code` in a child Python with `packages` hidden; its stdout as
    JSON (the last line)."""
    r = subprocess.run([sys.executable, "-c", HIDE + code, ",".join(packages), CLIENT] +
                       list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    test.assertEqual(r.returncode, 0, "the child failed:\n%s%s"
                     % (r.stdout.decode(), r.stderr.decode()))
    return json.loads(r.stdout.decode().splitlines()[-1])


class WithoutOptionalPackages(TempDirTest):
    def setUp(self):
        super().setUp()
        self.d = os.path.join(self.tmp, "a")
        write_artifact(self.d)

    def test_default_load_without_numpy(self):
        out = hidden(self, ["numpy"], r'''
r = load_verified(sys.argv[3])
print(json.dumps({"framework": r.framework,
                  "types": sorted({type(t).__name__ for t in r.values()}),
                  "tensors": {n: [t.dtype, list(t.shape), t.nbytes, t.tolist()]
                              for n, t in r.items()},
                  "data": r["encoder.b"].tobytes().hex()}))
''', self.d)
        self.assertEqual((out["framework"], out["types"]), ("plain", ["Tensor"]))
        self.assertEqual(out["tensors"], {
            "encoder.a": ["float32", [2, 3], 24, [[1, 2, 3], [4, 5, 6]]],
            "encoder.b": ["float16", [4], 8, [0.5, -1, 2, 65504]],
            "predictor.c": ["bfloat16", [2], 4, [1, -2]],
            "predictor.d": ["float32", [], 4, 3.25],
            "predictor.e": ["float32", [0, 3], 0, []],
        })
        self.assertEqual(out["data"], struct.pack("<4e", 0.5, -1, 2, 65504).hex())

    def test_nothing_optional_at_all(self):
        out = hidden(self, ["numpy", "torch", "cryptography"], r'''
a = load_verified(sys.argv[3])
b = load_verified(sys.argv[3], framework="plain")
c = load_verified(sys.argv[3], framework=None)
print(json.dumps([a.framework, b.framework, c.framework, len(a), len(b), len(c),
                  sorted(m.partition(".")[0] for m in sys.modules
                         if m.partition(".")[0] in ("numpy", "torch", "cryptography"))]))
''', self.d)
        self.assertEqual(out, ["plain", "plain", None, 5, 5, 5, []])

    def assertNamesPackage(self, out, package, debian):
        self.assertEqual((out["type"], out["code"], out["import_error"]),
                         ("MissingPackage", "missing_package", True), out)
        self.assertEqual((out["package"], out["debian"]), (package, debian))
        self.assertIn("apt-get install %s" % debian, out["detail"])
        self.assertIn("(the Python package %s)" % package, out["detail"])
        self.assertIn("is not installed", out["detail"])

    def test_numpy_asked_for_but_missing(self):
        out = hidden(self, ["numpy"], r'''
refusal(lambda: load_verified(sys.argv[3], framework="numpy"))
''', self.d)
        self.assertNamesPackage(out, "numpy", "python3-numpy")
        self.assertIn('framework="numpy" needs NumPy', out["detail"])

    def test_torch_asked_for_but_missing(self):
        out = hidden(self, ["torch"], r'''
refusal(lambda: load_verified(sys.argv[3], framework="torch"))
''', self.d)
        self.assertNamesPackage(out, "torch", "python3-torch")
        self.assertIn('framework="torch" needs PyTorch', out["detail"])

    def test_cryptography_missing_for_public_key(self):
        # Raised before anything is read: the artifact and the key do not exist.
        out = hidden(self, ["cryptography"], r'''
refusal(lambda: load_verified(sys.argv[3] + "/none", daemon="http://127.0.0.1:1",
                              public_key=sys.argv[3] + "/none.pub", framework=None))
''', self.d)
        self.assertNamesPackage(out, "cryptography", "python3-cryptography")
        self.assertIn("checking the daemon's signed verdict (public_key) needs cryptography",
                      out["detail"])

    def test_cryptography_missing_for_verify_oms(self):
        # Raised before anything is read: the model and the key do not exist.
        out = hidden(self, ["cryptography"], r'''
from lensemble_verify_client import verify_oms
refusal(lambda: verify_oms(sys.argv[3] + "/none", key=sys.argv[3] + "/none.pub"))
''', self.d)
        self.assertNamesPackage(out, "cryptography", "python3-cryptography")
        self.assertIn("verify_oms (an OMS bundle's ECDSA signature) needs cryptography",
                      out["detail"])

    def test_bfloat16_helper_without_numpy(self):
        out = hidden(self, ["numpy"], r'''
from lensemble_verify_client import bfloat16_to_float32
refusal(lambda: bfloat16_to_float32([0x3f80]))
''')
        self.assertNamesPackage(out, "numpy", "python3-numpy")

    def test_command_line_without_cryptography(self):
        out = hidden(self, ["cryptography"], r'''
import contextlib, io, runpy
err = io.StringIO()
sys.argv = ["lensemble_verify_client", "--daemon", "http://127.0.0.1:1",
            "--public-key", sys.argv[3] + ".pub", sys.argv[3]]
with contextlib.redirect_stderr(err):
    try:
        runpy.run_module("lensemble_verify_client", run_name="__main__")
    except SystemExit as e:
        print(json.dumps([e.code, err.getvalue()]))
''', self.d)
        self.assertEqual(out[0], 2, out)
        self.assertIn("apt-get install python3-cryptography", out[1])

    def test_a_package_that_fails_its_own_import(self):
        # Installed but broken: its own error is named, not "not installed".
        pkg = os.path.join(self.tmp, "lib", "numpy")
        os.makedirs(pkg)
        with open(os.path.join(pkg, "__init__.py"), "w") as f:
            f.write("import numpy_core_that_is_not_there\n")
        out = hidden(self, [], r'''
sys.path.insert(0, sys.argv[4])
try:
    load_verified(sys.argv[3], framework="numpy")
except VerificationError as e:
    print(json.dumps([e.code, e.detail, load_verified(sys.argv[3]).framework]))
''', self.d, os.path.dirname(pkg))
        self.assertEqual((out[0], out[2]), ("missing_package", "plain"), out)
        self.assertIn("NumPy (the Python package numpy), but it cannot be imported "
                      "(No module named 'numpy_core_that_is_not_there')", out[1])


class Plain(TempDirTest):
    def load(self, tensors, **kw):
        d = os.path.join(self.tmp, "p")
        write_artifact(d, tensors, **kw)
        return load_verified(d, framework="plain")

    def test_values_exact(self):
        f16 = struct.pack("<4H", 0x0001, 0x8000, 0x7c00, 0x3555)      # 2**-24, -0, inf, ~1/3
        bf16 = struct.pack("<3H", 0x0001, 0xff80, 0x3eab)            # tiny, -inf, ~1/3
        r = self.load([("encoder.h", "F16", (4,), f16), ("encoder.b", "BF16", (3,), bf16),
                       ("predictor.f", "F32", (1, 2), struct.pack("<2f", 1e-45, -3.5))])
        self.assertEqual(r["encoder.h"].tolist(),
                         [2.0 ** -24, -0.0, float("inf"), struct.unpack("<e", f16[6:])[0]])
        self.assertEqual(str(r["encoder.h"].tolist()[1]), "-0.0")
        self.assertEqual(r["encoder.b"].tolist(),
                         [struct.unpack("<f", b"\0\0\x01\0")[0], float("-inf"),
                          struct.unpack("<f", b"\0\0\xab\x3e")[0]])
        self.assertEqual(r["predictor.f"].tolist(), [[struct.unpack("<f", struct.pack(
            "<f", 1e-45))[0], -3.5]])

    def test_shapes_and_empty_tensors(self):
        r = self.load([("encoder.a", "F32", (0, 3), b""), ("encoder.b", "F16", (3, 0), b""),
                       ("encoder.c", "BF16", (2, 0, 4), b""),
                       ("predictor.s", "F32", (), struct.pack("<f", 7)),
                       ("predictor.t", "F32", (2, 1, 2), struct.pack("<4f", 1, 2, 3, 4))])
        self.assertEqual(r["encoder.a"].tolist(), [])
        self.assertEqual(r["encoder.b"].tolist(), [[], [], []])
        self.assertEqual(r["encoder.c"].tolist(), [[], []])
        self.assertEqual(r["predictor.s"].tolist(), 7.0)
        self.assertEqual(r["predictor.t"].tolist(), [[[1, 2]], [[3, 4]]])
        self.assertEqual([(t.size, t.nbytes) for t in r.values()],
                         [(0, 0), (0, 0), (0, 0), (1, 4), (4, 16)])

    def test_a_read_only_view_of_the_verified_bytes(self):
        r = self.load(None)
        a, d = r["encoder.a"], r["predictor.d"]
        self.assertIsInstance(a, Tensor)
        self.assertEqual((a.dtype, a.shape, a.data.format, a.data.readonly),
                         ("float32", (2, 3), "B", True))
        self.assertIs(a.data.obj, d.data.obj)          # one buffer for the file: no copy
        with self.assertRaises(TypeError):
            a.data[0] = 1
        self.assertEqual(a.tobytes(), struct.pack("<6f", 1, 2, 3, 4, 5, 6))
        self.assertIn("float32", repr(a))

    @unittest.skipIf(np is None, "NumPy is not installed")
    def test_auto_is_numpy_when_importable(self):
        d = os.path.join(self.tmp, "a")
        write_artifact(d)
        r = load_verified(d)
        self.assertEqual(r.framework, "numpy")
        self.assertIsInstance(r["encoder.a"], np.ndarray)

    def test_missing_package_is_a_verification_error(self):
        e = MissingPackage("torch", "something")
        self.assertIsInstance(e, VerificationError)
        self.assertIsInstance(e, ImportError)
        self.assertEqual((e.code, e.name), ("missing_package", "torch"))
        self.assertTrue(str(e).startswith("missing_package: something needs PyTorch"))


if __name__ == "__main__":
    unittest.main()
