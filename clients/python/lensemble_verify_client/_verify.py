"""The artifact verifier: the checks of the C verifier (src/lib/vd_artifact.c,
src/lib/vd_header.c, src/lib/vd_safetensors.c), in its order and with its codes,
over bytes read once into memory.

An artifact is a directory, or a regular file read as an uncompressed tar
of one (src/lib/vd_tar.c, here _tar.py): its headers give each member's data
range, and each weight file is read from there, in place, never extracted.

Every file is read exactly once. header.json and weights.index.json are
read whole (they are small and bounded); each weight file is read into one
buffer of its size, its safetensors header first, then the data, which a
reader thread copies in while the calling thread hashes what has arrived.
The hash is computed over that buffer, and the tensors handed back are
views of the same buffer: the bytes hashed are the bytes loaded.
"""

import errno
import hashlib
import json
import mmap
import os
import stat
import struct
import sys
import threading

from . import _json, _tar
from ._errors import (ARTIFACT_INVALID, CHECKPOINT_INTEGRITY, IO_ERROR,
                      RESIDENCY_VIOLATION, SCHEMA_VERSION_MISMATCH, VerificationError)

HEADER_FILE = "header.json"
INDEX_FILE = "weights.index.json"
HEADER_MAX_BYTES = 16 * 1024 * 1024          # header.json, weights.index.json
ST_MAX_HEADER = 100000000                    # safetensors JSON header
ST_MAX_RANK = 64
MAX_FILES = 4096
SCHEMA_MIN, SCHEMA_MAX = 1, 2
SHARED_GROUPS = ("encoder", "predictor")

HASH_DOMAIN = b"lensemble/artifact/v1"
HASH_TENSORS_TAG = b"\x00tensors\x00"
HASH_STRUCT_TAG = b"\x00struct\x00"

# Every safetensors dtype the container knows, with its element size, and
# the canonical token of the three an artifact may store.
DTYPE_SIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "F64": 8, "I64": 8, "U64": 8,
}
DTYPE_TOKEN = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}

READ_CHUNK = 8 << 20          # bytes per read() of weight data
HASH_STEP = 8 << 20           # bytes hashed between looks at the reader
THREAD_MIN = 16 << 20         # below this much data, read before hashing
MMAP_MIN = 1 << 20            # buffers from this size on are anonymous maps

_O_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
    getattr(os, "O_CLOEXEC", 0)
# The artifact itself: followed through a symbolic link, as a directory is.
_O_TAR = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_U64_MAX = (1 << 64) - 1
_NOT_ST = "not a safetensors artifact: "

# (name, kind, since, required), as src/lib/vd_header.c lists them.
_FIELDS = (
    ("schema_version", "int", 1, True),
    ("content_hash", "hex64", 1, True),
    ("parent_hash", "hex64_or_null", 1, True),
    ("wmcp_version", "string", 1, True),
    ("round_index", "nonneg_int", 1, True),
    ("config_hash", "string", 1, True),
    ("param_groups", "strings", 1, True),
    ("tensor_manifest", "manifest", 1, True),
    ("weight_files", "files", 1, True),
    ("created_at", "timestamp", 1, True),
    ("model_arch", "object_or_null", 2, False),
)
_FIELD = {f[0]: f for f in _FIELDS}


def _fail(code, fmt, *args):
    raise VerificationError(code, fmt % args if args else fmt)


def _invalid(fmt, *args):
    _fail(ARTIFACT_INVALID, fmt, *args)


def _q(s, n=64):
    """A name cut for a message, as the C verifier's %.64s does."""
    return s[:n]


