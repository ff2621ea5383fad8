#!/bin/sh
# Tar artifacts through lensemble-verify --json: every golden case packed
# by GNU tar (gnu, posix and ustar formats; files in one directory, under
# "./", and named one by one) and by Python's tarfile (its default format,
# USTAR, GNU and PAX; in one directory and at the top level) gives the
# verdict its directory gives, field for field, mapped and (--expect) read
# into memory. Then what a directory may hold but a tar may not: links,
# devices, sparse files; and broken archives.
. "$top_srcdir/tests/integration/lib.sh"

CLI="$top_builddir/lensemble-verify"
CASES="$DATA/golden-cases"
need tar
need python3
T="$WORK/tars"
mkdir -p "$T"
: > "$LOG"    # no daemon here; finish() shows this log on failure

# The CLI's JSON line without what differs between any two runs.
verdict() {
	"$CLI" --json "$@" | jq -c 'del(.path, .seconds)'
}

# The code the reference gave a case, as the CLI spells it.
expected_code() {
	jq -r --arg n "$1" '.cases[] | select(.path == $n) | .code // "ok"' "$CASES/cases.json"
}

# same NAME DIR_VERDICT TAR...: each tar's verdict is the directory's.
same() {
	local name="$1" want="$2" tarfile got bad=0; shift 2
	for tarfile in "$@"; do
		got=$(verdict "$tarfile")
		if [ "$got" != "$want" ]; then
			not_ok "$name: $(basename "$tarfile") gives $got, the directory $want"
			bad=1
		fi
	done
	[ "$bad" = 0 ] && ok "$name: $# tars give the directory's verdict"
}

# Python's tarfile: every format, in one directory and at the top level.
python3 - "$CASES" "$T" $(jq -r '.cases[].path' "$CASES/cases.json") <<'EOF'
import os, sys, tarfile

src, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
formats = {"default": {}, "ustar": {"format": tarfile.USTAR_FORMAT},
           "gnu": {"format": tarfile.GNU_FORMAT}, "pax": {"format": tarfile.PAX_FORMAT}}
for name in names:
    d = os.path.join(src, name)
    for fmt, kw in formats.items():
        with tarfile.open(os.path.join(out, "%s.py-%s-dir.tar" % (name, fmt)), "w", **kw) as t:
            t.add(d, arcname=name)
        with tarfile.open(os.path.join(out, "%s.py-%s-top.tar" % (name, fmt)), "w", **kw) as t:
            for f in sorted(os.listdir(d)):
                t.add(os.path.join(d, f), arcname=f)
EOF
check "tarfile wrote the tars" 0 "$?"

n=0
for name in $(jq -r '.cases[].path' "$CASES/cases.json"); do
	dir="$CASES/$name"
	want=$(verdict "$dir")
	check "$name: the directory verifies as the reference says" "$(expected_code "$name")" \
		"$(echo "$want" | jq -r '.code // "ok"')"
	for f in gnu posix ustar; do
		tar --format=$f -C "$CASES" -cf "$T/$name.$f-dir.tar" "$name"
		tar --format=$f -C "$dir" -cf "$T/$name.$f-dot.tar" .
		(cd "$dir" && tar --format=$f -cf "$T/$name.$f-names.tar" $(ls))
	done
	same "$name" "$want" "$T/$name".*.tar
	# Against the committed hash the CLI reads the bytes into memory.
	if [ "$(echo "$want" | jq -r .ok)" = true ]; then
		h=$(echo "$want" | jq -r .content_hash)
		want_expect=$(verdict --expect "$h" "$dir")
		same "$name with --expect" "$want_expect" "$T/$name.posix-dir.tar" \
			"$T/$name.py-default-top.tar" "$T/$name.gnu-names.tar"
	fi
	n=$((n + 1))
done
check "every golden case was packed" 13 "$n"

# Long names: GNU 'L' records, pax path records, ustar's prefix field.
long="artifact-$(printf '%0120d' 0)"
mkdir -p "$WORK/long/$long"
cp "$CASES/round-00002/"* "$WORK/long/$long/"
for f in gnu posix; do
	tar --format=$f -C "$WORK/long" -cf "$T/long.$f.tar" "$long"
