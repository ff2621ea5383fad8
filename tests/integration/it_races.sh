#!/bin/sh
# Odd files and races in the store: symbolic and hard links, FIFOs,
# devices, unreadable files and directories, a weight file truncated or
# replaced while it is hashed, and the store root vanishing and coming
# back. The daemon must give each a clear verdict, never hang or crash,
# and keep answering throughout.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/integration/lib.sh"

SRC="$WORK/src"
mkdir -p "$SRC"
ROOT=0
[ "$(id -u)" = 0 ] && ROOT=1

# mk NAME SEED [mkartifact args...]: an artifact outside the store; prints its hash.
mk() {
	local name=$1 seed=$2; shift 2
	"$MKART" --round 1 --seed "$seed" --bytes 4096 --tensors 2 "$@" "$SRC/$name"
}
# The per-directory view: copies are listed by path, headerless ones too.
copy_field() {
	get /artifacts | jq -r --arg p "$1" --arg f "$2" \
	    '[.artifacts[].copies[] | select(.path == $p)][0][$f] // empty'
}
copy_state() { copy_field "$1" state; }
listed() { get /artifacts | jq --arg p "$1" '[.artifacts[].copies[] | select(.path == $p)] | length'; }
is_copy() { [ "$(copy_state "$1")" = "$2" ]; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
alive() { kill -0 "$DPID" 2>/dev/null && [ "$(code GET /healthz --max-time 2)" = 200 ]; }
# whole_scans_after N: wait, bounded, until N more scans of the whole store
# (rescan_interval = 1) have begun: all but the last of them are done.
whole_scans() { metric 'store_scans_total{scope="whole"}'; }
whole_scans_after() {
	local n
	n=$(( $(whole_scans) + $1 ))
	at_least_whole() { [ "$(whole_scans)" -ge "$1" ]; }
	wait_for $((10 * $1 * SLOW)) at_least_whole "$n" > /dev/null ||
		not_ok "the store is rescanned: $(whole_scans) whole scans begun, not $n"
}
healthz_fast() {
	local t
	t=$(curl -s -o /dev/null --max-time 5 -w '%{http_code} %{time_total}' "$(url /healthz)")
	[ "${t%% *}" = 200 ] && awk -v t="${t#* }" -v s="$SLOW" 'BEGIN { exit !(t < s) }'
}

# expect_failed PATH CODE DESC: the directory ends failed with CODE.
expect_failed() {
	if wait_for $((10 * SLOW)) is_copy "$1" failed > /dev/null; then
		ok "$3: failed"
	else
		not_ok "$3: failed (state '$(copy_state "$1")')"
	fi
	check "$3: with $2" "$2" "$(copy_field "$1" code)"
}

# ---- odd files --------------------------------------------------------
H_GOOD=$(mk good 1)
cp -a "$SRC/good" "$STORE/good"

# A weight file that is a symbolic link, to bytes that would verify.
H_SYM=$(mk sym 2)
mkdir "$STORE/sym"
cp "$SRC/sym/header.json" "$STORE/sym/"
ln -s "$SRC/sym/weights.safetensors" "$STORE/sym/weights.safetensors"

# A weight file hard-linked to a file outside the store.
H_HL=$(mk hl 3)
mkdir "$STORE/hl"
cp "$SRC/hl/header.json" "$STORE/hl/"
ln "$SRC/hl/weights.safetensors" "$STORE/hl/weights.safetensors"

# FIFOs: an open() without O_NONBLOCK would wait for a writer forever.
H_FIFO=$(mk fifo-w 4)
mkdir "$STORE/fifo-w"
cp "$SRC/fifo-w/header.json" "$STORE/fifo-w/"
mkfifo "$STORE/fifo-w/weights.safetensors"
mk fifo-h 5 > /dev/null
mkdir "$STORE/fifo-h"
cp "$SRC/fifo-h/weights.safetensors" "$STORE/fifo-h/"
mkfifo "$STORE/fifo-h/header.json"
mkdir -p "$STORE/run-fifo"
mkfifo "$STORE/run-fifo/ledger.jsonl"
H_RUNF=$(mk run-fifo-art 6)
cp -a "$SRC/run-fifo-art" "$STORE/run-fifo/round-00001"

# Devices: endless bytes behind a symbolic link, and a real device node.
H_ZERO=$(mk zero-w 7)
mkdir "$STORE/zero-w"
cp "$SRC/zero-w/header.json" "$STORE/zero-w/"
ln -s /dev/zero "$STORE/zero-w/weights.safetensors"
mk zero-h 8 > /dev/null
mkdir "$STORE/zero-h"
cp "$SRC/zero-h/weights.safetensors" "$STORE/zero-h/"
ln -s /dev/zero "$STORE/zero-h/header.json"
if [ "$ROOT" = 1 ]; then
	H_CHR=$(mk chr-w 9)
	mkdir "$STORE/chr-w"
	cp "$SRC/chr-w/header.json" "$STORE/chr-w/"
	mknod "$STORE/chr-w/weights.safetensors" c 1 5
	mk chr-h 10 > /dev/null
	mkdir "$STORE/chr-h"
	cp "$SRC/chr-h/weights.safetensors" "$STORE/chr-h/"
	mknod "$STORE/chr-h/header.json" c 1 5
fi

# Directory symbolic links: to an artifact outside, to a run outside,
# and back to the store root itself.
H_OUT=$(mk outside 11)
mkdir -p "$SRC/outrun"
H_OUTRUN=$(mk outrun/round-00001 12)
ln -s "$SRC/outside" "$STORE/linked"
ln -s "$SRC/outrun" "$STORE/linkrun"
ln -s . "$STORE/loop"

# Verified first, made unreadable to the daemon later.
H_NOPERM=$(mk noperm 13)
cp -a "$SRC/noperm" "$STORE/noperm"
H_URDIR=$(mk urdir 14)
cp -a "$SRC/urdir" "$STORE/urdir"

write_conf "rescan_interval = 1" "workers = 2"
start_daemon

if wait_for $((10 * SLOW)) is_state "$H_GOOD" verified > /dev/null; then
	ok "a plain artifact next to the odd ones is verified"
else
	not_ok "a plain artifact next to the odd ones is verified (state '$(state_of "$H_GOOD")')"
fi

expect_failed sym artifact_invalid "a weight file that is a symbolic link"
case $(copy_field sym detail) in
*"symbolic link"*) ok "the detail says it is a symbolic link" ;;
*) not_ok "the detail says it is a symbolic link: $(copy_field sym detail)" ;;
esac

