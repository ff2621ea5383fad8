#!/usr/bin/env python3
"""Differential check of vd_tar against GNU tar and Python's tarfile.

For every archive vd_tar accepts, both readers must extract exactly the
files vd_tar hands the verifier, with exactly the bytes it hashed, and
nothing else. vd_tar's side comes from fuzz/tar_dump (one path per line
in, one answer per line out); the readers extract into scratch
directories.

  tar_diff.py --dump fuzz/tar_dump --replay DIR...
      each archive in DIR once; exit 1 on any disagreement
  tar_diff.py --dump fuzz/tar_dump --seconds N --seeds DIR... --out DIR
      structure-aware mutations of generated and seed archives for N
      seconds; disagreements are written to DIR, and so is a small corpus
      of accepted archives of new shapes (DIR/keep)

Standard library only. Prints one summary line last.
"""
import argparse
import hashlib
import io
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

BLOCK = 512
RECORD = 20 * BLOCK
MAX_ARCHIVE = 64 * 1024     # what a mutation may grow an archive to


# ---- vd_tar's side -----------------------------------------------------

class Dumper:
    def __init__(self, path):
        self.proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, archive):
        if b"\n" in os.fsencode(archive):
            raise ValueError("an archive path with a newline: %r" % archive)
        self.proc.stdin.write(os.fsencode(archive) + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().decode("ascii", "replace").rstrip("\n")
        if not line.startswith("ok "):
            return None, line
        f = line.split(" ")
        files = {}
        for i in range(int(f[1])):
            name, size, digest = f[2 + 3 * i: 5 + 3 * i]
            files[bytes.fromhex(name) if name != "-" else b""] = digest
        return files, None

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


# ---- the readers' side -------------------------------------------------

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def collect(root):
    """Regular files under root by relative path (bytes), and whatever is
    neither a regular file nor a directory."""
    files, others = {}, []
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for n in filenames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, os.fsencode(root))
            if os.path.islink(p) or not os.path.isfile(p):
                others.append(rel)
            else:
                files[rel] = sha256_file(p)
        for n in dirnames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                others.append(os.path.relpath(p, os.fsencode(root)))
    return files, others


def strip_top(files):
    """Files at the top level, or all in one directory with it dropped,
    as vd_tar names them; None for any other layout."""
    parts = {k: k.split(b"/") for k in files}
    if all(len(p) == 1 for p in parts.values()):
        return dict(files)
    tops = {p[0] for p in parts.values()}
    if len(tops) == 1 and all(len(p) == 2 for p in parts.values()):
        return {p[1]: files[k] for k, p in parts.items()}
    return None


def python_reads(archive, dest):
    try:
        with tarfile.open(archive) as t:
            kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            t.extractall(dest, **kw)
    except Exception as e:     # any failure to read is a disagreement
        return None, "tarfile: %s: %s" % (type(e).__name__, e)
    return collect(dest), None