def _jtype(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def _is_hex64(s):
    return len(s) == 64 and all(c in "0123456789abcdef" for c in s)


def plain_filename(s):
    """A plain file name: not empty, not "." or "..", no '/' and no NUL."""
    return s not in ("", ".", "..") and "/" not in s and "\0" not in s


def _days_in_month(year, month):
    leap = (year % 4 == 0 and year % 100 != 0) or year % 400 == 0
    return 29 if month == 2 and leap else \
        (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]


def rfc3339_utc(s):
    """YYYY-MM-DDTHH:MM:SS[.frac](Z|+00:00), as src/lib/vd_header.c reads it."""
    p = s.encode("utf-8")

    def digits(i, n):
        return all(0x30 <= c <= 0x39 for c in p[i:i + n]) and len(p[i:i + n]) == n

    def num(i, n):
        return int(p[i:i + n])

    if (len(p) < 20 or not digits(0, 4) or p[4:5] != b"-" or not digits(5, 2) or
            p[7:8] != b"-" or not digits(8, 2) or p[10:11] not in (b"T", b"t") or
            not digits(11, 2) or p[13:14] != b":" or not digits(14, 2) or
            p[16:17] != b":" or not digits(17, 2)):
        return False
    if (num(5, 2) < 1 or num(5, 2) > 12 or num(8, 2) < 1 or num(8, 2) > 31 or
            num(11, 2) > 23 or num(14, 2) > 59 or num(17, 2) > 60 or
            num(8, 2) > _days_in_month(num(0, 4), num(5, 2))):
        return False
    i = 19
    if p[i:i + 1] == b".":
        i += 1
        start = i
        while i < len(p) and 0x30 <= p[i] <= 0x39:
            i += 1
        if i == start:
            return False
    if len(p) - i == 1:
        return p[i:] in (b"Z", b"z")
    return p[i:] == b"+00:00"


# ---- header.json -----------------------------------------------------------

class Header:
    """The fields of a valid header.json."""

    __slots__ = ("schema_version", "content_hash", "parent_hash", "wmcp_version",
                 "round_index", "config_hash", "param_groups", "manifest",
                 "weight_files", "created_at", "model_arch")


def _strings(v, what):
    if not isinstance(v, list):
        _invalid("header.json %s is %s, not an array", what, _jtype(v))
    for c in v:
        if not isinstance(c, str):
            _invalid("header.json %s holds %s, not a string", what, _jtype(c))
    return list(v)


def _manifest_entry(v):
    if not isinstance(v, dict):
        _invalid("header.json tensor_manifest holds %s, not an object", _jtype(v))
    for k in v:
        if k not in ("name", "group", "dtype", "shape"):
            _invalid('manifest entry has an unknown field "%s"', _q(k))
    for k in ("name", "group", "dtype"):
        if not isinstance(v.get(k), str):
            _invalid('manifest entry lacks a string "%s"', k)
    if "shape" not in v:
        _invalid('manifest entry "%s" lacks "shape"', _q(v["name"]))
    shape = v["shape"]
    if not isinstance(shape, list):
        _invalid('manifest entry "%s" shape is not an array', _q(v["name"]))
    for d in shape:
        if not _json.is_u64(d):
            _invalid('manifest entry "%s" shape holds a value that is not a non-negative integer',
                     _q(v["name"]))
    return (v["name"], v["group"], v["dtype"], tuple(shape))


def _field(h, name, kind, v):
    if kind == "int":
        h.schema_version = int(v)            # checked by the gate
    elif kind == "nonneg_int":
        if not _json.is_int(v) or v < 0:
            _invalid("header.json %s is not a non-negative integer", name)
        h.round_index = int(v)
    elif kind in ("hex64", "hex64_or_null"):
        if kind == "hex64_or_null" and v is None:
            h.parent_hash = None
            return
        if not isinstance(v, str) or not _is_hex64(v):
            _invalid("header.json %s is not 64 lowercase hex characters", name)
        setattr(h, name, v)
    elif kind == "string":
        if not isinstance(v, str):
            _invalid("header.json %s is %s, not a string", name, _jtype(v))
        setattr(h, name, v)
    elif kind == "strings":
        h.param_groups = _strings(v, name)
    elif kind == "manifest":
        if not isinstance(v, list):
            _invalid("header.json tensor_manifest is %s, not an array", _jtype(v))
        h.manifest = [_manifest_entry(e) for e in v]
    elif kind == "files":
        files = _strings(v, name)
        if not files:
            _invalid("header.json weight_files is empty")
        seen = set()
        for f in files:
            if not plain_filename(f):
                _invalid('weight file "%s" is not a plain file name inside the artifact directory',
                         _q(f, 100))
            if f in seen:
                _invalid('weight file "%s" is listed twice', _q(f, 100))
            seen.add(f)
        h.weight_files = files
    elif kind == "timestamp":
        if not isinstance(v, str) or not rfc3339_utc(v):
            _invalid("header.json created_at is not an RFC 3339 UTC timestamp")
        h.created_at = v
    elif kind == "object_or_null":
        if v is not None and not isinstance(v, dict):
            _invalid("header.json %s is %s, not an object or null", name, _jtype(v))
        h.model_arch = v


def parse_header(data):
    """Parse header.json bytes: the schema_version gate first, then exact
    types, no unknown, missing or duplicate fields."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        _invalid("header.json is not valid UTF-8")
    try:
        root = _json.loads(data)
    except _json.JSONError as e:
        _invalid("header.json is not valid JSON (%s)", e)
    if not isinstance(root, dict):
        _invalid("header.json is %s, not an object", _jtype(root))
    if "schema_version" not in root:
        _fail(SCHEMA_VERSION_MISMATCH, "header.json has no schema_version")
    v = root["schema_version"]
    if not _json.is_int(v):
        _fail(SCHEMA_VERSION_MISMATCH, "header.json schema_version is %s, not an integer",
              _jtype(v))
    if not SCHEMA_MIN <= v <= SCHEMA_MAX:
        _fail(SCHEMA_VERSION_MISMATCH,
              "header.json schema_version %d is outside the supported %d..%d",
              v, SCHEMA_MIN, SCHEMA_MAX)
    version = int(v)
    h = Header()
    h.parent_hash = None
    h.model_arch = None
    for k, val in root.items():
        f = _FIELD.get(k)
        if f is None or f[2] > version:
            _invalid('header.json has an unknown field "%s" for schema_version %d', _q(k), version)
        _field(h, k, f[1], val)
    for name, _, since, required in _FIELDS:
        if required and since <= version and name not in root:
            _invalid("header.json lacks the required field %s", name)
    return h


def hash_frame(h):
    """The structural frame of canonical-hash.md section 4: Python's own
    compact, key-sorted, ASCII-escaped JSON."""
    frame = {
        "param_groups": sorted(h.param_groups),
        "parent_hash": h.parent_hash if h.parent_hash is not None else "",
        "round_index": h.round_index,
        "schema_version": h.schema_version,
        "wmcp_version": h.wmcp_version,
    }
    return json.dumps(frame, sort_keys=True, separators=(",", ":")).encode("ascii")


# ---- safetensors -----------------------------------------------------------

class Tensor:
    __slots__ = ("name", "key", "dtype", "shape", "begin", "end", "file")

    def __init__(self, name, file):
        self.name = name
        self.key = name.encode("utf-8")      # byte-wise order and frames
        self.file = file

    @property
    def nbytes(self):
        return self.end - self.begin


def st_header_len(prefix, size):
    """The safetensors JSON header length from the file's first 8 bytes."""
    if size < 8:
        _fail(CHECKPOINT_INTEGRITY,
              _NOT_ST + "the file is %d bytes, shorter than its 8-byte header length", size)
    n = struct.unpack("<Q", prefix)[0]
    if n > ST_MAX_HEADER:
        _fail(CHECKPOINT_INTEGRITY, _NOT_ST + "header length %d exceeds the limit of %d bytes",
              n, ST_MAX_HEADER)
    if n > size - 8:
        _fail(CHECKPOINT_INTEGRITY,
              _NOT_ST + "header length %d runs past the end of the %d-byte file", n, size)
    if n < 2:
        _fail(CHECKPOINT_INTEGRITY, _NOT_ST + "header length %d is too short for a JSON object", n)
    return n


def _st_tensor(name, v, index):
    def bad(fmt, *args):
        _fail(CHECKPOINT_INTEGRITY, _NOT_ST + fmt, *args)

    t = Tensor(name, index)
    if not isinstance(v, dict):
        bad('tensor "%s" is not described by an object', _q(name))
    for k in v:
        if k not in ("dtype", "shape", "data_offsets"):
            bad('tensor "%s" has an unknown field "%s"', _q(name), _q(k, 32))
    dt = v.get("dtype")
    if not isinstance(dt, str) or dt not in DTYPE_SIZE:
        bad('tensor "%s" has a missing or unknown dtype', _q(name))
    t.dtype = dt
    shape = v.get("shape")
    if not isinstance(shape, list):
        bad('tensor "%s" has no shape array', _q(name))
    if len(shape) > ST_MAX_RANK:
        bad('tensor "%s" has rank %d, above %d', _q(name), len(shape), ST_MAX_RANK)
    for d in shape:
        if not _json.is_u64(d):
            bad('tensor "%s" has a shape entry that is not a non-negative integer', _q(name))
    t.shape = tuple(shape)
    off = v.get("data_offsets")
    if not isinstance(off, list) or len(off) != 2:
        bad('tensor "%s" has no [begin, end] data_offsets', _q(name))
    if not _json.is_u64(off[0]) or not _json.is_u64(off[1]):
        bad('tensor "%s" has data_offsets that are not non-negative integers', _q(name))
    t.begin, t.end = off
    if t.end < t.begin:
        bad('tensor "%s" ends before it begins', _q(name))
    # Elements first, then bytes, each step checked, as the C verifier.
    n = 1
    for d in t.shape:
        n *= d
        if n > _U64_MAX:
            bad('tensor "%s" has a shape whose size overflows', _q(name))
    n *= DTYPE_SIZE[dt]
    if n > _U64_MAX:
        bad('tensor "%s" has a shape whose size overflows', _q(name))
    if n != t.end - t.begin:
        bad('tensor "%s" spans %d bytes but its %s shape needs %d',
            _q(name), t.end - t.begin, dt, n)
    return t


def parse_st_header(js, data_len, index):
    """The tensors of a safetensors JSON header (bytes), in file order,
    checked to tile the data buffer of data_len bytes exactly."""
    if not js or js[0:1] != b"{":
        _fail(CHECKPOINT_INTEGRITY, _NOT_ST + "the header does not start with '{'")
    try:
        root = _json.loads(js)
    except _json.JSONError as e:
        _fail(CHECKPOINT_INTEGRITY, _NOT_ST + "the header is not valid JSON (%s)", e)
    tensors = []
    for k, v in root.items():
        if k == "__metadata__":
            if not isinstance(v, dict):
                _fail(CHECKPOINT_INTEGRITY, _NOT_ST + "__metadata__ is not an object")
            for mk, mv in v.items():
                if not isinstance(mv, str):
                    _fail(CHECKPOINT_INTEGRITY,
                          _NOT_ST + '__metadata__ value "%s" is not a string', _q(mk))
            continue
        tensors.append(_st_tensor(k, v, index))
    pos = 0
    for t in sorted(tensors, key=lambda t: (t.begin, t.end)):
        if t.begin != pos:
            _fail(CHECKPOINT_INTEGRITY,
                  _NOT_ST + 'tensor "%s" begins at %d where %d was expected (%s)',
                  _q(t.name), t.begin, pos, "overlap" if t.begin < pos else "hole")
        pos = t.end
    if pos != data_len:
        _fail(CHECKPOINT_INTEGRITY, _NOT_ST + "the tensors cover %d of the %d data bytes",
              pos, data_len)
    return tensors


# ---- files -----------------------------------------------------------------

def _io(name, what, e):
    return VerificationError(IO_ERROR, "cannot %s %s: %s" % (what, name, e.strerror or e))


def open_member(dirfd, name, missing_code):
    """Open a member file: never through a symlink, only a regular file,
    and without blocking on a FIFO."""
    try:
        pre = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        _fail(missing_code, "%s is missing", name)
    except OSError as e:
        raise _io(name, "stat", e) from None
    if stat.S_ISLNK(pre.st_mode):
        _invalid("%s is a symbolic link; artifact files must be regular files", name)
    if not stat.S_ISREG(pre.st_mode):
        _invalid("%s is not a regular file", name)
    try:
        fd = os.open(name, _O_OPEN, dir_fd=dirfd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            _invalid("%s is a symbolic link; artifact files must be regular files", name)
        raise _io(name, "open", e) from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise _io(name, "stat", e) from None
    if not stat.S_ISREG(st.st_mode) or st.st_ino != pre.st_ino or st.st_dev != pre.st_dev:
        os.close(fd)
        _fail(IO_ERROR, "%s changed while it was opened", name)
    return fd, st


def read_small(dirfd, name, missing_code):
    """A member file read whole, at most HEADER_MAX_BYTES."""
    fd, st = open_member(dirfd, name, missing_code)
    try:
        if st.st_size > HEADER_MAX_BYTES:
            _invalid("%s is %d bytes, above the limit of %d", name, st.st_size, HEADER_MAX_BYTES)
        parts, total = [], 0
        while True:
            try:
                b = os.read(fd, 65536)
            except OSError as e:
                raise _io(name, "read", e) from None
            if not b:
                break
            total += len(b)
            if total > HEADER_MAX_BYTES:
                _fail(IO_ERROR, "cannot read %s: File too large", name)
            parts.append(b)
        return b"".join(parts)
    finally:
        os.close(fd)


def _identity(st):
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _alloc(size):
    """One buffer for a whole file. Large ones are anonymous private memory
    (not the file): its pages are allocated as the reader fills them,
    where bytearray(n) would first write zeros over all n bytes."""
    if size >= MMAP_MIN:
        try:
            return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except (AttributeError, OSError, ValueError):
            pass
    return bytearray(size)


class WeightFile:
    __slots__ = ("name", "fd", "own_fd", "base", "st", "size", "buf", "mv", "data_start",
                 "data_len", "tensors", "filled", "first_need", "populate")

    def __init__(self, name, fd, st, base=0, size=None):
        self.name = name
        self.fd = fd
        self.own_fd = size is None      # a tar member reads the archive's fd
        self.base = base                # where the file starts in fd
        self.st = st
        self.size = st.st_size if size is None else size
        self.buf = None
        self.mv = None
        self.tensors = []
        self.filled = 0                 # bytes of the file read so far
        self.first_need = None
        self.populate = False


def _shrank(name):
    return VerificationError(CHECKPOINT_INTEGRITY,
                             "%s: a weight file shrank while it was being read" % name)


if hasattr(os, "preadv"):
    def _pread_into(fd, view, off):
        return os.preadv(fd, [view], off)
else:                           # pragma: no cover - POSIX systems without preadv
    def _pread_into(fd, view, off):
        os.lseek(fd, off, os.SEEK_SET)
        return os.readv(fd, [view])


# Linux 5.14+: allocate a range of pages in one call, not one fault per page.
_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23) \
    if sys.platform.startswith("linux") else None
_PAGE = mmap.PAGESIZE


def _populate(w, off, n):
    """Fault in w's buffer pages [off, off + n) ahead of a read into them:
    a third less time than taking the faults one page at a time in read()."""
    a = off - off % _PAGE
    try:
        w.buf.madvise(_MADV_POPULATE_WRITE, a, off + n - a)
    except (OSError, ValueError, OverflowError):
        w.populate = False          # an older kernel: take the faults


def _read_into(w, end):
    """Read w's bytes [w.filled, end) into its buffer."""
    while w.filled < end:
        n = min(READ_CHUNK, end - w.filled)
        if w.populate:
            _populate(w, w.filled, n)
        try:
            got = _pread_into(w.fd, w.mv[w.filled:w.filled + n], w.base + w.filled)
        except OSError as e:
            raise _io(w.name, "read", e) from None
        if got == 0:
            raise _shrank(w.name)
        w.filled += got


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Reader:
    """Copies the weight data into the buffers, file after file in the order
    the hash needs them, while the caller hashes what has arrived."""

    def __init__(self, files, threaded):
        self.files = files
        self.cond = threading.Condition()
        self.error = None
        self.done = False
        self.stop = False
        self.thread = None
        if threaded:
            self.thread = threading.Thread(target=self._run, name="lensemble-verify-read",
                                           daemon=True)
            self.thread.start()
        else:
            self._run()

    def _run(self):
        try:
            for w in self.files:
                try:
                    os.posix_fadvise(w.fd, w.base, w.size, os.POSIX_FADV_SEQUENTIAL)
                except (AttributeError, OSError):
                    pass
                while w.filled < w.size and not self.stop:
                    end = min(w.filled + READ_CHUNK, w.size)
                    _read_into(w, end)
                    if self.thread is not None:
                        with self.cond:
                            self.cond.notify_all()
        except VerificationError as e:
            self.error = e
        except BaseException as e:      # noqa: B902 - reported to the waiter
            self.error = VerificationError(IO_ERROR, "reading the weights failed: %r" % (e,))
        finally:
            with self.cond:
                self.done = True
                self.cond.notify_all()

    def wait(self, w, want):
        """Until w holds at least `want` bytes; returns how many it holds."""
        if w.filled >= want:
            return w.filled
        with self.cond:
            while w.filled < want and not self.done:
                self.cond.wait()
        if w.filled >= want:
            return w.filled
        raise self.error or _shrank(w.name)

    def close(self):
        if self.thread is not None:
            self.stop = True
            self.thread.join()
            self.thread = None


# ---- the verification ------------------------------------------------------

class Verified:
    """What a successful verification hands back: the header, the tensors in
    name order and the buffers that hold them."""

    def __init__(self, header, content_hash, tensors, files):
        self.header = header
        self.content_hash = content_hash
        self.tensors = tensors
        self.files = files

    def data(self, t):
        """A memoryview of tensor t's bytes in its file's buffer."""
        w = self.files[t.file]
        start = w.data_start + t.begin
        return w.mv[start:start + t.nbytes]


def _cannot_open(path, e):
    code = ARTIFACT_INVALID if e.errno in (errno.ENOENT, errno.ENOTDIR) else IO_ERROR
    return VerificationError(code, "cannot open the artifact %s: %s" % (path, e.strerror))


class Artifact:
    """One verification of one artifact, a directory or a tar of one. Use as
    a context manager: the directory (or tar) and files are closed on exit,
    the buffers kept."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.dirfd = None
        self.tarfd = None
        self.tar_st = None
        self.tar = None                 # {name (bytes): (offset, size)} of a tar
        self.header = None
        self.files = []
        self.reader = None
        # Checked before it is opened: a device or a FIFO is never opened.
        try:
            pre = os.stat(self.path)
        except OSError as e:
            raise _cannot_open(self.path, e) from None
        if stat.S_ISREG(pre.st_mode):
            self._open_tar(pre)
        elif not stat.S_ISDIR(pre.st_mode):
            _invalid("%s is neither a directory nor a tar file", self.path)
        else:
            try:
                self.dirfd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY |
                                     getattr(os, "O_CLOEXEC", 0))
            except OSError as e:
                raise _cannot_open(self.path, e) from None

    def _open_tar(self, pre):
        try:
            self.tarfd = os.open(self.path, _O_TAR)
            self.tar_st = os.fstat(self.tarfd)
        except OSError as e:
            self.close()
            raise _cannot_open(self.path, e) from None
        if (self.tar_st.st_dev, self.tar_st.st_ino) != (pre.st_dev, pre.st_ino):
            self.close()
            _fail(IO_ERROR, "%s changed while it was opened", self.path)
        try:
            self.tar = _tar.parse(self._read_tar, self.tar_st.st_size)
        except BaseException:
            self.close()
            raise

    def _read_tar(self, off, n):
        """n bytes of the tar at off; a tar that shrinks fails as a weight
        file that shrinks does."""
        parts, got = [], 0
        while got < n:
            try:
                b = os.pread(self.tarfd, n - got, off + got)
            except OSError as e:
                raise _io("the archive", "read", e) from None
            if not b:
                _fail(CHECKPOINT_INTEGRITY, "the file shrank while it was being read")
            parts.append(b)
            got += len(b)
        return b"".join(parts)

    def _read_small(self, name, missing_code):
        """header.json or the index, from the directory or the tar."""
        if self.tar is None:
            return read_small(self.dirfd, name, missing_code)
        m = self.tar.get(name.encode("utf-8"))
        if m is None:
            _fail(missing_code, "%s is missing", name)
        if m[1] > HEADER_MAX_BYTES:
            _invalid("%s is %d bytes, above the limit of %d", name, m[1], HEADER_MAX_BYTES)
        return self._read_tar(m[0], m[1])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        for w in self.files:
            if w.fd is not None and w.own_fd:
                os.close(w.fd)
            w.fd = None
        if self.dirfd is not None:
            os.close(self.dirfd)
            self.dirfd = None
        if self.tarfd is not None:
            os.close(self.tarfd)
            self.tarfd = None

    # step 1
    def load_header(self):
        """Read and check header.json; the header it claims."""
        if self.header is None:
            data = self._read_small(HEADER_FILE, ARTIFACT_INVALID)
            self.header = parse_header(data)
        return self.header

    def verify(self, expected=None):
        """The remaining steps; a Verified, or VerificationError."""
        h = self.load_header()
        self._open_weights(h)
        self._check_members()
        self._check_structure()
        tensors = [t for w in self.files for t in w.tensors]
        self._check_dtypes(tensors)
        self._check_residency(h, tensors)
        self._check_groups(h, tensors)
        ordered = self._merge(tensors)
        self._check_index(ordered)
        self._check_manifest(h, ordered)
        content_hash = self._compute_hash(h, ordered)
        self._check_unchanged()
        if content_hash != h.content_hash:
            _fail(CHECKPOINT_INTEGRITY,
                  "the recomputed hash %s differs from header.json content_hash %s",
                  content_hash, h.content_hash)
        if expected is not None and expected != content_hash:
            _fail(CHECKPOINT_INTEGRITY,
                  "the artifact hash %s differs from the committed hash %s",
                  content_hash, _q(expected))
        return Verified(h, content_hash, ordered, self.files)

    # step 2
    def _open_weights(self, h):
        if len(h.weight_files) > MAX_FILES:
            _invalid("header.json lists %d weight files, above the limit of %d",
                     len(h.weight_files), MAX_FILES)
        for name in h.weight_files:
            if self.tar is None:
                fd, st = open_member(self.dirfd, name, CHECKPOINT_INTEGRITY)
                self.files.append(WeightFile(name, fd, st))
                continue
            m = self.tar.get(name.encode("utf-8"))
            if m is None:
                _fail(CHECKPOINT_INTEGRITY, "%s is missing", name)
            self.files.append(WeightFile(name, self.tarfd, self.tar_st, m[0], m[1]))

    # A member the verifier does not read is refused: whoever extracts the
    # whole archive would write bytes that no hash covered, and a member
    # whose data is a second archive reads as its own members to a reader
    # that takes the first header's size otherwise. A directory may hold
    # other files (a signature, notes): nothing extracts it.
    def _check_members(self):
        if self.tar is None:
            return
        read = {n.encode("utf-8") for n in [HEADER_FILE, INDEX_FILE] +
                [w.name for w in self.files]}
        known = 1 + (INDEX_FILE.encode("utf-8") in self.tar) + \
            sum(w.name not in (HEADER_FILE, INDEX_FILE) for w in self.files)
        if len(self.tar) == known:
            return
        for name in self.tar:
            if name not in read:
                _invalid('not a valid artifact tar: member "%s" is neither header.json, '
                         'weights.index.json nor a weight file header.json lists',
                         _tar.quote(name))

    # step 3: the safetensors header of each file, read into its buffer
    def _check_structure(self):
        for i, w in enumerate(self.files):
            try:
                self._parse_file(w, i)
            except VerificationError as e:
                raise VerificationError(e.code, "%s: %s" % (w.name, e.detail)) from None

    def _parse_file(self, w, index):
        if w.size < 8:
            st_header_len(b"", w.size)
        w.buf = _alloc(w.size)
        w.mv = memoryview(w.buf)
        w.populate = isinstance(w.buf, mmap.mmap) and _MADV_POPULATE_WRITE is not None
        _read_into(w, 8)
        hlen = st_header_len(w.mv[:8], w.size)
        _read_into(w, 8 + hlen)
        w.data_start = 8 + hlen
        w.data_len = w.size - 8 - hlen
        w.tensors = parse_st_header(w.mv[8:8 + hlen], w.data_len, index)

    # step 4
    def _check_dtypes(self, tensors):
        for t in tensors:
            if t.dtype not in DTYPE_TOKEN:
                _invalid('tensor "%s" is stored as %s; an artifact stores only F32, F16 and BF16',
                         _q(t.name), t.dtype)

    # step 5
    def _check_residency(self, h, tensors):
        for g in h.param_groups:
            if g not in SHARED_GROUPS:
                _fail(RESIDENCY_VIOLATION,
                      'param group "%s" is not shared (only encoder and predictor are)', _q(g))
        for t in tensors:
            if t.name.split(".", 1)[0] not in SHARED_GROUPS:
                _fail(RESIDENCY_VIOLATION,
                      'tensor "%s" is outside the shared groups encoder and predictor', _q(t.name))

    # step 6
    def _check_groups(self, h, tensors):
        groups = set(h.param_groups)
        for t in tensors:
            g = t.name.split(".", 1)[0]
            if g not in groups:
                _invalid('tensor "%s" belongs to group "%s", which param_groups does not list',
                         _q(t.name), _q(g))

    # step 7: one name-ordered list; a name in two shards is a fault
    def _merge(self, tensors):
        ordered = sorted(tensors, key=lambda t: t.key)
        for a, b in zip(ordered, ordered[1:]):
            if a.key == b.key:
                _fail(CHECKPOINT_INTEGRITY, 'tensor "%s" is stored in both %s and %s',
                      _q(b.name), self.files[a.file].name, self.files[b.file].name)
        return ordered

    # step 8
    def _check_index(self, ordered):
        if self.tar is not None:
            if INDEX_FILE.encode("utf-8") not in self.tar:
                return
        else:
            try:
                os.stat(INDEX_FILE, dir_fd=self.dirfd, follow_symlinks=False)
            except FileNotFoundError:
                return
            except OSError:
                pass
        data = self._read_small(INDEX_FILE, CHECKPOINT_INTEGRITY)
        try:
            root = _json.loads(data)
        except _json.JSONError as e:
            _fail(CHECKPOINT_INTEGRITY, INDEX_FILE + " is not valid JSON (%s)", e)
        if not isinstance(root, dict):
            _fail(CHECKPOINT_INTEGRITY, INDEX_FILE + " is not an object")
        for k in root:
            if k not in ("metadata", "weight_map"):
                _fail(CHECKPOINT_INTEGRITY, INDEX_FILE + ' has an unknown field "%s"', _q(k))
        wmap = root.get("weight_map")
        if not isinstance(wmap, dict):
            _fail(CHECKPOINT_INTEGRITY, INDEX_FILE + " has no weight_map object")
        by_name = {t.name: t for t in ordered}
        for name, fname in wmap.items():
            if not isinstance(fname, str):
                _fail(CHECKPOINT_INTEGRITY,
                      INDEX_FILE + ' maps "%s" to something other than a file name', _q(name))
            t = by_name.get(name)
            if t is None:
                _fail(CHECKPOINT_INTEGRITY, INDEX_FILE + ' maps "%s", which no weight file holds',
                      _q(name))
            if fname != self.files[t.file].name:
                _fail(CHECKPOINT_INTEGRITY, INDEX_FILE + ' maps "%s" to %s but %s holds it',
                      _q(name), _q(fname), self.files[t.file].name)
        if len(wmap) != len(ordered):
            _fail(CHECKPOINT_INTEGRITY,
                  INDEX_FILE + " maps %d tensors but the weight files hold %d",
                  len(wmap), len(ordered))

    # step 9
    def _check_manifest(self, h, ordered):
        if len(h.manifest) != len(ordered):
            _fail(CHECKPOINT_INTEGRITY, "the manifest lists %d tensors but the weight files hold %d",
                  len(h.manifest), len(ordered))
        for i, ((name, group, dtype, shape), t) in enumerate(zip(h.manifest, ordered)):
            if name != t.name:
                _fail(CHECKPOINT_INTEGRITY,
                      'manifest entry %d names "%s" where the weights, in name order, hold "%s"',
                      i, _q(name), _q(t.name))
            if group != t.name.split(".", 1)[0]:
                _fail(CHECKPOINT_INTEGRITY,
                      'manifest entry "%s" has group "%s", not its name\'s group',
                      _q(name), _q(group, 32))
            if dtype != DTYPE_TOKEN[t.dtype]:
                _fail(CHECKPOINT_INTEGRITY,
                      'manifest entry "%s" has dtype %s but the weights store %s',
                      _q(name), _q(dtype, 32), DTYPE_TOKEN[t.dtype])
            if shape != t.shape:
                _fail(CHECKPOINT_INTEGRITY,
                      'manifest entry "%s" has a shape other than the stored tensor\'s', _q(name))

    # step 10: read the data in and hash it, in name order
    def _compute_hash(self, h, ordered):
        rank = 0
        for t in ordered:
            w = self.files[t.file]
            if w.first_need is None:
                w.first_need = rank
                rank += 1
        order = sorted(self.files, key=lambda f: rank if f.first_need is None else f.first_need)
        total = sum(w.size - w.filled for w in self.files)
        self.reader = Reader(order, threaded=total >= THREAD_MIN and _cpus() > 1)
        hasher = hashlib.sha256()
        hasher.update(HASH_DOMAIN + HASH_TENSORS_TAG)
        for t in ordered:
            token = DTYPE_TOKEN[t.dtype].encode("ascii")
            hasher.update(b"".join((
                struct.pack("<I", len(t.key)), t.key, struct.pack("<B", len(token)), token,
                struct.pack("<I", len(t.shape)), struct.pack("<%dQ" % len(t.shape), *t.shape))))
            w = self.files[t.file]
            pos = w.data_start + t.begin
            end = w.data_start + t.end
            while pos < end:
                have = self.reader.wait(w, min(pos + HASH_STEP, end))
                stop = min(have, end)
                hasher.update(w.mv[pos:stop])
                pos = stop
        self.reader.close()
        if self.reader.error is not None:
            raise self.reader.error
        self.reader = None
        frame = hash_frame(h)
        hasher.update(HASH_STRUCT_TAG + struct.pack("<I", len(frame)) + frame)
        return hasher.hexdigest()

    # step 11: a file rewritten while it was read may be half old, half new
    def _check_unchanged(self):
        if self.tar is not None:
            try:
                st = os.fstat(self.tarfd)
            except OSError as e:
                raise _io("the archive", "stat", e) from None
            if _identity(st) != _identity(self.tar_st) or \
                    any(w.filled != w.size for w in self.files):
                _fail(IO_ERROR, "the archive changed while it was being verified")
            return
        for w in self.files:
            try:
                st = os.fstat(w.fd)
            except OSError as e:
                raise _io(w.name, "stat", e) from None
            if _identity(st) != _identity(w.st) or w.filled != w.size:
                _fail(IO_ERROR, "%s changed while it was being verified", w.name)
