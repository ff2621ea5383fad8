"""Load a Lensemble model artifact only after verifying the very bytes loaded.

::

    from lensemble_verify_client import load_verified, VerificationError

    weights = load_verified("/srv/lensemble/artifacts/round-00004",
                            daemon="http://127.0.0.1:8420", framework="torch")
    model.load_state_dict(weights)

The standard library is enough: by default the tensors are NumPy arrays
when NumPy can be imported and plain ``Tensor`` objects (dtype, shape and
bytes) otherwise. PyTorch is needed only for ``framework="torch"``, NumPy
only for ``framework="numpy"``, and the ``cryptography`` package only to
check a signed verdict (``public_key``) or an OpenSSF Model Signing
bundle (``verify_oms``); a call that needs one that is
missing raises MissingPackage (a VerificationError, code
``missing_package``) naming it and its Debian package.
"""

import math

from . import _daemon, _frameworks
from ._errors import (ARTIFACT_INVALID, CHECKPOINT_INTEGRITY, CODES, IO_ERROR,
                      MISSING_PACKAGE, RESIDENCY_VIOLATION, SCHEMA_VERSION_MISMATCH,
                      UNTRUSTED, MissingPackage, VerificationError, need)
from ._events import wait_for_head
from ._frameworks import Tensor
from ._oms import OMSError, OMSResult, verify_oms
from ._verify import DTYPE_TOKEN, Artifact

__all__ = ["load_verified", "wait_for_head", "verify_oms", "LoadedArtifact", "Tensor",
           "OMSResult", "OMSError", "VerificationError", "MissingPackage", "bfloat16_to_float32",
           "CODES", "SCHEMA_VERSION_MISMATCH", "ARTIFACT_INVALID", "RESIDENCY_VIOLATION",
           "CHECKPOINT_INTEGRITY", "UNTRUSTED", "IO_ERROR", "MISSING_PACKAGE"]
__version__ = "0.1.0"


class LoadedArtifact(dict):
    """The tensors of a verified artifact, name -> array, in name order.

    Attributes: ``content_hash`` (the canonical hash of the bytes loaded),
    ``round_index``, ``parent_hash``, ``schema_version``, ``dtypes`` (name ->
    "float32" | "float16" | "bfloat16", as stored), ``shapes`` (name ->
    tuple), ``nbytes`` (tensor bytes), ``trust``: what the hash was held
    against, "expect", "daemon", "attestation" or "header" (integrity
    only), and ``framework``: what the tensors are, "numpy", "torch",
    "plain" (Tensor objects) or None (memoryviews).
    """

    content_hash = None
    round_index = None
    parent_hash = None
    schema_version = None
    trust = None
    framework = None

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


def load_verified(path, *, daemon=None, expect=None, public_key=None, framework="auto",
                  timeout=30.0):
    """Verify the artifact directory `path` (or an uncompressed tar of one,
    read in place by the C verifier's rules) and return its tensors.

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

    - "auto" (the default): "numpy" when NumPy can be imported, else
      "plain": the standard library is enough. The result's ``framework``
      says which.
    - "numpy": NumPy arrays, zero-copy views (``np.frombuffer``) of the
      loaded bytes, little-endian dtypes <f4 and <f2. NumPy has no
      bfloat16: BF16 tensors come as uint16 arrays of the raw bit
      patterns; ``bfloat16_to_float32`` converts one exactly (a copy).
    - "torch": PyTorch tensors (``torch.frombuffer``), bfloat16 included;
      a tensor the file stores at an offset not aligned for its dtype is
      copied into an aligned tensor of its own.
    - "plain": ``Tensor`` objects (``dtype``, ``shape``, and ``data``, a
      read-only memoryview of the bytes; ``tolist()`` decodes them), no
      third-party package.
    - None: ``memoryview`` objects and no third-party package: format "f"
      for float32 and "H" (raw 16-bit patterns) for float16 and bfloat16,
      shaped like the tensor (an empty tensor as a flat empty view). The
      stored dtype of each is in the result's ``dtypes``.

    The memory: each weight file is read into one buffer of anonymous
    private memory (never a mapping of the file), and the tensors of that
    file are views into it, not copies (but for PyTorch's empty tensors
    and the unaligned case above). The tensors own it together: the
    buffer is freed when the last tensor of the file is, so keeping one
    small tensor keeps its whole file in memory (copy it, ``.copy()`` or
    ``.clone()``, to keep it alone). The NumPy and PyTorch tensors are
    writable: changing one in place changes that tensor only, never
    another tensor, the files, or a later load; but the result's
    ``content_hash`` no longer describes it.

    ``timeout`` is the HTTP timeout for the daemon, in seconds.

    Returns a LoadedArtifact (a dict name -> tensor with the hash and the
    dtypes as attributes). Raises VerificationError (``.code``, ``.detail``)
    when the artifact must not be loaded, and its subclass MissingPackage
    (code ``missing_package``, also an ImportError) when the framework
    asked for, or ``public_key``, needs a package that is not installed;
    ValueError or TypeError for bad arguments.
    """
    framework, decode = _frameworks.decoder(framework)
    if expect is not None:
        expect = _check_expect(expect)
    if public_key is not None and daemon is None:
        raise ValueError("public_key needs daemon: the signed verdict comes from the daemon")
    if daemon is not None:
        daemon = _daemon.check_url(daemon)
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
    out.framework = framework
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
    np = need("numpy", "bfloat16_to_float32")
    a = np.asarray(a)
    if a.dtype.kind != "u" or a.dtype.itemsize != 2:
        raise TypeError("expected a uint16 array of bfloat16 bit patterns, got %s" % a.dtype)
    return (a.astype(np.uint32) << 16).view(np.float32)