if wait_for $((10 * SLOW)) is_state "$H_HL" verified > /dev/null; then
	ok "a weight file hard-linked from outside the store, bytes intact, is verified"
else
	not_ok "a weight file hard-linked from outside the store, bytes intact, is verified (state '$(state_of "$H_HL")')"
fi

expect_failed fifo-w artifact_invalid "a FIFO as weight file"
expect_failed fifo-h artifact_invalid "a FIFO as header.json"
check "a FIFO header.json claims no hash" null \
	"$(get /artifacts | jq -c '[.artifacts[] | select(any(.copies[]; .path == "fifo-h"))][0].content_hash')"
if wait_for $((10 * SLOW)) is_state "$H_RUNF" verified > /dev/null; then
	ok "an artifact beside a FIFO ledger.jsonl is verified"
else
	not_ok "an artifact beside a FIFO ledger.jsonl is verified (state '$(state_of "$H_RUNF")')"
fi
check "GET /chain answers with a FIFO ledger in the store" 200 "$(code GET /chain --max-time 5)"

expect_failed zero-w artifact_invalid "a weight file linked to /dev/zero"
expect_failed zero-h artifact_invalid "a header.json linked to /dev/zero"
if [ "$ROOT" = 1 ]; then
	expect_failed chr-w artifact_invalid "a character device as weight file"
	expect_failed chr-h artifact_invalid "a character device as header.json"
	case $(copy_field chr-w detail) in
	*"not a regular file"*) ok "the detail says it is not a regular file" ;;
	*) not_ok "the detail says it is not a regular file: $(copy_field chr-w detail)" ;;
	esac
else
	echo "# not root: no device node made"
fi

check "a directory symlink to an artifact is not followed" 0 "$(listed linked)"
check "the artifact behind it is unknown" 404 "$(code GET "/artifact/$H_OUT")"
check "a directory symlink to a run is not followed" 404 "$(code GET "/artifact/$H_OUTRUN")"
check "nor listed under it" 0 "$(listed linkrun/round-00001)"
check "a symlink to the store root adds nothing" 0 "$(get /artifacts | jq '[.artifacts[].copies[] | select(.path | startswith("loop"))] | length')"

