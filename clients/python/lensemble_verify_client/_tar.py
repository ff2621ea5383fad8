"""An artifact packed as an uncompressed tar, read in place: the rules,
limits and sentences of the C verifier's src/lib/vd_tar.c.

parse() reads the archive's headers only (ustar, pax 'x' and 'g', GNU long
names and base-256 sizes), never a member's data, and returns where each
file's data lies. The files lie at the archive's top level or all in one
directory; links, devices, FIFOs, sparse files, absolute or ".." names, a
name twice, files deeper than one directory, bad checksums, numbers that
are not numbers, anything cut short, no end marker or anything but zeros
after it are ARTIFACT_INVALID.

So is every shape that GNU tar and Python's tarfile, the readers a
participant extracts with, read two ways, even where this parse could pick
one reading: pax records that are not exact ("LEN key=value\n", LEN
without a leading zero, the records filling the data, zeros after it); a
keyword other than path, size and metadata with no bearing on names or
bytes; an empty value (GNU tar takes an empty size for "the header's",
tarfile for 0); a value that is not plain, or a path or size twice; a
global header that sets a path or size, comes between an extended header
and its member, or describes no member; a long name that is not the name
and one NUL; a numeric field of any header that is not a number to both
readers; bytes where ustar keeps a name prefix in a GNU header; a file
whose own name field ends in '/' under a pax or long name, or whose last
component is ".".
"""

from ._errors import ARTIFACT_INVALID, VerificationError

BLOCK = 512
MAX_MEMBERS = 8192                # members of every kind, directories included
MAX_NAME = 4096                   # bytes of one member's path
MAX_NAME_BYTES = 1 << 20          # bytes of all member paths together
MAX_EXT = 64 * 1024               # bytes of one pax extended header: whole blocks
TRAILER_STEP = MAX_EXT            # zero padding checked per read

_USTAR = b"ustar\x0000"
_GNU = b"ustar  \x00"
_NOT_TAR = "not a valid artifact tar: "
_SPARSE = b"GNU.sparse."
_FILE = (b"0", b"\x00", b"7")     # '7', a contiguous file, is a regular file
_DIR = b"5"
_REFUSED = {
    b"1": "is a hard link", b"2": "is a symbolic link", b"3": "is a character device",
    b"4": "is a block device", b"6": "is a FIFO", b"S": "is a sparse file",
}
_OTHER = "has a type other than file or directory"

# The numbers the parse has no use for: (offset, length, name, may be
# negative). tarfile reads each one and takes a header where one is not a
# number for the end of the archive, while GNU tar reads on, and refuses a
# negative owner that tarfile takes: both must be able to read them.
_META = ((100, 8, "mode", False), (108, 8, "uid", False), (116, 8, "gid", False),
         (136, 12, "mtime", True), (329, 8, "devmajor", False), (337, 8, "devminor", False))

# The keywords a pax header may hold: path and size, read here, and
# metadata with no bearing on a member's name or bytes, with the kind of
# value each takes. Any other one may mean something to some reader
# (linkpath, hdrcharset, GNU.volume.*, SCHILY.realsize), so it is refused,
# never ignored. Those ending in '.' name a prefix.
_PATH, _SIZE, _TIME, _ID, _TEXT = range(5)
_PAX_KEYS = (
    (b"path", _PATH), (b"size", _SIZE),
    (b"mtime", _TIME), (b"atime", _TIME), (b"ctime", _TIME),
    (b"LIBARCHIVE.creationtime", _TIME),
    (b"uid", _ID), (b"gid", _ID), (b"SCHILY.dev", _ID), (b"SCHILY.ino", _ID),
    (b"SCHILY.nlink", _ID),
    (b"uname", _TEXT), (b"gname", _TEXT), (b"comment", _TEXT), (b"charset", _TEXT),
    (b"SCHILY.fflags", _TEXT),
    (b"SCHILY.xattr.", _TEXT), (b"LIBARCHIVE.xattr.", _TEXT), (b"SCHILY.acl.", _TEXT),
)


def _invalid(fmt, *args):
    raise VerificationError(ARTIFACT_INVALID, _NOT_TAR + (fmt % args if args else fmt))


