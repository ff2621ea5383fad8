"""An artifact packed as an uncompressed tar, read in place: the rules,
limits and sentences of the C verifier's src/vd_tar.c.

parse() reads the archive's headers only (ustar, pax 'x' and 'g' with
their path and size keywords, GNU long names and base-256 sizes), never a
member's data, and returns where each file's data lies. The files lie at
the archive's top level or all in one directory; links, devices, FIFOs,
sparse files, absolute or ".." names, a name twice, files deeper than one
directory, bad checksums, numbers that are not numbers, anything cut short,
no end marker or anything but zeros after it are ARTIFACT_INVALID.
"""

from ._errors import ARTIFACT_INVALID, VerificationError

BLOCK = 512
MAX_MEMBERS = 8192                # members of every kind, directories included
MAX_NAME = 4096                   # bytes of one member's path
MAX_NAME_BYTES = 1 << 20          # bytes of all member paths together
MAX_EXT = 64 * 1024               # bytes of one pax extended header
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


def _invalid(fmt, *args):
    raise VerificationError(ARTIFACT_INVALID, _NOT_TAR + (fmt % args if args else fmt))


def _s(b, n=64):
    """A name for a message, cut as the C verifier's %.64s cuts it."""
    return b.split(b"\x00", 1)[0][:n].decode("utf-8", "replace")


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


def _normalise(raw):
    """raw without its "." and empty components, and their number."""
    if not raw:
        _invalid("a member has an empty name")
    if b"\x00" in raw:
        _invalid('member "%s" has a NUL byte in its name', _s(raw))
    if raw[:1] == b"/":
        _invalid('member "%s" has an absolute name', _s(raw))
    parts = []
    for c in raw.split(b"/"):
        if c == b"..":
            _invalid('member "%s" has a ".." component', _s(raw))
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
        self.x = {}                 # the next member's pax path and size
        self.g = {}                 # every member's
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
        if self.pending_x or self.long is not None:
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
        data = self.read(self.pos + BLOCK, size) if size else b""
        if t == b"L":
            self.long_name(data)
        elif t == b"x":
            self.pending_x = True
            self.records(data, self.x)
        else:
            self.records(data, self.g)
        self.pos += BLOCK + _round(size)

    def long_name(self, data):
        name = _field(data)
        if not name:
            _invalid("the GNU long name at offset %d is empty", self.pos)
        if len(name) > MAX_NAME:
            _invalid("the GNU long name at offset %d is above the limit of %d bytes",
                     self.pos, MAX_NAME)
        self.long = name

    def records(self, data, o):
        """Records "LEN KEY=VALUE\\n", LEN counting the whole record,
        filling the data exactly."""
        i, n = 0, len(data)
        while i < n:
            j, length = i, 0
            while j < n and 0x30 <= data[j] <= 0x39 and length <= n:
                length = length * 10 + data[j] - 0x30
                j += 1
            if j == i or j == n or data[j] != 0x20 or length > n - i or \
                    length < j - i + 4 or data[i + length - 1] != 0x0a:
                _invalid("the pax header at offset %d has a malformed record", self.pos)
            rec = data[j + 1:i + length - 1]
            eq = rec.find(b"=")
            if eq <= 0:
                _invalid("the pax header at offset %d has a record without a keyword", self.pos)
            self.keyword(o, rec[:eq], rec[eq + 1:])
            i += length

    def keyword(self, o, k, v):
        if k.startswith(_SPARSE):
            _invalid("the pax header at offset %d describes a sparse file (%s)", self.pos, _s(k))
        if k == b"path":
            if len(v) > MAX_NAME:
                _invalid("the pax header at offset %d has a path of %d bytes, above the "
                         "limit of %d", self.pos, len(v), MAX_NAME)
            if v:
                o["path"] = v
            else:
                o.pop("path", None)
        elif k == b"size":
            if not v:
                o.pop("size", None)
            elif not v.isdigit() or int(v) >= 1 << 64:
                _invalid("the pax header at offset %d has a size that is not a decimal "
                         "number that fits", self.pos)
            else:
                o["size"] = int(v)

    def member_name(self, h, ustar):
        if self.pending_x and "path" in self.x:
            return self.x["path"]
        if self.long is not None:
            return self.long
        if "path" in self.g:
            return self.g["path"]
        name = _field(h[0:100])
        prefix = _field(h[345:500]) if ustar else b""
        return prefix + b"/" + name if prefix else name

    def member_size(self, h, name):
        if self.pending_x and "size" in self.x:
            return self.x["size"]
        if "size" in self.g:
            return self.g["size"]
        size = _number(h[124:136], True)
        if size is None:
            _invalid('member "%s" has a size field that is not a valid octal or base-256 '
                     'number', _s(name))
        return size

    def member(self, h, t, ustar):
        if self.pending_x and "path" in self.x and self.long is not None:
            _invalid("the member at offset %d has both a pax path and a GNU long name",
                     self.pos)
        name = self.member_name(h, ustar)
        if t not in _FILE and t != _DIR:
            why, c = _REFUSED.get(t, _OTHER), t[0]
            kind = "'%c'" % c if 0x20 <= c < 0x7f else "0x%02x" % c
            _invalid('member "%s" %s (type %s); an artifact tar holds only regular files '
                     'and directories', _s(name), why, kind)
        size = self.member_size(h, name)
        data = self.pos + BLOCK
        if size > self.size - data:
            _invalid('member "%s" has %d bytes of data but the archive ends %d bytes after '
                     'its header', _s(name), size, self.size - data)
        if t == _DIR and size:
            _invalid('directory member "%s" has %d bytes of data', _s(name), size)
        self.add(name, t == _DIR, data, size)
        self.pending_x = False
        self.x.clear()
        self.long = None
        self.pos = data + _round(size)

    def add(self, raw, is_dir, offset, size):
        if len(self.entries) == MAX_MEMBERS:
            _invalid("the archive has more than %d members", MAX_MEMBERS)
        path, depth = _normalise(raw)
        if not is_dir and raw.endswith(b"/"):
            _invalid("member \"%s\" ends in '/' but is not a directory", _s(path))
        if not is_dir and depth == 0:
            _invalid('a file member is named "%s", which names no file',
                     "..." if len(raw) > 64 else _s(raw))
        if len(path) + 1 > MAX_NAME_BYTES - self.name_bytes:
            _invalid("the member names add up to more than %d bytes", MAX_NAME_BYTES)
        self.entries.append((path, depth, is_dir, offset, size))
        self.name_bytes += len(path) + 1

    def finish(self):
        """{file name: (offset, size)} once the layout is checked."""
        e = sorted(self.entries, key=lambda m: m[0])
        for a, b in zip(e, e[1:]):
            if a[0] == b[0]:
                _invalid('member "%s" appears twice', _s(b[0]) if b[1] else ".")
        if any(not is_dir and depth == 1 for _, depth, is_dir, _, _ in e):
            for path, depth, is_dir, _, _ in e:
                if depth > 1 or (is_dir and depth == 1):
                    _invalid('member "%s" is in a directory while files lie at the top '
                             'level; an artifact tar holds its files at the top level or all '
                             'in one directory', _s(path))
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
                             _s(top), _s(first))
                if depth > 2 or (is_dir and depth == 2):
                    _invalid('member "%s" is nested deeper than one directory; an artifact '
                             'has no subdirectories', _s(path))
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
