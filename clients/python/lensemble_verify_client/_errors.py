"""The error raised when an artifact must not be loaded, and its codes."""

import importlib

SCHEMA_VERSION_MISMATCH = "schema_version_mismatch"
ARTIFACT_INVALID = "artifact_invalid"
RESIDENCY_VIOLATION = "residency_violation"
CHECKPOINT_INTEGRITY = "checkpoint_integrity"
UNTRUSTED = "untrusted"
IO_ERROR = "io_error"
MISSING_PACKAGE = "missing_package"

CODES = (SCHEMA_VERSION_MISMATCH, ARTIFACT_INVALID, RESIDENCY_VIOLATION,
         CHECKPOINT_INTEGRITY, UNTRUSTED, IO_ERROR, MISSING_PACKAGE)

# The optional packages: import name -> (what it is called, the Debian
# package, the pip extra of lensemble-verify-client).
OPTIONAL = {
    "numpy": ("NumPy", "python3-numpy", "numpy"),
    "torch": ("PyTorch", "python3-torch", "torch"),
    "cryptography": ("cryptography", "python3-cryptography", "attest"),
}


class VerificationError(Exception):
    """The artifact must not be loaded.

    ``code`` is one of CODES: the four verdict codes of the canonical-hash
    specification (the C verifier's), ``untrusted`` (the daemon does not
    vouch for the artifact, or its signed verdict does not check out),
    ``io_error`` (a file could not be read) or ``missing_package`` (an
    optional package the call needs is not installed: MissingPackage).
    ``detail`` is one sentence. ``untrusted_reason`` is the daemon's own
    word for why it does not vouch for the artifact (its status object's
    ``untrusted_reason``: ``failed``, ``unverified``, ``chain_broken``,
    ``chain_pending``, ``uncommitted``, ``legacy``), when it gave one;
    None otherwise.
    """

    def __init__(self, code, detail, untrusted_reason=None):
        super().__init__(code, detail)
        self.code = code
        self.detail = detail
        self.untrusted_reason = untrusted_reason

    def __str__(self):
        return "%s: %s" % (self.code, self.detail)


class MissingPackage(VerificationError, ImportError):
    """An optional package (NumPy, PyTorch, cryptography) that the call
    needs cannot be imported. ``code`` is ``missing_package``, ``package``
    (and ImportError's ``name``) the module, ``debian`` the Debian package
    that provides it; ``detail`` says what needs it and how to install it.
    load_verified raises it before it reads any file."""

    def __init__(self, package, purpose, cause=None):
        what, debian, extra = OPTIONAL[package]
        if cause is None or (isinstance(cause, ModuleNotFoundError) and
                             (cause.name or "").split(".")[0] == package):
            why = "it is not installed"
        else:                   # installed, but its own import fails
            why = "it cannot be imported (%s)" % (cause,)
        detail = ("%s needs %s (the Python package %s), but %s; install it with "
                  "'apt-get install %s' on Debian, or "
                  "'pip install \"lensemble-verify-client[%s]\"'"
                  % (purpose, what, package, why, debian, extra))
        super().__init__(MISSING_PACKAGE, detail)
        self.package = package
        self.debian = debian
        self.name = package


def need(module, purpose):
    """Import `module` of an optional package, or raise MissingPackage
    saying that `purpose` needs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingPackage(module.split(".")[0], purpose, e) from e
