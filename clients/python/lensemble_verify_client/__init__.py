"""Load a Lensemble model artifact only after verifying the very bytes loaded.

::

    from lensemble_verify_client import load_verified, VerificationError

    weights = load_verified("/srv/lensemble/artifacts/round-00004",
                            daemon="http://127.0.0.1:8420", framework="torch")
    model.load_state_dict(weights)

The standard library is enough for ``framework=None``; NumPy or PyTorch are
needed only to get their arrays, and the ``cryptography`` package only to
check a signed verdict (``public_key``).
"""

import math
import sys

from . import _daemon
from ._errors import (ARTIFACT_INVALID, CHECKPOINT_INTEGRITY, CODES, IO_ERROR,
                      RESIDENCY_VIOLATION, SCHEMA_VERSION_MISMATCH, UNTRUSTED,
                      VerificationError)
from ._events import wait_for_head
from ._verify import DTYPE_TOKEN, Artifact

__all__ = ["load_verified", "wait_for_head", "LoadedArtifact", "VerificationError",
           "bfloat16_to_float32", "CODES", "SCHEMA_VERSION_MISMATCH", "ARTIFACT_INVALID",
           "RESIDENCY_VIOLATION", "CHECKPOINT_INTEGRITY", "UNTRUSTED", "IO_ERROR"]
__version__ = "0.1.0"

_FRAMEWORKS = ("numpy", "torch", None)


class LoadedArtifact(dict):
    """The tensors of a verified artifact, name -> array, in name order.

    Attributes: ``content_hash`` (the canonical hash of the bytes loaded),
    ``round_index``, ``parent_hash``, ``schema_version``, ``dtypes`` (name ->
    "float32" | "float16" | "bfloat16", as stored), ``shapes`` (name ->
    tuple), ``nbytes`` (tensor bytes) and ``trust``: what the hash was held
    against, "expect", "daemon", "attestation" or "header" (integrity only).
    """

    content_hash = None
    round_index = None
    parent_hash = None
    schema_version = None
    trust = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dtypes = {}
        self.shapes = {}
        self.nbytes = 0


def _check_expect(expect):
    if not isinstance(expect, str):
        raise TypeError("expect must be a 64-character hex string")
    e = expect.lower()
    if len(e) != 64 or any(c not in "0123456789abcdef" for c in e):
        raise ValueError("expect must be 64 hex characters, not %r" % expect)
    return e


def _decoder(framework):
    """A function (buffer, offset, tensor) -> array, imported up front so a
    missing package fails before anything is read."""
    if framework == "numpy":
        import numpy as np
        # Explicitly little-endian, as safetensors stores them: right on any host.
        dts = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}

        def decode(buf, off, t, n):
            return np.frombuffer(buf, dtype=dts[t.dtype], count=n, offset=off).reshape(t.shape)
        return decode
    if sys.byteorder != "little":
        raise ValueError("framework=%r needs a little-endian host; use framework='numpy'"
                         % (framework,))
    if framework == "torch":
        import torch
        dts = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}

        def decode(buf, off, t, n):
            if n == 0:
                return torch.empty(t.shape, dtype=dts[t.dtype])
            return torch.frombuffer(buf, dtype=dts[t.dtype], count=n,
                                    offset=off).reshape(t.shape)
        return decode
    fmts = {"F32": "f", "F16": "H", "BF16": "H"}

    def decode(buf, off, t, n):
        mv = memoryview(buf)[off:off + t.nbytes]
        if n == 0:
            return mv.cast(fmts[t.dtype])
        return mv.cast(fmts[t.dtype], t.shape)
    return decode