if healthz_fast; then ok "with all of these in the store, /healthz answers in under 1 s"; else not_ok "with all of these in the store, /healthz answers in under 1 s"; fi
# The waits above were for some of the directories only; the others
# (noperm, urdir) may still be queued behind them on a slow machine.
in_flight() { get /artifacts | jq '[.artifacts[] | select(.state == "pending" or .state == "verifying")] | length'; }
none_in_flight() { [ "$(in_flight)" = 0 ]; }
wait_for $((10 * SLOW)) none_in_flight > /dev/null
check "nothing is left verifying" 0 "$(in_flight)"

# The hasher is not wedged: a new artifact is verified at once.
H_LATE=$(mk late 15)
mv "$SRC/late" "$STORE/late"
if wait_for $((5 * SLOW)) is_state "$H_LATE" verified > /dev/null; then
	ok "an artifact added afterwards is verified"
else
	not_ok "an artifact added afterwards is verified (state '$(state_of "$H_LATE")')"
fi

# The outside file changed through its other link: inotify on the store
# sees nothing, the periodic rescan sees the new identity.
w="$SRC/hl/weights.safetensors"
orig=$(od -An -tx1 -j 300 -N 1 "$w" | tr -d ' ')
printf "\\$(printf '%03o' $(( (0x$orig + 1) % 256 )))" | dd of="$w" bs=1 seek=300 conv=notrunc 2>/dev/null
if t=$(wait_for $((5 * SLOW)) is_state "$H_HL" failed); then
	ok "a change through the outside link is found by the rescan ($t s)"
else
	not_ok "a change through the outside link is found by the rescan (state '$(state_of "$H_HL")')"
fi
check "with checkpoint_integrity" checkpoint_integrity "$(get "/artifact/$H_HL" | jq -r .code)"

if [ "$ROOT" = 1 ]; then
	wait_for $((10 * SLOW)) is_state "$H_NOPERM" verified > /dev/null
	wait_for $((10 * SLOW)) is_state "$H_URDIR" verified > /dev/null
	check "before: the files are verified" "verified verified" "$(state_of "$H_NOPERM") $(state_of "$H_URDIR")"

	chmod 000 "$STORE/noperm/weights.safetensors"
	expect_failed noperm io_error "a weight file the daemon cannot read"
	case $(copy_field noperm detail) in
	*"ermission denied"*) ok "the detail names the permission" ;;
	*) not_ok "the detail names the permission: $(copy_field noperm detail)" ;;
	esac

	chmod 000 "$STORE/urdir"
	unverified() { ! is_state "$H_URDIR" verified; }
	if wait_for $((5 * SLOW)) unverified > /dev/null; then
		ok "an artifact directory the daemon cannot read is no longer verified"
	else
		not_ok "an artifact directory the daemon cannot read is no longer verified"
	fi
	unreadable_logged() { grep 'urdir' "$LOG" | grep -q -i -E 'permission denied|unreadable|cannot (open|read)'; }
	wait_for $((5 * SLOW)) unreadable_logged > /dev/null
	if unreadable_logged; then
		ok "the log says the directory cannot be read"
	else
		not_ok "the log says the directory cannot be read; it says: $(grep 'urdir' "$LOG" | grep -v -E 'GET|POST' | tail -n 3 | tr '\n' '|')"
	fi
	# Rescans that find it still unreadable, one of them whole and done.
	whole_scans_after 2
	if grep -q 'artifact directory urdir is gone' "$LOG"; then
		not_ok "an unreadable directory is not reported as gone"
	else
		ok "an unreadable directory is not reported as gone"
	fi
	chmod 755 "$STORE/urdir"
	if wait_for $((5 * SLOW)) is_state "$H_URDIR" verified > /dev/null; then
		ok "readable again, it is verified again"
	else
		not_ok "readable again, it is verified again (state '$(state_of "$H_URDIR")')"
	fi
else
	echo "# not root: the daemon runs as this user and unreadable files are not tested"
fi

