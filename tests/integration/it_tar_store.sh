#!/bin/sh
# Tar artifacts in the store: a run whose round 1 is a tar between two
# directories, verified and trusted through the tar; one hash as a
# directory and as a tar, two copies; a tar renamed into place (from
# "x.tar.tmp" and from ".x.tar"), touched, tampered with, removed; and
# what is not a tar artifact, or not a good one: a ".." member, a hidden
# ".x.tar", a symbolic link named "y.tar".
. "$top_srcdir/tests/integration/lib.sh"
need tar
need python3

SRC="$WORK/src"
RUN="$STORE/run-a"
OTHER="$STORE/run-b"
mkdir -p "$SRC" "$RUN" "$OTHER"

# mk NAME ROUND SEED [mkartifact args...]: an artifact outside the store.
mk() {
	local name=$1 round=$2 seed=$3; shift 3
	"$MKART" --round "$round" --seed "$seed" --bytes 65536 --tensors 4 "$@" "$SRC/$name"
}
# pack DIR TAR: a POSIX tar of DIR, its files in one directory.
pack() {
	tar --format=posix -C "$(dirname "$1")" -cf "$2" "$(basename "$1")" && chmod a+r "$2"
}
# The offset of a member's data in a tar.
data_offset() {
	python3 -c 'import sys, tarfile; print(tarfile.open(sys.argv[1]).getmember(sys.argv[2]).offset_data)' "$1" "$2"
}
copy_field() {
	get /artifacts | jq -r --arg p "$1" --arg f "$2" \
	    '[.artifacts[].copies[] | select(.path == $p)][0][$f] // empty'
}
listed() { get /artifacts | jq --arg p "$1" '[.artifacts[].copies[] | select(.path == $p)] | length'; }
field() { get "/artifact/$1" | jq -r "$2"; }
copies() { field "$1" '[.copies[] | "\(.path) \(.kind) \(.state)"] | join(", ")'; }
run_head() { get /chain | jq -r '.runs[] | select(.run == "run-a") | .committed_head.content_hash // empty'; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
is_copy() { [ "$(copy_field "$1" state)" = "$2" ]; }
settled() {
	[ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]
}

# run-a: round 0 a directory, round 1 a tar, round 2 a directory; the
# ledger commits rounds 1 and 2.
H0=$("$MKART" --round 0 --seed 10 --bytes 65536 --tensors 4 "$RUN/round-00000")
H1=$(mk round-00001 1 11 --parent "$H0" --ledger "$RUN/ledger.jsonl")
pack "$SRC/round-00001" "$RUN/round-00001.tar"
H2=$("$MKART" --round 2 --seed 12 --bytes 65536 --tensors 4 --parent "$H1" \
	--ledger "$RUN/ledger.jsonl" "$RUN/round-00002")
# run-b: a lone tar, and one with a ".." member.
HS=$(mk solo 0 20)
pack "$SRC/solo" "$OTHER/solo.tar"
python3 - "$OTHER/dotdot.tar" "$SRC/solo" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    t.add(sys.argv[2] + "/header.json", arcname="art/header.json")
    t.add(sys.argv[2] + "/weights.safetensors", arcname="art/../weights.safetensors")
EOF
# Not artifacts: a hidden tar and a symbolic link named like one.
HH=$(mk hidden 0 30)
pack "$SRC/hidden" "$RUN/.hidden.tar"
HY=$(mk linked 0 31)
pack "$SRC/linked" "$SRC/linked.tar"
ln -s "$SRC/linked.tar" "$RUN/y.tar"

write_conf "rescan_interval = 3600" "workers = 2"   # only inotify sees changes in time
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store settled"

# --- a run through a tar -----------------------------------------------------
check "round 0, a directory, is verified" "run-a/round-00000 dir verified" "$(copies "$H0")"
check "round 1, a tar, is verified" "run-a/round-00001.tar tar verified" "$(copies "$H1")"
check "round 2, a directory, is verified" "run-a/round-00002 dir verified" "$(copies "$H2")"
check "round 1 (the tar) is committed and trusted" "true true true" \
	"$(field "$H1" '"\(.commitment.matches) \(.trusted) \(.copies[0].trusted)"')"
check "round 2's chain runs intact through the tar to round 0" "intact 3 $H0 true" \
	"$(field "$H2" '"\(.chain.status) \(.chain.length) \(.chain.root) \(.trusted)"')"
check "the run's committed head is round 2" "$H2" "$(run_head)"
check "the tar's header is read from inside it" "1 $H0" \
	"$(field "$H1" '"\(.header.round_index) \(.header.parent_hash)"')"

# --- what is not a tar artifact, or not a good one --------------------------
check "a tar with a \"..\" member is a tar copy" tar "$(copy_field run-b/dotdot.tar kind)"
check "that fails with artifact_invalid" "failed artifact_invalid" \
	"$(copy_field run-b/dotdot.tar state) $(copy_field run-b/dotdot.tar code)"
case $(copy_field run-b/dotdot.tar detail) in
*'".." component'*) ok "its detail names the \"..\" component" ;;
*) not_ok "its detail names the \"..\" component: $(copy_field run-b/dotdot.tar detail)" ;;
esac
check "a hidden .x.tar is ignored" "404 0" "$(code GET "/artifact/$HH") $(listed run-a/.hidden.tar)"
check "a symbolic link named y.tar is not followed" "404 0" "$(code GET "/artifact/$HY") $(listed run-a/y.tar)"
check "the lone tar is verified" "run-b/solo.tar tar verified" "$(copies "$HS")"