def load_verified(path, *, daemon=None, expect=None, public_key=None, framework="numpy",
                  timeout=30.0):
    """Verify the artifact directory `path` and return its tensors.

    The hash the bytes must have is, in this order of preference:

    - ``expect`` (64 hex characters), a hash you know from elsewhere (a
      RoundClose message, a ledger record): integrity against it;
    - with ``daemon`` (a base URL, "http://127.0.0.1:8420"), the hash the
      header claims, which lensemble-verifyd must vouch for: ``GET
      /artifact/<hash>`` must say ``"trusted": true``. With ``public_key``
      too (an Ed25519 public key, PEM path or bytes), the daemon's signed
      verdict (``GET /artifact/<hash>/attestation``) is checked instead,
      so that a proxy or a forged answer cannot vouch for an artifact;
      this needs the ``cryptography`` package. When ``expect`` is given as
      well, the daemon must vouch for that hash;
    - with neither, the header's own ``content_hash``. That proves only that
      the files agree with each other (integrity), not that anyone
      committed them: whoever wrote the files also wrote the header. Use it
      for local checks, never for a model received from others.

    header.json and every weight file are read exactly once into memory,
    the canonical hash is computed over those bytes with every check of the
    C verifier, in its order, and the tensors are views of the same
    memory: nothing is read again after the check.

    ``framework`` chooses what the tensors are:

    - "numpy": NumPy arrays, zero-copy views (``np.frombuffer``) of the
      loaded bytes, little-endian dtypes <f4 and <f2. NumPy has no
      bfloat16: BF16 tensors come as uint16 arrays of the raw bit
      patterns; ``bfloat16_to_float32`` converts one exactly (a copy).
    - "torch": PyTorch tensors (``torch.frombuffer``), bfloat16 included.
    - None: ``memoryview`` objects and no third-party package: format "f"
      for float32 and "H" (raw 16-bit patterns) for float16 and bfloat16,
      shaped like the tensor (an empty tensor as a flat empty view). The
      stored dtype of each is in the result's ``dtypes``.

    ``timeout`` is the HTTP timeout for the daemon, in seconds.

    Returns a LoadedArtifact (a dict name -> tensor with the hash and the
    dtypes as attributes). Raises VerificationError (``.code``, ``.detail``)
    when the artifact must not be loaded; ValueError or TypeError for bad
    arguments, ImportError when the chosen framework is not installed.
    """
    if framework not in _FRAMEWORKS:
        raise ValueError("framework must be 'numpy', 'torch' or None, not %r" % (framework,))
    if expect is not None:
        expect = _check_expect(expect)
    if public_key is not None and daemon is None:
        raise ValueError("public_key needs daemon: the signed verdict comes from the daemon")
    if daemon is not None:
        daemon = _daemon.check_url(daemon)
    decode = _decoder(framework)
    key = keyid = None
    if public_key is not None:
        key, keyid = _daemon.load_public_key(public_key)

    with Artifact(path) as art:
        header = art.load_header()
        want, trust = expect, "expect" if expect is not None else "header"
        if daemon is not None:
            want = expect if expect is not None else header.content_hash
            if key is not None:
                _daemon.check_attestation(daemon, want, key, keyid, timeout)
                trust = "attestation"
            else:
                _daemon.check_status(daemon, want, timeout)
                trust = "daemon"
        v = art.verify(want)

    out = LoadedArtifact()
    out.content_hash = v.content_hash
    out.round_index = v.header.round_index
    out.parent_hash = v.header.parent_hash
    out.schema_version = v.header.schema_version
    out.trust = trust
    for t in v.tensors:
        w = v.files[t.file]
        n = math.prod(t.shape)
        out[t.name] = decode(w.buf, w.data_start + t.begin, t, n)
        out.dtypes[t.name] = DTYPE_TOKEN[t.dtype]
        out.shapes[t.name] = t.shape
        out.nbytes += t.nbytes
    return out


def bfloat16_to_float32(a):
    """A NumPy uint16 array of bfloat16 bit patterns (what load_verified
    returns for BF16 with framework="numpy") as float32 values, exactly.
    A new array: twice the memory of the input."""
    import numpy as np
    a = np.asarray(a)
    if a.dtype.kind != "u" or a.dtype.itemsize != 2:
        raise TypeError("expected a uint16 array of bfloat16 bit patterns, got %s" % a.dtype)
    return (a.astype(np.uint32) << 16).view(np.float32)
