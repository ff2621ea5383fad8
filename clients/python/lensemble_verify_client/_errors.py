"""The error raised when an artifact must not be loaded, and its codes."""

SCHEMA_VERSION_MISMATCH = "schema_version_mismatch"
ARTIFACT_INVALID = "artifact_invalid"
RESIDENCY_VIOLATION = "residency_violation"
CHECKPOINT_INTEGRITY = "checkpoint_integrity"
UNTRUSTED = "untrusted"
IO_ERROR = "io_error"

CODES = (SCHEMA_VERSION_MISMATCH, ARTIFACT_INVALID, RESIDENCY_VIOLATION,
         CHECKPOINT_INTEGRITY, UNTRUSTED, IO_ERROR)


class VerificationError(Exception):
    """The artifact must not be loaded.

    ``code`` is one of CODES: the four verdict codes of the canonical-hash
    specification (the C verifier's), ``untrusted`` (the daemon does not
    vouch for the artifact, or its signed verdict does not check out) or
    ``io_error`` (a file could not be read). ``detail`` is one sentence.
    ``untrusted_reason`` is the daemon's own word for why it does not
    vouch for the artifact (its status object's ``untrusted_reason``:
    ``failed``, ``unverified``, ``chain_broken``, ``chain_pending``,
    ``uncommitted``, ``legacy``), when it gave one; None otherwise.
    """

    def __init__(self, code, detail, untrusted_reason=None):
        super().__init__(code, detail)
        self.code = code
        self.detail = detail
        self.untrusted_reason = untrusted_reason

    def __str__(self):
        return "%s: %s" % (self.code, self.detail)