def _utf8_len(c):
    """The length of the UTF-8 sequence lead byte c begins, 0 for none."""
    return 1 if c < 0x80 else 2 if 0xc2 <= c <= 0xdf else 3 if 0xe0 <= c <= 0xef else \
        4 if 0xf0 <= c <= 0xf4 else 0


def quote(b, n=64):
    """A name for a message, cut as the C verifier's %.64s cuts it, each
    byte that does not begin a valid UTF-8 sequence made a '?' as the C
    verifier makes it (vd_utf8_sanitize)."""
    b = b.split(b"\x00", 1)[0][:n]
    out, i = [], 0
    while i < len(b):
        k = _utf8_len(b[i])
        try:
            c = b[i:i + k].decode("utf-8") if k and i + k <= len(b) else None
        except UnicodeDecodeError:
            c = None
        out.append("?" if c is None else c)
        i += 1 if c is None else k
    return "".join(out)


def _round(n):
    return -(-n // BLOCK) * BLOCK


def _field(f):
    return f.split(b"\x00", 1)[0]


def _number(f, base256):
    """Octal digits after spaces, then only spaces and NULs; or GNU
    base-256 (first byte 0x80). None when neither, or beyond 64 bits."""
    if base256 and f[0] == 0x80:
        v = int.from_bytes(f[1:], "big")
        return v if v < 1 << 64 else None
    i = 0
    while i < len(f) and f[i] == 0x20:
        i += 1
    j = i
    while j < len(f) and 0x30 <= f[j] <= 0x37:
        j += 1
    if j == i or any(c not in (0x20, 0) for c in f[j:]):
        return None
    return int(f[i:j], 8)


def _meta_number_ok(f, may_be_negative):
    """A number both readers take: octal as _number reads it, GNU base-256
    (negative only where allowed: a time before 1970), or an empty field
    (GNU tar leaves a file's device numbers empty; both read 0)."""
    return f.count(0) == len(f) or f[0] == 0x80 or (may_be_negative and f[0] == 0xff) or \
        _number(f, False) is not None


def _decimal(v):
    """Decimal digits as the readers' writers put them: no sign, no blank,
    no leading zero; fits in 64 bits. None otherwise."""
    # 2**64 has 20 digits; int() is not asked for thousands of them.
    if not v or len(v) > 20 or (len(v) > 1 and v[:1] == b"0") or \
            any(not 0x30 <= c <= 0x39 for c in v):
        return None
    n = int(v)
    return n if n < 1 << 64 else None


def _digits(v, i):
    while i < len(v) and 0x30 <= v[i] <= 0x39:
        i += 1
    return i


def _time(v):
    """A pax time: an optional '-', digits, an optional '.' and digits."""
    start = 1 if v[:1] == b"-" else 0
    i = _digits(v, start)
    if i == start:
        return False
    if i < len(v) and v[i] == 0x2e:
        start = i + 1
        i = _digits(v, start)
        if i == start:
            return False
    return i == len(v)


def _pax_key(k):
    """The (name, kind) of keyword k in _PAX_KEYS, or None."""
    for name, kind in _PAX_KEYS:
        if k == name if not name.endswith(b".") else \
                k.startswith(name) and len(k) > len(name):
            return name, kind
    return None


def _plain_keyword(k):
    """Printable and without a blank: readers split records alike only
    then."""
    return all(0x20 < c != 0x7f for c in k)


def _normalise(raw):
    """raw without its "." and empty components, and their number."""
    if not raw:
        _invalid("a member has an empty name")
    if b"\x00" in raw:
        _invalid('member "%s" has a NUL byte in its name', quote(raw))
    if raw[:1] == b"/":
        _invalid('member "%s" has an absolute name', quote(raw))
    parts = []
    for c in raw.split(b"/"):
        if c == b"..":
            _invalid('member "%s" has a ".." component', quote(raw))
        if c and c != b".":
            parts.append(c)
    return b"/".join(parts), len(parts)


class _Parser:
    def __init__(self, read, size):
        self.read = read
        self.size = size
        self.pos = 0
        self.zero = False           # a zero block just seen
        self.pending_x = False
        self.pending_g = False      # a 'g' waits for a member (tarfile reads it
        #                             with the next header, and fails at the end)
        self.x = {}                 # the next member's pax path and size
        self.long = None            # the next member's GNU long name
        self.entries = []           # (path, depth, is_dir, offset, size)
        self.name_bytes = 0

    def run(self):
        while True:
            h = self.read(self.pos, BLOCK)
            if h.count(0) == BLOCK:
                if self.zero_block():
                    return
                continue
            if self.zero:
                _invalid("a single zero block at offset %d is followed by more headers",
                         self.pos - BLOCK)
            self.header(h)
            if self.pos == self.size:
                _invalid("the archive ends at offset %d without its end marker "
                         "(two zero blocks)", self.pos)

    def zero_block(self):
        """True at the end marker, once the padding after it is checked."""
        if self.pending_x or self.long is not None or self.pending_g:
            _invalid("the extended header before offset %d describes no member", self.pos)
        self.pos += BLOCK
        if not self.zero:
            self.zero = True
            if self.pos == self.size:
                _invalid("the archive ends after one zero block; its end marker is two")
            return False
        while self.pos < self.size:
            n = min(self.size - self.pos, TRAILER_STEP)
            if self.read(self.pos, n).count(0) != n:
                _invalid("bytes other than zero follow the end marker, at offset %d", self.pos)
            self.pos += n
        return True

    def header(self, h):
        chk = _number(h[148:156], False)
        if chk is None:
            _invalid("the header at offset %d has a checksum field that is not octal", self.pos)
        if chk != sum(h[:148]) + 8 * 0x20 + sum(h[156:]):
            _invalid("the header at offset %d has a bad checksum", self.pos)
        ustar = h[257:265] == _USTAR
        if not ustar and h[257:265] != _GNU:
            _invalid("the header at offset %d is not a ustar, pax or GNU header", self.pos)
        for off, n, what, may_be_negative in _META:
            if not _meta_number_ok(h[off:off + n], may_be_negative):
                _invalid("the header at offset %d has a %s field that GNU tar or Python's "
                         "tarfile cannot read as a number", self.pos, what)
        t = h[156:157]
        if t in (b"x", b"g", b"L"):
            self.ext(h, t)
        elif t == b"K":
            _invalid("the header at offset %d is a GNU long link name; an artifact tar holds "
                     "no links", self.pos)
        else:
            self.member(h, t, ustar)

    def ext(self, h, t):
        if t == b"x" and self.pending_x:
            _invalid("two pax extended headers in a row at offset %d", self.pos)
        if t == b"L" and self.long is not None:
            _invalid("two GNU long names in a row at offset %d", self.pos)
        # tarfile and GNU tar disagree on what a global header between an
        # extended header and its member applies to.
        if t == b"g" and (self.pending_x or self.long is not None):
            _invalid("a global pax header at offset %d comes between an extended header and "
                     "its member", self.pos)
        size = _number(h[124:136], False)
        if size is None:
            _invalid("the extended header at offset %d has a size field that is not octal",
                     self.pos)
        cap = MAX_NAME + 1 if t == b"L" else MAX_EXT
        if size > cap:
            _invalid("the extended header at offset %d is %d bytes, above the limit of %d",
                     self.pos, size, cap)
        if size > self.size - self.pos - BLOCK:
            _invalid("the extended header at offset %d runs past the end of the archive",
                     self.pos)
        if size == 0 and t == b"L":
            _invalid("the GNU long name at offset %d is empty", self.pos)
        # With its padding, which must be zeros: tarfile reads pax records
        # and long names up to the end of the block.
        data = self.read(self.pos + BLOCK, _round(size)) if size else b""
        if data[size:].count(0) != len(data) - size:
            _invalid("the extended header at offset %d has bytes other than zero after its "
                     "data, which Python's tarfile reads as more of it", self.pos)
        data = data[:size]
        if t == b"L":
            self.long_name(data)
        elif t == b"x":
            self.pending_x = True
            self.records(data, self.x)
        else:
            self.pending_g = True
            self.records(data, None)
        self.pos += BLOCK + _round(size)

    def long_name(self, data):
        """The name and one NUL, as GNU tar and tarfile write it."""
        name = _field(data)
        if not name:
            _invalid("the GNU long name at offset %d is empty", self.pos)
        if len(name) != len(data) - 1:
            _invalid("the GNU long name at offset %d is not a name ended by its only NUL byte",
                     self.pos)
        if len(name) > MAX_NAME:
            _invalid("the GNU long name at offset %d is above the limit of %d bytes",
                     self.pos, MAX_NAME)
        self.long = name

    def records(self, data, o):
        """Records "LEN KEY=VALUE\\n", LEN in decimal without a leading zero
        and counting the whole record, filling the data exactly: GNU tar
        also takes blanks around LEN, and tarfile ignores what follows a
        record it cannot read, so anything else would be read two ways.
        o: the next member's path and size; None for a global header."""
        i, n = 0, len(data)
        while i < n:
            j, length = i, 0
            while j < n and 0x30 <= data[j] <= 0x39 and length <= n:
                length = length * 10 + data[j] - 0x30
                j += 1
            # The shortest record: digits, ' ', a one-byte key, '=', '\n'.
            if j == i or data[i] == 0x30 or j == n or data[j] != 0x20 or length > n - i or \
                    length < j - i + 4 or data[i + length - 1] != 0x0a:
                _invalid("the pax header at offset %d has a malformed record", self.pos)
            rec = data[j + 1:i + length - 1]
            eq = rec.find(b"=")
            if eq <= 0:
                _invalid("the pax header at offset %d has a record without a keyword", self.pos)
            if not _plain_keyword(rec[:eq]):
                _invalid("the pax header at offset %d has a keyword with a blank or a control "
                         "character", self.pos)
            self.keyword(o, rec[:eq], rec[eq + 1:])
            i += length

    def keyword(self, o, k, v):
        """One record. An empty value is refused for every keyword: POSIX
        has it unset the keyword, GNU tar does so (an empty size leaves the
        header's), Python's tarfile takes it for a value (an empty size is
        0)."""
        if k.startswith(_SPARSE):
            _invalid("the pax header at offset %d describes a sparse file (%s)", self.pos,
                     quote(k))
        key = _pax_key(k)
        if key is None:
            _invalid('the pax header at offset %d has keyword "%s", which this reader does not '
                     'interpret and another may apply to the member', self.pos, quote(k))
        name, kind = key
        if not v:
            _invalid("the pax header at offset %d has an empty %s record, which GNU tar takes "
                     "for unset and Python's tarfile for a value", self.pos, name.decode())
        if kind in (_PATH, _SIZE):
            self.override(o, kind, v)
        elif kind == _TIME and not _time(v):
            _invalid("the pax header at offset %d has a %s that is not a decimal time",
                     self.pos, name.decode())
        elif kind == _ID and _decimal(v) is None:
            _invalid("the pax header at offset %d has a %s that is not a decimal number",
                     self.pos, name.decode())

    def override(self, o, kind, v):
        """path or size, for the next member (o); a global header (o None)
        may set neither, as tarfile applies it only to members that have a
        pax header of their own and GNU tar to every member."""
        what = "path" if kind == _PATH else "size"
        if o is None:
            _invalid("the global pax header at offset %d sets %s, which readers apply to "
                     "different members", self.pos, what)
        if what in o:
            _invalid("the pax header at offset %d has two %s records", self.pos, what)
        if kind == _SIZE:
            size = _decimal(v)
            if size is None:
                _invalid("the pax header at offset %d has a size that is not a decimal number "
                         "that fits (digits only, no leading zero)", self.pos)
            o["size"] = size
            return
        if len(v) > MAX_NAME:
            _invalid("the pax header at offset %d has a path of %d bytes, above the "
                     "limit of %d", self.pos, len(v), MAX_NAME)
        o["path"] = v

    def member_name(self, h, ustar):
        if self.pending_x and "path" in self.x:
            return self.x["path"]
        if self.long is not None:
            return self.long
        name = _field(h[0:100])
        prefix = _field(h[345:500]) if ustar else b""
        return prefix + b"/" + name if prefix else name

    def member_size(self, h, name):
        """The header's size field is checked even when a pax size replaces
        it: tarfile reads it first and stops at a header where it is no
        number."""
        size = _number(h[124:136], True)
        if size is None:
            _invalid('member "%s" has a size field that is not a valid octal or base-256 '
                     'number', quote(name))
        if self.pending_x and "size" in self.x:
            return self.x["size"]
        return size

    def member(self, h, t, ustar):
        if self.pending_x and "path" in self.x and self.long is not None:
            _invalid("the member at offset %d has both a pax path and a GNU long name",
                     self.pos)
        name = self.member_name(h, ustar)
        # tarfile makes a type-NUL member whose own name field ends in '/' a
        # directory, whatever name a pax or GNU header gives it.
        if t != _DIR and ((self.pending_x and "path" in self.x) or self.long is not None) and \
                _field(h[0:100]).endswith(b"/"):
            _invalid("member \"%s\" is not a directory but its header's name field ends in '/'",
                     quote(name))
        if t not in _FILE and t != _DIR:
            why, c = _REFUSED.get(t, _OTHER), t[0]
            kind = "'%c'" % c if 0x20 <= c < 0x7f else "0x%02x" % c
            _invalid('member "%s" %s (type %s); an artifact tar holds only regular files '
                     'and directories', quote(name), why, kind)
        # GNU tar writes zeros there; tarfile would read a prefix of the name.
        if not ustar and h[345:500].count(0) != 155:
            _invalid('the GNU header of member "%s" has bytes where ustar keeps a name prefix, '
                     "which Python's tarfile reads as part of the name and GNU tar does not",
                     quote(name))
        size = self.member_size(h, name)
        data = self.pos + BLOCK
        if size > self.size - data:
            _invalid('member "%s" has %d bytes of data but the archive ends %d bytes after '
                     'its header', quote(name), size, self.size - data)
        if t == _DIR and size:
            _invalid('directory member "%s" has %d bytes of data', quote(name), size)
        self.add(name, t == _DIR, data, size)
        self.pending_x = self.pending_g = False
        self.x.clear()
        self.long = None
        self.pos = data + _round(size)

    def add(self, raw, is_dir, offset, size):
        if len(self.entries) == MAX_MEMBERS:
            _invalid("the archive has more than %d members", MAX_MEMBERS)
        path, depth = _normalise(raw)
        if not is_dir and raw.endswith(b"/"):
            _invalid("member \"%s\" ends in '/' but is not a directory", quote(path))
        if not is_dir and depth == 0:
            _invalid('a file member is named "%s", which names no file',
                     "..." if len(raw) > 64 else quote(raw))
        # "d/." is "d" here, a directory to a reader that extracts it.
        if not is_dir and raw.endswith(b"/."):
            _invalid('file member "%s" ends in a "." component, which names a directory',
                     quote(raw))
        if len(path) + 1 > MAX_NAME_BYTES - self.name_bytes:
            _invalid("the member names add up to more than %d bytes", MAX_NAME_BYTES)
        self.entries.append((path, depth, is_dir, offset, size))
        self.name_bytes += len(path) + 1

    def finish(self):
        """{file name: (offset, size)} once the layout is checked."""
        e = sorted(self.entries, key=lambda m: m[0])
        for a, b in zip(e, e[1:]):
            if a[0] == b[0]:
                _invalid('member "%s" appears twice', quote(b[0]) if b[1] else ".")
        if any(not is_dir and depth == 1 for _, depth, is_dir, _, _ in e):
            for path, depth, is_dir, _, _ in e:
                if depth > 1 or (is_dir and depth == 1):
                    _invalid('member "%s" is in a directory while files lie at the top '
                             'level; an artifact tar holds its files at the top level or all '
                             'in one directory', quote(path))
            strip = 0
        else:
            top = None
            for path, depth, is_dir, _, _ in e:
                if depth == 0:
                    continue
                first = path.split(b"/", 1)[0]
                if top is None:
                    top = first
                elif first != top:
                    _invalid('members lie in more than one top directory ("%s" and "%s")',
                             quote(top), quote(first))
                if depth > 2 or (is_dir and depth == 2):
                    _invalid('member "%s" is nested deeper than one directory; an artifact '
                             'has no subdirectories', quote(path))
            strip = len(top) + 1 if top is not None else 0
        return {path[strip:]: (offset, size)
                for path, _, is_dir, offset, size in e if not is_dir}


def parse(read, size):
    """The files of the archive of `size` bytes, {name (bytes): (data offset,
    size)}; read(offset, n) returns n bytes of it. VerificationError
    (ARTIFACT_INVALID) when it is not an artifact tar."""
    if size == 0:
        _invalid("the file is empty")
    if size % BLOCK:
        _invalid("the file is %d bytes, not a whole number of %d-byte blocks", size, BLOCK)
    if size < 2 * BLOCK:
        _invalid("the file is %d bytes, too short for the end marker of two zero blocks", size)
    p = _Parser(read, size)
    p.run()
    return p.finish()