# ---- a weight file truncated while it is hashed -----------------------
# 2 GiB of holes: cheap on disk, seconds of SHA-256.
# Large enough to still be hashing when the race is run; under valgrind
# hashing is ~100 times slower, so far fewer bytes do.
big_bytes=$((2 << 30))
[ "$SLOW" -gt 1 ] && big_bytes=$((128 << 20))
H_BIG=$("$MKART" --round 1 --sparse --bytes "$big_bytes" "$SRC/big")
busy() { [ "$(metric workers_busy)" -ge 1 ]; }
settled() { ! busy && [ "$(metric queue_depth)" = 0 ]; }
mkdir -p "$WORK/stage"
cp -a --sparse=always "$SRC/big" "$WORK/stage/big-a"
# Nothing else hashing: "busy" below must mean big-a's hash has started,
# and hashing_bytes_total going up that it has read some of the file
# (counted as each slice of hashing ends): the file is open, and its size
# known, when it is cut or replaced below.
hashing() { busy && [ "$(metric hashing_bytes_total)" -gt "$1" ]; }
wait_for $((30 * SLOW)) settled > /dev/null || not_ok "the queue drains before big-a"
before=$(metric verifications_total)
bytes=$(metric hashing_bytes_total)
mv "$WORK/stage/big-a" "$STORE/big-a"
if wait_for $((10 * SLOW)) hashing "$bytes" > /dev/null; then
	truncate -s 1048576 "$STORE/big-a/weights.safetensors"
	if wait_for $((60 * SLOW)) is_copy big-a failed > /dev/null; then
		ok "a weight file truncated while hashed: the artifact ends failed"
	else
		not_ok "a weight file truncated while hashed: the artifact ends failed (state '$(copy_state big-a)')"
	fi
	check "with checkpoint_integrity" checkpoint_integrity "$(copy_field big-a code)"
	check "the daemon is still running" 0 "$(kill -0 "$DPID" 2>/dev/null; echo $?)"
	check "and answers /healthz" 200 "$(code GET /healthz --max-time 5)"
	# Read through a mapping, the fault names no file; read with pread
	# (a page cache in small pages), the file is named.
	if grep -Eq 'verification of big-a failed: checkpoint_integrity: (weights\.safetensors: )?a weight file shrank while it was being read' "$LOG"; then
		ok "the hash that hit the truncation says a weight file shrank"
	else
		not_ok "the hash that hit the truncation says a weight file shrank (did it finish first?)"
	fi
	n=$(( $(metric verifications_total) - before ))
	if [ "$n" -ge 2 ]; then
		ok "it was verified again after the interrupted hash ($n runs)"
	else
		not_ok "it was verified again after the interrupted hash ($n runs)"
	fi
	# A rescan that saw the file mid-truncation may verify it once more
	# after the queue first drains: wait for the queue to drain with the
	# copy failed, then check that it stays so.
	settled_failed() { settled && [ "$(copy_state big-a)" = failed ]; }
	wait_for $((30 * SLOW)) settled_failed > /dev/null || not_ok "the queue drains, the copy failed"
	# A whole rescan begun after that, and done: whatever it asks for is
	# queued by then, and drains.
	whole_scans_after 2
	wait_for $((30 * SLOW)) settled > /dev/null || not_ok "the queue drains again"
	check "it stays failed" failed "$(copy_state big-a)"
else
	not_ok "the 2 GiB artifact is being hashed"
fi
rm -rf "$STORE/big-a"
# big-b below is a copy of the same artifact: until big-a's failed copy is
# forgotten, the hash's state (and its failed code) would be big-a's.
forgotten() { [ "$(listed "$1")" = 0 ]; }
wait_for $((10 * SLOW)) forgotten big-a > /dev/null || not_ok "the removed big-a is forgotten"