def gnu_reads(archive, dest):
    r = subprocess.run(["tar", "-xf", archive, "-C", dest, "-m", "--no-same-owner",
                        "--no-same-permissions"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    return collect(dest), r.returncode, r.stderr.decode("utf-8", "replace").strip()


def compare(ours, reader, got):
    (files, others) = got
    if others:
        return "%s extracts what is not a regular file: %r" % (reader, others[:3])
    theirs = strip_top(files)
    if theirs is None:
        return "%s extracts files in another layout: %r" % (reader, sorted(files)[:4])
    if theirs != ours:
        diff = sorted(set(ours) ^ set(theirs)) or \
            sorted(k for k in ours if ours[k] != theirs.get(k))
        return "%s extracts other files or bytes: %r" % (reader, diff[:4])
    return None


class Checker:
    def __init__(self, dump, scratch):
        self.dumper = Dumper(dump)
        self.scratch = scratch
        self.tried = self.accepted = self.disagreed = self.gnu_status = 0
        self.gnu_said = None      # what GNU tar said last when it exited non-zero

    def check(self, archive):
        """None when vd_tar refuses or both readers agree with it; a
        sentence otherwise. Also (accepted, signature) for the corpus."""
        self.tried += 1
        ours, why = self.dumper.ask(archive)
        if ours is None:
            return None, False
        self.accepted += 1
        problems = []
        dest = tempfile.mkdtemp(dir=self.scratch)
        try:
            got, err = python_reads(archive, dest)
            problems.append(err or compare(ours, "tarfile", got))
        finally:
            shutil.rmtree(dest, ignore_errors=True)
        dest = tempfile.mkdtemp(dir=self.scratch)
        try:
            got, rc, err = gnu_reads(archive, dest)
            if rc != 0:
                self.gnu_status += 1
                self.gnu_said = err
            p = compare(ours, "GNU tar", got)
            problems.append(p and rc and "%s (exit %d: %s)" % (p, rc, err[:200]) or p)
        finally:
            shutil.rmtree(dest, ignore_errors=True)
        problems = [p for p in problems if p]
        if problems:
            self.disagreed += 1
            return "; ".join(problems), True
        return None, True

    def close(self):
        self.dumper.close()


# ---- archives to start from ---------------------------------------------

NAMES = [b"header.json", b"weights.safetensors", b"weights.index.json",
         b"weights-00000-of-00002.safetensors", b"notes.txt", b"README"]


def rand_bytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def python_tar(rng):
    fmt = rng.choice([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
    layout = rng.choice(["top", "dir", "dir-entry", "dot"])
    top = rng.choice(["round-00004", "a" * rng.randint(90, 160)])
    if fmt == tarfile.USTAR_FORMAT and len(top) > 150:
        top = "round-00004"
    buf = io.BytesIO()
    kw = {}
    if fmt == tarfile.PAX_FORMAT and rng.random() < 0.3:
        kw["pax_headers"] = {"comment": "round %d" % rng.randint(0, 9)}
    with tarfile.open(fileobj=buf, mode="w", format=fmt, **kw) as t:
        prefix = {"top": "", "dir": top + "/", "dir-entry": top + "/", "dot": "./"}[layout]
        if layout in ("dir-entry", "dot"):
            ti = tarfile.TarInfo(prefix.rstrip("/") or ".")
            ti.type = tarfile.DIRTYPE
            ti.mode = 0o755
            t.addfile(ti)
        for name in rng.sample(NAMES[:4], rng.randint(1, 3)):
            data = rand_bytes(rng, rng.choice([0, 1, 100, 511, 512, 513, 1500]))
            ti = tarfile.TarInfo(prefix + name.decode())
            ti.size = len(data)
            ti.mode = 0o644
            ti.mtime = rng.choice([1700000000, 1700000000.5, 0])
            if fmt == tarfile.PAX_FORMAT and rng.random() < 0.2:
                ti.pax_headers = {"comment": "c"}
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def gnu_tar(rng, scratch):
    d = tempfile.mkdtemp(dir=scratch)
    try:
        art = os.path.join(d, rng.choice(["round-00004", "b" * 120]))
        os.mkdir(art)
        for name in rng.sample(NAMES[:4], rng.randint(1, 3)):
            with open(os.path.join(art, name.decode()), "wb") as f:
                f.write(rand_bytes(rng, rng.choice([0, 1, 513, 2000])))
        fmt = rng.choice(["gnu", "posix", "ustar", "oldgnu", "v7"])
        out = os.path.join(d, "x.tar")
        how = rng.choice(["dir", "dot", "names"])
        if how == "dir":
            args = ["-C", d, os.path.basename(art)]
        elif how == "dot":
            args = ["-C", art, "."]
        else:
            args = ["-C", art] + sorted(os.listdir(art))
        r = subprocess.run(["tar", "--format=" + fmt, "-cf", out] + args,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            return None
        with open(out, "rb") as f:
            return f.read()
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- a loose view of an archive, for mutations ---------------------------

def loose_number(f):
    if f[:1] in (b"\x80", b"\xff"):
        return int.from_bytes(f[1:], "big")
    try:
        return int(f.split(b"\0")[0].strip() or b"0", 8)
    except ValueError:
        return 0


def split_entries(data):
    """[(header, data)] by each header's own size field, and the rest."""
    entries, pos = [], 0
    while pos + BLOCK <= len(data):
        h = data[pos:pos + BLOCK]
        if h == bytes(BLOCK):
            break
        size = min(loose_number(h[124:136]), len(data))
        body = data[pos + BLOCK: pos + BLOCK + size]
        entries.append([bytearray(h), bytes(body)])
        pos += BLOCK + (size + BLOCK - 1) // BLOCK * BLOCK
    return entries, data[pos:]


def checksum(h, signed=False):
    h[148:156] = b" " * 8
    s = sum((b - 256 if signed and b > 127 else b) for b in h)
    h[148:156] = b"%06o\0 " % (s & 0o777777)


def pad(b):
    return b + bytes(-len(b) % BLOCK)


def join_entries(entries, tail):
    out = b"".join(bytes(h) + pad(d) for h, d in entries)
    return out + tail


def header(name, type_, size, gnu=False):
    ti = tarfile.TarInfo(name.decode("utf-8", "surrogateescape"))
    ti.type = type_
    ti.size = size
    ti.mode = 0o644
    ti.mtime = 1700000000
    h = bytearray(ti.tobuf(tarfile.GNU_FORMAT if gnu else tarfile.USTAR_FORMAT)[-BLOCK:])
    h[124:136] = b"%011o\0" % size
    checksum(h)
    return h


def record(key, value, delta=0, length_form=None):
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n += 1
    n += delta
    digits = (length_form or "%d") % n
    return digits.encode() + body


NUMBERS = [b"%011o\0", b"%011o ", b" %010o\0", b"%012o", b"\0%010o\0",
           b"%o\0", b"   %o  \0", b"%011o\x00garbage"]
FIELD_SPOTS = {"mode": (100, 8), "uid": (108, 8), "gid": (116, 8), "size": (124, 12),
               "mtime": (136, 12), "devmajor": (329, 8), "devminor": (337, 8)}


def number_variant(rng, v, width):
    r = rng.random()
    if r < 0.5:
        s = rng.choice(NUMBERS) % v
    elif r < 0.6:
        s = b"\x80" + v.to_bytes(width - 1, "big")
    elif r < 0.7:
        s = b"\xff" * width
    else:
        s = rng.choice([b"", b" " * width, b"\0" * width, b"8", b"+1", b"0x1", b"1 2",
                        b"-1", b"7" * width, b"\t1\n", b"1_0"])
    return (s + bytes(width))[:width]


PAX_KEYS = [b"size", b"path", b"linkpath", b"mtime", b"atime", b"uid", b"uname", b"comment",
            b"hdrcharset", b"GNU.sparse.size", b"GNU.sparse.major", b"SCHILY.realsize",
            b"SCHILY.xattr.user.x", b"charset", b"GNU.volume.size", b"Size", b"size "]


def pax_value(rng, key, entries, i):
    d = entries[i][1] if i < len(entries) else b""
    others = [e[0][:100].split(b"\0")[0] for e in entries] or [b"x"]
    if key in (b"size", b"Size", b"size ", b"GNU.sparse.size", b"SCHILY.realsize"):
        return rng.choice([b"", b"%d" % len(d), b"%d" % (len(d) + rng.choice([-1, 1, 512])),
                           b"0", b"0%d" % len(d), b" %d" % len(d), b"+%d" % len(d),
                           b"%d " % len(d), b"0x1", b"99999999999999999999"])
    if key in (b"path", b"linkpath"):
        return rng.choice([b"", rng.choice(others), rng.choice(NAMES), rng.choice(NAMES) + b"/",
                           b"./" + rng.choice(NAMES), rng.choice(NAMES) + b"\0x",
                           b"d/" + rng.choice(NAMES), rng.choice(NAMES) + b"/."])
    if key in (b"mtime", b"atime", b"uid"):
        return rng.choice([b"", b"1700000000", b"1.5", b"-3", b"1e9", b"x"])
    return rng.choice([b"", b"BINARY", b"v", b"a=b", b"1\n2"])


def pax_block(rng, entries, i):
    recs = []
    for _ in range(rng.randint(1, 3)):
        k = rng.choice(PAX_KEYS)
        recs.append(record(k, pax_value(rng, k, entries, i),
                           delta=rng.choice([0] * 8 + [-1, 1]),
                           length_form=rng.choice([None] * 8 + ["%03d", " %d"])))
    body = b"".join(recs)
    r = rng.random()
    if r < 0.1:
        body += b"junk"
    typ = rng.choice(b"xxxxgX")
    h = header(b"././@PaxHeader", bytes([typ]), len(body))
    tail = b""
    if rng.random() < 0.1:
        tail = record(b"size", b"0")     # in the padding, past the size
    return [h, body + tail if tail and len(body) % BLOCK else body], len(body)


def long_block(rng, entries):
    name = rng.choice(NAMES + [b"d/" + n for n in NAMES])
    form = rng.choice(["ok", "ok", "ok", "nonul", "two", "slash", "empty"])
    data = {"ok": name + b"\0", "nonul": name, "two": name + b"\0x\0",
            "slash": name + b"/\0", "empty": b"\0"}[form]
    h = header(b"././@LongLink", b"L", len(data), gnu=True)
    return [h, data]


def smuggle(rng, entries, i):
    """Entry i's data becomes a small archive of another member."""
    inner = header(rng.choice(NAMES), b"0", 5)
    entries[i][1] = bytes(inner) + pad(b"other")
    entries[i][0][124:136] = b"%011o\0" % len(entries[i][1])


def mutate(rng, data):
    entries, tail = split_entries(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(12)
        i = rng.randrange(len(entries) + 1)
        if op == 0 and entries:                    # a numeric field
            i %= len(entries)
            field = rng.choice(list(FIELD_SPOTS))
            off, width = FIELD_SPOTS[field]
            v = len(entries[i][1]) if field == "size" else rng.choice([0, 0o644, 1, 1700000000])
            entries[i][0][off:off + width] = number_variant(rng, v, width)
        elif op == 1:                              # a pax header before i
            blk, _ = pax_block(rng, entries, i)
            entries.insert(i, blk)
        elif op == 2:                              # a GNU long name before i
            entries.insert(i, long_block(rng, entries))
        elif op == 3 and entries:                  # another type
            entries[i % len(entries)][0][156] = rng.choice(b"0\x0012345677SLKxgXVMND")
        elif op == 4 and entries:                  # a name
            e = entries[i % len(entries)][0]
            n = rng.choice(NAMES + [b"d/", b"d/x", b"./", b".", b"x/.", b"/abs", b"../x",
                                    b"d//" + rng.choice(NAMES)])
            e[0:100] = (n + bytes(100))[:100]
        elif op == 5 and entries:                  # the prefix field
            e = entries[i % len(entries)][0]
            e[345:500] = (rng.choice([b"", b"d", b"12345670", b"x" * 155]) + bytes(155))[:155]
        elif op == 6 and entries:                  # magic and version
            e = entries[i % len(entries)][0]
            e[257:265] = rng.choice([b"ustar\x0000", b"ustar  \0", b"ustar\x00xx", b"\0" * 8])
        elif op == 7 and entries:                  # a member twice, or gone
            j = i % len(entries)
            if rng.random() < 0.5:
                entries.insert(rng.randrange(len(entries) + 1),
                               [bytearray(entries[j][0]), entries[j][1]])
            else:
                del entries[j]
        elif op == 8 and entries:                  # data holding a member
            smuggle(rng, entries, i % len(entries))
        elif op == 9:                              # the end of the archive
            tail = rng.choice([bytes(2 * BLOCK), bytes(BLOCK), b"", bytes(RECORD),
                               bytes(2 * BLOCK) + b"x" + bytes(BLOCK - 1),
                               bytes(BLOCK) + bytes(header(b"late", b"0", 0))])
        elif op == 10 and entries:                 # a byte anywhere in a header
            e = entries[i % len(entries)][0]
            e[rng.randrange(BLOCK)] = rng.getrandbits(8)
        elif op == 11 and entries:                 # the data's own size
            e = entries[i % len(entries)]
            e[1] = e[1][:rng.randint(0, len(e[1]))] if rng.random() < 0.5 else \
                e[1] + rand_bytes(rng, rng.choice([1, 512]))
        if entries and rng.random() < 0.9:
            for h, _ in entries:
                checksum(h, signed=rng.random() < 0.02)
    out = join_entries(entries, tail)
    if rng.random() < 0.05:
        out = out[:rng.randrange(len(out) + 1)]
    return out[:MAX_ARCHIVE]


# ---- running ---------------------------------------------------------------

def signature(data):
    """A rough shape: the types and pax keywords in order, for keeping one
    accepted archive per shape."""
    entries, tail = split_entries(data)
    sig = []
    for h, d in entries:
        t = bytes(h[156:157])
        if t in (b"x", b"g"):
            sig.append(t + b":" + b",".join(sorted(set(
                r.split(b"=")[0].split(b" ")[-1] for r in d.split(b"\n") if b"=" in r))))
        else:
            sig.append(t + bytes(h[257:263]))
    return b"|".join(sig) + b"#%d" % (len(tail) // BLOCK)


def replay(args):
    scratch = tempfile.mkdtemp(prefix="tar-diff.")
    ck = Checker(args.dump, scratch)
    bad = 0
    try:
        for d in args.replay:
            for n in sorted(os.listdir(d)):
                p = os.path.join(d, n)
                if not os.path.isfile(p):
                    continue
                why, _ = ck.check(p)
                if why:
                    bad += 1
                    print("DISAGREE %s: %s" % (p, why))
    finally:
        ck.close()
        shutil.rmtree(scratch, ignore_errors=True)
    print("%d archives, %d accepted, %d disagreements" % (ck.tried, ck.accepted, bad))
    return 1 if bad else 0


def fuzz(args):
    rng = random.Random(args.seed)
    scratch = tempfile.mkdtemp(prefix="tar-diff.")
    keep = os.path.join(args.out, "keep")
    os.makedirs(keep, exist_ok=True)
    ck = Checker(args.dump, scratch)
    seeds = []
    for d in args.seeds or []:
        for n in sorted(os.listdir(d)):
            with open(os.path.join(d, n), "rb") as f:
                seeds.append(f.read())
    shapes, found = set(), 0
    deadline = time.monotonic() + args.seconds
    path = os.path.join(scratch, "input.tar")
    try:
        while time.monotonic() < deadline:
            r = rng.random()
            if r < 0.4 and seeds:
                base = rng.choice(seeds)
            elif r < 0.9:
                base = python_tar(rng)
            else:
                base = gnu_tar(rng, scratch) or python_tar(rng)
            data = base if rng.random() < 0.05 else mutate(rng, base)
            with open(path, "wb") as f:
                f.write(data)
            why, accepted = ck.check(path)
            if why:
                found += 1
                name = "disagree-%04d.tar" % found
                with open(os.path.join(args.out, name), "wb") as f:
                    f.write(data)
                print("DISAGREE %s: %s" % (name, why), flush=True)
            if ck.gnu_said is not None:
                # Same bytes, yet GNU tar complained: kept to look at.
                if ck.gnu_status <= 20:
                    with open(os.path.join(args.out, "gnu-status-%02d.tar" % ck.gnu_status),
                              "wb") as f:
                        f.write(data)
                    print("GNU tar exited non-zero: %s" % ck.gnu_said[:200], flush=True)
                ck.gnu_said = None
            if accepted and not why:
                s = signature(data)
                if s not in shapes and len(data) <= 16 * 1024:
                    shapes.add(s)
                    seeds.append(data)
                    with open(os.path.join(keep, "shape-%04d.tar" % len(shapes)), "wb") as f:
                        f.write(data)
    finally:
        ck.close()
        shutil.rmtree(scratch, ignore_errors=True)
    print("%d inputs, %d accepted, %d disagreements, %d shapes kept, GNU tar exited "
          "non-zero on %d accepted, %d s" % (ck.tried, ck.accepted, ck.disagreed, len(shapes),
                                             ck.gnu_status, args.seconds))
    return 1 if ck.disagreed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True, help="the tar_dump program")
    ap.add_argument("--replay", nargs="+", help="directories of archives to check once")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--seeds", action="append", help="a directory of archives to mutate")
    ap.add_argument("--out", default="tar-diff-out")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    os.umask(0o022)
    return replay(args) if args.replay else fuzz(args)


if __name__ == "__main__":
    sys.exit(main())