# --- one hash as a directory and as a tar ------------------------------------
cp -r "$SRC/round-00001" "$RUN/round-00001"
readable "$RUN/round-00001"
two() { [ "$(copies "$H1")" = "run-a/round-00001 dir verified, run-a/round-00001.tar tar verified" ]; }
if wait_for $((3 * SLOW)) two > /dev/null; then
	ok "a directory beside the tar of the same hash: two copies, each with its kind"
else
	not_ok "a directory beside the tar of the same hash: two copies ($(copies "$H1"))"
fi
check "both copies are trusted" "true true" "$(field "$H1" '[.copies[].trusted] | map(tostring) | join(" ")')"
check "GET /artifacts lists both with their kinds" "dir tar" \
	"$(get /artifacts | jq -r --arg h "$H1" '.artifacts[] | select(.content_hash == $h) | [.copies[].kind] | join(" ")')"

# --- tars renamed into place ------------------------------------------------
H3=$(mk round-00003 3 13 --parent "$H2" --ledger "$RUN/ledger.jsonl")
wait_for $((3 * SLOW)) settled > /dev/null
pack "$SRC/round-00003" "$RUN/round-00003.tar.tmp"
# Not an artifact once a scan has read run-a with it there: the daemon
# is told of it, and touching run-a makes it read the whole directory.
noted_tmp() { grep -q 'change in run-a/round-00003.tar.tmp' "$LOG"; }
wait_for $((5 * SLOW)) noted_tmp > /dev/null || not_ok "the daemon is told of x.tar.tmp"
scanned_through "$RUN"
check "a tar being written (x.tar.tmp) is not an artifact" "404 0" "$(code GET "/artifact/$H3") $(listed run-a/round-00003.tar.tmp)"
mv "$RUN/round-00003.tar.tmp" "$RUN/round-00003.tar"
if t=$(wait_for $((10 * SLOW)) is_state "$H3" verified); then
	ok "a tar renamed from x.tar.tmp is verified by the watcher ($t s)"
else
	not_ok "a tar renamed from x.tar.tmp is verified by the watcher"
fi
trusted3() { [ "$(run_head)" = "$H3" ]; }
wait_for $((10 * SLOW)) trusted3 > /dev/null
check "the committed head moves to the renamed tar" "$H3 true 4" \
	"$(run_head) $(field "$H3" '"\(.trusted) \(.chain.length)"')"

H4=$(mk round-00004 4 14 --parent "$H3")
pack "$SRC/round-00004" "$RUN/.round-00004.tar"
# A hidden name raises no change: a scan of run-a, asked for by touching
# it, reads it and passes it by.
scanned_through "$RUN"
check "a hidden tar being written is not an artifact" "404 0" "$(code GET "/artifact/$H4") $(listed run-a/.round-00004.tar)"
mv "$RUN/.round-00004.tar" "$RUN/round-00004.tar"
if t=$(wait_for $((10 * SLOW)) is_state "$H4" verified); then
	ok "a tar renamed from .x.tar is verified by the watcher ($t s)"
else
	not_ok "a tar renamed from .x.tar is verified by the watcher"
fi

