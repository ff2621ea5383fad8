#!/bin/sh
# What one verification may spend, whatever its headers say: an artifact
# whose safetensors header lists some 1.2 million empty tensors (about
# 80 MB of JSON), three such files in one artifact, and a header.json of
# about 16.5 MB are each refused artifact_invalid naming the bound they
# hit (max_tensors, max_job_memory), while the daemon's peak memory stays
# within two budgets and what it held is given back at once. Then the
# bounds from the configuration: a small max_tensors refuses an ordinary
# artifact with more tensors, and a small max_artifact_bytes a sparse
# artifact (and a tar) at once, without hashing a byte of it.
. "$top_srcdir/tests/integration/lib.sh"
need python3
need tar

SRC="$WORK/src"
mkdir -p "$SRC"
MIB=1048576
# The defaults (vd_limits.h), as the details name them.
MAX_TENSORS=32768
MAX_JOB_MEMORY=67108864
# The attack at full size; under valgrind a hundredth of it, against a
# budget of 1 MiB (the smallest allowed), which the smaller headers still
# overrun. The memory figures mean nothing there.
TENSORS=1200000
MANIFEST=218000
if [ "$SLOW" -gt 1 ]; then
	TENSORS=12000
	MANIFEST=2180
	MAX_JOB_MEMORY=$MIB
fi

# attack DIR CLAIM FILES TENSORS MANIFEST: an artifact claiming hash CLAIM
# whose FILES weight files (hard links to one: each is its own member)
# list TENSORS empty tensors each, and whose manifest has MANIFEST
# entries. Written outside the store, to be renamed into it whole.
attack() {
	python3 - "$@" <<'EOF'
import os, struct, sys

d, claim, files, tensors, manifest = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5])
os.makedirs(d)
entry = '"encoder.t%07d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
h = ("{" + ",".join(entry % i for i in range(tensors)) + "}").encode()
h += b" " * (-len(h) % 8)
names = ["w%d.safetensors" % i for i in range(files)]
with open(os.path.join(d, names[0]), "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
for n in names[1:]:
    os.link(os.path.join(d, names[0]), os.path.join(d, n))
m = '{"name":"encoder.t%07d","group":"encoder","dtype":"float32","shape":[0]}'
with open(os.path.join(d, "header.json"), "w") as f:
    f.write('{"schema_version":2,"content_hash":"%s","parent_hash":null,'
            '"wmcp_version":"wmcp-1.0.0","round_index":1,"config_hash":"%s",'
            '"param_groups":["encoder"],"tensor_manifest":[%s],"weight_files":[%s],'
            '"created_at":"2026-06-02T12:00:00Z","model_arch":null}'
            % (claim, "0" * 64, ",".join(m % i for i in range(manifest)),
               ",".join('"%s"' % n for n in names)))
EOF
}

hex64() { printf "%064d" 0 | tr 0 "$1"; }

# The copy at PATH (relative to the store) in GET /artifacts: it may claim
# no hash at all when its header.json is what was refused.
copy_field() {
	get /artifacts | jq -r --arg p "$1" --arg f "$2" \
	    '[.artifacts[].copies[] | select(.path == $p)][0][$f] // empty'
}
failed() { [ "$(copy_field "$1" state)" = failed ]; }

kib() { awk -v k="$2" '$1 == k ":" { print $2 }' "/proc/$1/status"; }
# Forget the peak so far, so that each case's is its own (Linux 4.0 on;
# without it the peak is the run's).
reset_peak() { echo 5 > "/proc/$DPID/clear_refs" 2>/dev/null; }

# enter NAME: rename the artifact into the store and wait for its verdict;
# then its detail must match the extended regular expression WANT.
enter() {
	local name=$1 want=$2 detail
	mv "$SRC/$name" "$STORE/$name"
	if ! wait_for $((30 * SLOW)) failed "$name" > /dev/null; then
		not_ok "$name is refused: its copy is $(copy_field "$name" state)"
		return
	fi
	detail=$(copy_field "$name" detail)
	check "$name: artifact_invalid" artifact_invalid "$(copy_field "$name" code)"
	if echo "$detail" | grep -Eq "^($want)\$"; then
		ok "$name: the detail names the bound ($detail)"
	else
		not_ok "$name: detail \"$detail\" does not match \"$want\""
	fi
}