done
# ustar splits a long path at a '/' into prefix and name; a directory's
# own entry has no '/' to split at, so the files go in by name.
(cd "$WORK/long" && tar --format=ustar -cf "$T/long.ustar.tar" "$long"/*)
same "a 128-byte directory name" "$(verdict "$CASES/round-00002")" \
	"$T/long.gnu.tar" "$T/long.posix.tar" "$T/long.ustar.tar"

# What a tar may not hold. Each copy of round-00000 verifies as a
# directory (the verifier reads only the files header.json names), yet
# its tar is refused.
H0=$(verdict "$CASES/round-00000")
art() {
	rm -rf "$WORK/a"
	mkdir -p "$WORK/a/art"
	cp "$CASES/round-00000/"* "$WORK/a/art/"
}
refused() {
	local what="$1" needle="$2" got; shift 2
	got=$(verdict "$@")
	check "$what: artifact_invalid" artifact_invalid "$(echo "$got" | jq -r .code)"
	case $(echo "$got" | jq -r .detail) in
	*"$needle"*) ok "$what: the detail says \"$needle\"" ;;
	*) not_ok "$what: the detail $(echo "$got" | jq .detail) lacks \"$needle\"" ;;
	esac
}

art
ln "$WORK/a/art/weights.safetensors" "$WORK/a/art/copy.safetensors"
check "a hard-linked extra file: the directory verifies" "$H0" "$(verdict "$WORK/a/art")"
tar -C "$WORK/a" -cf "$T/hardlink.tar" art
refused "GNU tar's hard link member" "is a hard link" "$T/hardlink.tar"
tar --hard-dereference -C "$WORK/a" -cf "$T/hardlink-deref.tar" art
refused "with --hard-dereference, the copy is a member the verifier does not read" \
	'member "copy.safetensors" is neither header.json' "$T/hardlink-deref.tar"
rm "$WORK/a/art/copy.safetensors"
tar --hard-dereference -C "$WORK/a" -cf "$T/hardlink-deref.tar" art
check "without it the tar verifies" "$H0" "$(verdict "$T/hardlink-deref.tar")"

art
mv "$WORK/a/art/weights.safetensors" "$WORK/a/real.safetensors"
ln -s ../real.safetensors "$WORK/a/art/weights.safetensors"
d=$(verdict "$WORK/a/art")
check "a symlinked weight file: the directory is artifact_invalid" artifact_invalid \
	"$(echo "$d" | jq -r .code)"
tar -C "$WORK/a" -cf "$T/symlink.tar" art
refused "its tar, a symbolic link member" "is a symbolic link" "$T/symlink.tar"
tar -h -C "$WORK/a" -cf "$T/symlink-deref.tar" art
check "tar -h stores the file itself: the tar verifies" "$H0" "$(verdict "$T/symlink-deref.tar")"

art
mkfifo "$WORK/a/art/pipe"
tar -C "$WORK/a" -cf "$T/fifo.tar" art
refused "a FIFO member" "is a FIFO" "$T/fifo.tar"

art
truncate -s 1M "$WORK/a/art/hole"
tar --sparse --format=gnu -C "$WORK/a" -cf "$T/sparse-gnu.tar" art
refused "a GNU sparse member" "is a sparse file" "$T/sparse-gnu.tar"
tar --sparse --format=posix -C "$WORK/a" -cf "$T/sparse-pax.tar" art
refused "a pax sparse member" "sparse file (GNU.sparse." "$T/sparse-pax.tar"

art
mkdir "$WORK/a/art/sub"
cp "$CASES/round-00000/header.json" "$WORK/a/art/sub/"
tar -C "$WORK/a" -cf "$T/nested.tar" art
refused "a subdirectory" "nested deeper than one directory" "$T/nested.tar"

tar -C "$CASES" -cf "$T/two.tar" round-00000 round-00001
refused "two artifacts in one tar" "more than one top directory" "$T/two.tar"
tar -P -cf "$T/absolute.tar" "$CASES/round-00000"
refused "absolute names (tar -P)" "has an absolute name" "$T/absolute.tar"
# GNU tar strips ".." on its own; tarfile writes what it is told.
python3 - "$T/dotdot.tar" "$CASES/round-00000" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    t.add(sys.argv[2] + "/header.json", arcname="../header.json")
EOF
refused "a \"..\" component" 'has a ".." component' "$T/dotdot.tar"
python3 - "$T/dup.tar" "$CASES/round-00000" "$CASES/round-00001" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for d in sys.argv[2:]:
        t.add(d + "/header.json", arcname="header.json")
    t.add(sys.argv[2] + "/weights.safetensors", arcname="weights.safetensors")
EOF
refused "a member twice (tar -r appends)" 'member "header.json" appears twice' "$T/dup.tar"

# A genuine header.json and weights.safetensors, then a pax header with an
# empty size record and a notes.txt whose data is a second
# weights.safetensors with one byte changed. An empty size is 0 to
# tarfile, which reads the changed weights; GNU tar keeps the header's
# size and the verifier would hash the genuine ones.
smuggle() {
	python3 - "$1" "$2" "$CASES/round-00000" <<'EOF2'
import io, sys, tarfile
out, record, src = sys.argv[1], sys.argv[2].encode(), sys.argv[3]

def member(name, data, type=tarfile.REGTYPE):
    ti = tarfile.TarInfo(name)
    ti.type, ti.size, ti.mode, ti.mtime = type, len(data), 0o644, 1700000000
    pad = -len(data) % tarfile.BLOCKSIZE
    return ti.tobuf(tarfile.USTAR_FORMAT) + data + b"\0" * pad

header = open(src + "/header.json", "rb").read()
weights = open(src + "/weights.safetensors", "rb").read()
changed = weights[:-1] + bytes([weights[-1] ^ 1])
body = member("header.json", header) + member("weights.safetensors", weights)
if record:
    body += member("././@PaxHeader", record, tarfile.XHDTYPE)
body += member("notes.txt", member("weights.safetensors", changed))
body += b"\0" * (2 * tarfile.BLOCKSIZE)
body += b"\0" * (-len(body) % tarfile.RECORDSIZE)
open(out, "wb").write(body)
with tarfile.open(out) as t:
    got = t.extractfile("weights.safetensors").read()
sys.exit(0 if got == changed else 1)
EOF2
}
smuggle "$T/smuggle.tar" '8 size=
'
check "tarfile reads the changed weights from the smuggling tar" 0 "$?"
tar -xOf "$T/smuggle.tar" weights.safetensors 2>/dev/null | cmp -s - "$CASES/round-00000/weights.safetensors"
check "GNU tar reads the genuine ones" 0 "$?"
got=$("$CLI" "$T/smuggle.tar" 2>&1)
check "the smuggling tar: exit 1" 1 "$?"
case $got in
*"has an empty size record"*) ok "the smuggling tar: the message names the empty size record" ;;
*) not_ok "the smuggling tar: the message names the empty size record: $got" ;;
esac
refused "the smuggling tar" "has an empty size record" "$T/smuggle.tar"
# The same record with a length one too long, a NUL its last byte.
smuggle "$T/smuggle-long.tar" '9 size=
'
check "tarfile reads the changed weights with a record one byte long" 0 "$?"
refused "the smuggling tar, record one byte long" "has a malformed record" "$T/smuggle-long.tar"
# Without the pax header both readers see notes.txt: a member the
# verifier does not read.
smuggle "$T/smuggle-plain.tar" ''
check "without the pax header tarfile reads the genuine weights" 1 "$?"
refused "a member that holds an archive" 'member "notes.txt" is neither header.json' \
	"$T/smuggle-plain.tar"

# ustar, one directory: the entry at 0, header.json at 512 (data
# 1024-2047), weights.safetensors at 2048 (data 2560-2927), zeros at 3072.
good="$T/round-00000.ustar-dir.tar"
size=$(stat -c %s "$good")
gzip -c "$good" > "$T/gz.tar.gz"
refused "a compressed tar" "not a valid artifact tar" "$T/gz.tar.gz"
head -c 2560 "$good" > "$T/cut.tar"
refused "a tar cut inside a member" "bytes of data but the archive ends" "$T/cut.tar"
head -c 3072 "$good" > "$T/cut-end.tar"
refused "a tar cut before its end marker" "without its end marker" "$T/cut-end.tar"
{ cat "$good"; printf 'trailing garbage'; head -c $((512 - 16)) /dev/zero; } > "$T/garbage.tar"
refused "bytes after the end marker" "other than zero follow the end marker" "$T/garbage.tar"
cp "$good" "$T/bad-sum.tar"
printf 'X' | dd of="$T/bad-sum.tar" bs=1 seek=6 conv=notrunc 2>/dev/null
refused "a flipped header byte" "bad checksum" "$T/bad-sum.tar"
check "the good tar is still good" "$H0" "$(verdict "$good")"
check "and is $size bytes, a whole number of records" 0 $((size % 10240))

# The exit status says the same as for a directory.
"$CLI" -q "$good"
check "exit 0 for a verified tar" 0 "$?"
"$CLI" -q "$T/symlink.tar"
check "exit 1 for a refused tar" 1 "$?"

finish