# ---- a weight file replaced by rename while it is hashed --------------
# Same size, one byte different: the hash in progress reads the old
# inode; what is on disk afterwards is something else.
cp -a --sparse=always "$SRC/big" "$WORK/stage/big-b"
cp --sparse=always "$SRC/big/weights.safetensors" "$WORK/w-new"
size=$(stat -c %s "$WORK/w-new")
printf '\001' | dd of="$WORK/w-new" bs=1 seek=$((size - 1)) conv=notrunc 2>/dev/null
chmod a+r "$WORK/w-new"
wait_for $((30 * SLOW)) settled > /dev/null || not_ok "the queue drains before big-b"
before=$(metric verifications_total)
bytes=$(metric hashing_bytes_total)
mv "$WORK/stage/big-b" "$STORE/big-b"
if wait_for $((10 * SLOW)) hashing "$bytes" > /dev/null; then
	mv "$WORK/w-new" "$STORE/big-b/weights.safetensors"
	seen=" "
	end=$(( $(date +%s) + 90 * SLOW ))
	while [ "$(date +%s)" -lt "$end" ]; do
		s=$(state_of "$H_BIG")
		case $seen in *" $s "*) ;; *) seen="$seen$s " ;; esac
		[ "$s" = failed ] && break
		sleep 0.1
	done
	check "a weight file replaced while hashed: the artifact ends failed" failed "$(state_of "$H_BIG")"
	check "with checkpoint_integrity" checkpoint_integrity "$(copy_field big-b code)"
	case $seen in
	*" verified "*) not_ok "it never shows verified on the way (states seen:$seen)" ;;
	*) ok "it never shows verified on the way (states seen:$seen)" ;;
	esac
	n=$(( $(metric verifications_total) - before ))
	if [ "$n" -ge 2 ]; then
		ok "the run that read the old bytes was followed by another ($n runs)"
	else
		not_ok "the run that read the old bytes was followed by another ($n runs)"
	fi
else
	not_ok "the 2 GiB artifact is being hashed"
fi
rm -rf "$STORE/big-b"
check "after the races the daemon still answers" 200 "$(code GET /healthz --max-time 5)"
stop_daemon

# ---- the store root removed and restored ------------------------------
[ "$ROOT" = 1 ] && chmod 755 "$STORE/urdir" 2>/dev/null
rm -rf "$STORE"
mkdir -p "$STORE"
cp -a "$SRC/good" "$STORE/good"
cp -a "$SRC/noperm" "$STORE/other"
chmod a+r "$STORE/other/weights.safetensors"
H_OTHER=$H_NOPERM
start_daemon
wait_for $((10 * SLOW)) is_state "$H_GOOD" verified > /dev/null
wait_for $((10 * SLOW)) is_state "$H_OTHER" verified > /dev/null
check "before: both verified" "verified verified" "$(state_of "$H_GOOD") $(state_of "$H_OTHER")"

mv "$STORE" "$WORK/away"
gone_logged() { grep -q "cannot open the store $STORE" "$LOG"; }
if wait_for $((5 * SLOW)) gone_logged > /dev/null; then
	ok "the daemon logs that the store is gone"
else
	not_ok "the daemon logs that the store is gone"
fi
# Rescans go on meanwhile (rescan_interval = 1): two of them done.
whole_scans_after 3
check "it keeps serving its last known state" "verified verified" "$(state_of "$H_GOOD") $(state_of "$H_OTHER")"
check "and answers /healthz" 200 "$(code GET /healthz)"
check "it logs the loss once, not at every rescan" 1 "$(grep -c "cannot open the store $STORE" "$LOG")"

# Restored as a fresh copy: new identities, so everything is hashed again.
before=$(metric verifications_total)
cp -a "$WORK/away" "$WORK/restored"
mv "$WORK/restored" "$STORE"
back_logged() { grep -q "the store $STORE is back" "$LOG"; }
if wait_for $((5 * SLOW)) back_logged > /dev/null; then
	ok "the daemon logs that the store is back"
else
	not_ok "the daemon logs that the store is back"
fi
rehashed() { [ "$(( $(metric verifications_total) - before ))" -ge 2 ]; }
if wait_for $((10 * SLOW)) rehashed > /dev/null; then
	ok "the restored artifacts are verified again"
else
	not_ok "the restored artifacts are verified again ($(( $(metric verifications_total) - before )) runs)"
fi
check "and end verified" "verified verified" "$(state_of "$H_GOOD") $(state_of "$H_OTHER")"
H_NEW=$(mk new 16)
mv "$SRC/new" "$STORE/new"
if wait_for $((5 * SLOW)) is_state "$H_NEW" verified > /dev/null; then
	ok "a new artifact in the restored store is verified"
else
	not_ok "a new artifact in the restored store is verified"
fi

finish