# ---- the attack, at the default bounds ----------------------------------
TENSOR_BOUND="declares more than $MAX_TENSORS tensors \(max_tensors\)"
MEMORY_BOUND="needs more than $MAX_JOB_MEMORY bytes to parse \(max_job_memory\)"
attack "$SRC/one" "$(hex64 a)" 1 "$TENSORS" 0
attack "$SRC/three" "$(hex64 b)" 3 "$TENSORS" 0
attack "$SRC/manifest" "$(hex64 c)" 1 0 "$MANIFEST"
[ "$SLOW" -gt 1 ] && write_conf "max_job_memory = $MAX_JOB_MEMORY"
start_daemon
before=$(kib "$DPID" VmRSS)
# The memory figures are the daemon's own only without valgrind and
# without a sanitizer, whose allocator keeps what is freed in quarantine.
FIGURES=1
[ "$SLOW" -gt 1 ] && FIGURES=0
grep -Eq 'lib(a|t)san' "/proc/$DPID/maps" && FIGURES=0
# Twice the start, or 16 MiB more for a daemon that starts small: the
# state database and the threads' first allocations stay resident.
given_back=$((2 * before))
[ "$given_back" -lt $((before + 16384)) ] && given_back=$((before + 16384))
# The peak: one job's budget, the store scan reading the same header.json
# under a budget of its own, the header pages the parse touched, and
# slack; the unbounded parse took 0.9 to 2.7 GB.
peak_limit=$((before + (2 * MAX_JOB_MEMORY + 32 * MIB) / 1024))
for name in one three manifest; do
	reset_peak
	case $name in
	one | three) enter "$name" "w0\.safetensors ($TENSOR_BOUND|$MEMORY_BOUND)" ;;
	manifest) enter "$name" "header\.json ($TENSOR_BOUND|$MEMORY_BOUND)" ;;
	esac
	# Read as soon as the verdict is out: a job frees what it holds
	# before it reports, and the store's periodic malloc_trim is not to
	# be waited for.
	now=$(kib "$DPID" VmRSS)
	peak=$(kib "$DPID" VmHWM)
	echo "# $name: $(du -shl --apparent-size "$STORE/$name" | cut -f1) of files;" \
	    "VmRSS before ${before} kB, peak ${peak} kB, after ${now} kB"
	[ "$FIGURES" = 1 ] || continue
	if [ "$peak" -le "$peak_limit" ]; then
		ok "$name: the peak ($peak kB) stays within two budgets of the start"
	else
		not_ok "$name: the peak is $peak kB, above $peak_limit kB"
	fi
	if [ "$now" -le "$given_back" ]; then
		ok "$name: the memory is given back ($before kB before, $now kB after)"
	else
		not_ok "$name: VmRSS is $now kB after the job, $before kB before (at most $given_back)"
	fi
done
stop_daemon

# ---- bounds from the configuration ---------------------------------------
rm -rf "$STORE"/* "$STATE"/*
write_conf "max_tensors = 5" "max_artifact_bytes = $MIB"
"$MKART" --round 1 --seed 1 --tensors 8 --bytes 4096 "$STORE/eight" > "$WORK/h8"
"$MKART" --round 1 --seed 2 --tensors 4 --bytes 4096 "$STORE/four" > "$WORK/h4"
# Hashing it would read 256 MiB; the bound refuses it unread.
"$MKART" --round 1 --seed 3 --sparse --bytes $((256 * MIB)) "$STORE/sparse" > "$WORK/hs"
"$MKART" --round 1 --seed 4 --tensors 4 --bytes $((2 * MIB)) "$SRC/big" > "$WORK/ht"
tar --format=posix -C "$SRC" -cf "$STORE/big.tar" big
start_daemon
settled() {
	[ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ] &&
		[ "$(state_of "$(cat "$WORK/h4")")" = verified ]
}
wait_for $((20 * SLOW)) settled > /dev/null || not_ok "the store is verified"
field() { get "/artifact/$(cat "$WORK/$1")" | jq -r "$2"; }
check "an artifact within max_tensors verifies" "verified 4" "$(field h4 '"\(.state) \(.tensors)"')"
# Its header is read within the same bounds: the hash it claims is never
# indexed, so asking for it finds nothing to load, and its one copy is
# listed failed by path.
check "eight tensors against max_tensors = 5: nothing to load by its hash" 404 \
	"$(code GET "/artifact/$(cat "$WORK/h8")")"
check "... its copy refused" \
	"failed artifact_invalid header.json declares more than 5 tensors (max_tensors)" \
	"$(get /artifacts | jq -r '.artifacts[] | .copies[] | select(.path == "eight") |
		"\(.state) \(.code) \(.detail)"')"
check "a sparse 256 MiB artifact against max_artifact_bytes = 1 MiB: refused" \
	"failed artifact_invalid" "$(field hs '"\(.state) \(.code)"')"
detail=$(field hs .detail)
case $detail in
*"more than $MIB (max_artifact_bytes)") ok "its detail names the bound ($detail)" ;;
*) not_ok "its detail does not name max_artifact_bytes: $detail" ;;
esac
# Nothing of it was hashed: the bytes hashed are the one artifact that
# verified (its tensor bytes), and the sparse one failed in moments.
check "nothing of the refused artifacts was hashed" 4096 "$(metric bytes_hashed_total)"
ms=$(field hs '.copies[0].duration_ms')
if awk -v t="$ms" -v l="$((1000 * SLOW))" 'BEGIN { exit !(t < l) }'; then
	ok "the sparse artifact is refused at once ($ms ms)"
else
	not_ok "the sparse artifact took $ms ms to refuse"
fi
check "a tar whose members hold 2 MiB: refused by the same bound" \
	"big.tar tar failed artifact_invalid" \
	"$(field ht '.copies[0] | "\(.path) \(.kind) \(.state) \(.code)"')"
check "naming it" 1 "$(field ht '[.detail | select(test("\\(max_artifact_bytes\\)$"))] | length')"

finish