# --- a tar touched, then tampered with, in place ---------------------------
# The first verification with a hasher to spare takes chunk digests; a
# later change of identity with the same bytes is re-checked against them.
before=$(metric verifications_total)
more() { [ "$(metric verifications_total)" -gt "$1" ] && settled; }
touch "$OTHER/solo.tar"
wait_for $((10 * SLOW)) more "$before" > /dev/null || not_ok "a touched tar is verified again"
before=$(metric verifications_total)
touch "$OTHER/solo.tar"
if wait_for $((10 * SLOW)) more "$before" > /dev/null && is_state "$HS" verified; then
	ok "a touched tar is verified again and stays verified"
else
	not_ok "a touched tar is verified again and stays verified ($(state_of "$HS"))"
fi
if grep -q 're-checked run-b/solo.tar chunk by chunk: unchanged' "$LOG"; then
	ok "the tar is re-checked chunk by chunk over its members"
else
	not_ok "the tar is re-checked chunk by chunk over its members"
fi

w=$(data_offset "$OTHER/solo.tar" solo/weights.safetensors)
wsize=$(stat -c %s "$SRC/solo/weights.safetensors")
at=$((w + wsize - 1))
orig=$(od -An -tx1 -j "$at" -N 1 "$OTHER/solo.tar" | tr -d ' ')
printf '\377' | dd of="$OTHER/solo.tar" bs=1 seek="$at" conv=notrunc 2>/dev/null
[ "$orig" = ff ] && printf '\376' | dd of="$OTHER/solo.tar" bs=1 seek="$at" conv=notrunc 2>/dev/null
if t=$(wait_for $((10 * SLOW)) is_state "$HS" failed); then
	ok "one weight byte changed inside the tar: failed by the watcher ($t s)"
else
	not_ok "one weight byte changed inside the tar: failed by the watcher"
fi
check "with checkpoint_integrity" checkpoint_integrity "$(field "$HS" .code)"
case $(field "$HS" '.copies[0].changed // ""') in
"weights.safetensors bytes "*" changed") ok "the re-check names the changed range of the member" ;;
*) not_ok "the re-check names the changed range of the member: $(field "$HS" .copies[0].changed)" ;;
esac
printf "\\$(printf '%03o' "0x$orig")" | dd of="$OTHER/solo.tar" bs=1 seek="$at" conv=notrunc 2>/dev/null
if wait_for $((10 * SLOW)) is_state "$HS" verified > /dev/null; then
	ok "the byte restored, the tar verifies again"
else
	not_ok "the byte restored, the tar verifies again"
fi

# --- tars removed --------------------------------------------------------------
rm "$OTHER/solo.tar"
gone() { [ "$(code GET "/artifact/$HS")" = 404 ]; }
if wait_for $((10 * SLOW)) gone > /dev/null; then ok "a removed tar is forgotten"; else not_ok "a removed tar is forgotten"; fi
check "its removal is logged" 1 "$(grep -c 'tar artifact run-b/solo.tar is gone' "$LOG")"
rm "$RUN/round-00001.tar"
one() { [ "$(copies "$H1")" = "run-a/round-00001 dir verified" ]; }
if wait_for $((10 * SLOW)) one > /dev/null; then
	ok "removing the tar of a hash removes that copy alone"
else
	not_ok "removing the tar of a hash removes that copy alone ($(copies "$H1"))"
fi
check "the chain through round 1 stays intact" "intact true" "$(field "$H3" '"\(.chain.status) \(.trusted)"')"
check "the daemon is still healthy" 200 "$(code GET /healthz)"

# --- POST /verify by path, and a restart -------------------------------------
# Named at once, before a scan may have seen it: adopted as a tar either way.
HA=$(mk adopt 0 40)
pack "$SRC/adopt" "$SRC/adopt.tar"
mv "$SRC/adopt.tar" "$OTHER/adopt.tar"
check "POST /verify names a tar by path" "ok tar verified" \
	"$(post '/verify?wait=10' "{\"path\":\"run-b/adopt.tar\",\"expected_hash\":\"$HA\"}" |
	jq -r '"\(.verdict) \(.copies[0].kind) \(.copies[0].state)"')"
wait_for $((3 * SLOW)) settled > /dev/null
stop_daemon
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store settled after a restart"
if grep -q 'run-a/round-00003.tar unchanged since its stored verdict: not hashed again' "$LOG"; then
	ok "after a restart, an unchanged tar keeps its stored verdict"
else
	not_ok "after a restart, an unchanged tar keeps its stored verdict"
fi
check "and is still the trusted head" "$H3 verified" "$(run_head) $(state_of "$H3")"

finish
