#!/bin/sh
# The journal's native protocol, read back with the journal's own tools:
# a daemon whose stderr is the journal (JOURNAL_STREAM names it) sends
# its entries to /run/systemd/journal/socket, and `journalctl
# CONTENT_HASH=<hex>` finds an artifact's verdicts with their CODE,
# STORE_PATH and RUN, a failed one too. When the socket is replaced (the
# journal restarted, the socket file created anew) the next entries reach
# the new one; while it is gone they go to stderr, and come back to the
# journal when it returns.
#
# The journal here is a small receiver in a mount namespace of the test's
# own, on a tmpfs over /run/systemd/journal: it keeps each datagram in the
# journal export format (the native protocol encodes fields the same way),
# which systemd-journal-remote turns into a journal file for journalctl.
# The test has a network namespace of its own too, where the journal's
# queue is as long as systemd makes it (net.unix.max_dgram_qlen = 512)
# whatever the host's is: a burst of verdicts then waits in the queue
# instead of going to stderr.
JDIR=/run/systemd/journal
REMOTE=/lib/systemd/systemd-journal-remote

if [ "${VD_JOURNAL_NS:-0}" != 1 ]; then
	skip() { echo "SKIP: $*"; exit 77; }
	[ "$(id -u)" = 0 ] || skip "a mount namespace needs root"
	for t in unshare mount ip python3 journalctl; do
		command -v "$t" > /dev/null 2>&1 || skip "$t is not installed"
	done
	[ -x "$REMOTE" ] || skip "$REMOTE is not installed (systemd-journal-remote)"
	unshare --mount --net --propagation private true 2> /dev/null ||
		skip "cannot enter a mount and network namespace here"
	# The mount point is made outside the namespace (the directory is
	# shared with the host) and removed again if it was not there.
	made=
	d=$JDIR
	while [ ! -e "$d" ]; do made="$made $d"; d=$(dirname "$d"); done
	mkdir -p "$JDIR" 2> /dev/null || skip "cannot create $JDIR"
	VD_JOURNAL_NS=1 unshare --mount --net --propagation private sh "$0"
	rc=$?
	for d in $made; do rmdir "$d" 2> /dev/null; done
	exit $rc
fi

mount -t tmpfs -o mode=0755,size=8m vd-journal "$JDIR" 2> /dev/null ||
	{ echo "SKIP: cannot mount a tmpfs on $JDIR"; exit 77; }
{ echo 512 > /proc/sys/net/unix/max_dgram_qlen && ip link set lo up; } 2> /dev/null ||
	{ echo "SKIP: cannot set up the network namespace"; exit 77; }
. "$top_srcdir/tests/integration/lib.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
H3=0a180a891c6e40afe74b71a0f047a2f08ff387a88554a40a2460f72d55fea8b7
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
# Round 3 fails: one byte of its weights changed.
printf '\377' | dd of="$STORE/round-00003/weights.safetensors" bs=1 seek=300 conv=notrunc 2> /dev/null

RECV="$WORK/receiver.py"
cat > "$RECV" << 'EOF'
import os, socket, sys, time

path, out = sys.argv[1], sys.argv[2]
os.umask(0)  # the daemon sends as its unprivileged user
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(out, "ab", buffering=0) as f:
    while True:
        d = s.recv(1 << 20)
        # An export entry: the time it was received, the native fields
        # as they came (each ends with a newline), an empty line.
        f.write(b"__REALTIME_TIMESTAMP=%d\n%s\n" % (time.time_ns() // 1000, d))
EOF
RPID=
N=0
# start_receiver: a new journal, its socket file created anew; its
# entries in $WORK/j$N.export.
start_receiver() {
	N=$((N + 1))
	: > "$WORK/j$N.export"
	python3 "$RECV" "$JDIR/socket" "$WORK/j$N.export" &
	RPID=$!
	wait_for 10 test -S "$JDIR/socket" > /dev/null || { echo "the receiver did not start"; exit 1; }
}
# stop_receiver: the journal gone, its socket file with it; its entries
# into $WORK/j$N.journal.
stop_receiver() {
	kill "$RPID"
	wait "$RPID" 2> /dev/null
	RPID=
	rm -f "$JDIR/socket"
	"$REMOTE" --output="$WORK/j$N.journal" - < "$WORK/j$N.export" 2> /dev/null ||
		not_ok "systemd-journal-remote reads journal $N"
}
trap '[ -n "$RPID" ] && kill "$RPID" 2> /dev/null; cleanup_on_exit' INT TERM
# query N MATCHES...: journal N's entries that match, one JSON object a line.
query() {
	local n=$1; shift
	journalctl --file="$WORK/j$n.journal" -o json "$@" 2> /dev/null
}
# A request for no route: logged at info with its path, "GET /nope 404 ...".
NOPE='^MESSAGE=GET /nope 404 '
in_journal() { grep -aq "$1" "$WORK/j$N.export"; }
on_stderr() { grep -q "$1" "$LOG"; }

# As start_daemon, with stderr the journal's stream: the daemon then
# logs to the journal's socket, and the port is found there.
start_journal_daemon() {
	write_conf "rescan_interval = 3600"
	readable "$STORE"
	: > "$LOG"
	JOURNAL_STREAM=$(stat -c '%d:%i' "$LOG")
	export JOURNAL_STREAM
	if [ "${VD_VALGRIND:-0}" = 1 ]; then
		valgrind --quiet --vgdb=no --fair-sched=yes --leak-check=full --show-leak-kinds=definite,indirect \
			--errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
			--log-file="$WORK/valgrind.%p" \
			"$DAEMON" -f -c "$CONF" >> "$LOG" 2>&1 &
	else
		"$DAEMON" -f -c "$CONF" >> "$LOG" 2>&1 &
	fi
	DPID=$!
	unset JOURNAL_STREAM
	wait_for $((10 * SLOW)) in_journal '^MESSAGE=listening on 127\.0\.0\.1:' > /dev/null
	PORT=$(grep -a '^MESSAGE=listening on 127\.0\.0\.1:' "$WORK/j$N.export" | head -n 1 |
		sed 's/^MESSAGE=listening on 127\.0\.0\.1:\([0-9]*\).*/\1/')
	if [ -z "$PORT" ]; then
		echo "the daemon did not log its port to the journal:"; cat "$LOG"
		kill -KILL "$DPID" 2> /dev/null
		exit 1
	fi
	wait_ready
}
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
# verdict N HASH: the fields of journal N's first verdict on HASH.
verdict() {
	query "$1" "CONTENT_HASH=$2" |
		jq -c 'select(.MESSAGE | test("^(verified|verification of) ")) |
			{CODE, STORE_PATH, RUN, PRIORITY, SYSLOG_IDENTIFIER}' | head -n 1
}
OK4='{"CODE":"ok","STORE_PATH":"round-00004","RUN":".","PRIORITY":"6","SYSLOG_IDENTIFIER":"lensemble-verifyd"}'
FAIL3='{"CODE":"checkpoint_integrity","STORE_PATH":"round-00003","RUN":"."}'

# failed_fields N: the fields of round 3's failed verdict in journal N.
failed_fields() {
	query "$1" "CONTENT_HASH=$H3" "CODE=checkpoint_integrity" | jq -c '{CODE, STORE_PATH, RUN}' | head -n 1
}

# --- the journal found, its fields indexed ---------------------------------------------
start_receiver
start_journal_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"
check "the tampered round 3 failed" failed "$(state_of "$H3")"
# One more entry: everything before it has been received.
code GET /nope > /dev/null
wait_for $((5 * SLOW)) in_journal "$NOPE" > /dev/null || not_ok "the journal received a request's line"
stop_receiver
check "journalctl CONTENT_HASH= finds the verdict, with its fields" "$OK4" "$(verdict 1 "$H4")"
check "a failed verdict: its code, path and run" "$FAIL3" "$(failed_fields 1)"
check "an alert: its kind and path" "artifact_failed round-00003" \
	"$(query 1 KIND=artifact_failed | jq -r '"\(.KIND) \(.STORE_PATH)"' | head -n 1)"
check "every entry names the daemon" 0 \
	"$(query 1 | jq -r 'select(.SYSLOG_IDENTIFIER != "lensemble-verifyd") | .MESSAGE' | wc -l)"
check "nothing went to stderr while the journal was there" "" "$(cat "$LOG")"

# --- the journal restarted, its socket file new ------------------------------------------
: > "$LOG"
start_receiver
post /verify "{\"content_hash\":\"$H4\"}" > /dev/null
post /verify "{\"content_hash\":\"$H3\"}" > /dev/null
code GET /nope > /dev/null
wait_for $((5 * SLOW)) in_journal "$NOPE" > /dev/null || not_ok "entries reach the new socket"
stop_receiver
check "after the restart: the verdict, with its fields" "$OK4" "$(verdict 2 "$H4")"
check "after the restart: the failed verdict" "$FAIL3" "$(failed_fields 2)"
check "after the restart: no verdict on stderr" 0 "$(grep -c 'verif' "$LOG")"

# --- the journal gone, then back ---------------------------------------------------------
: > "$LOG"
code GET /nope > /dev/null
wait_for $((5 * SLOW)) on_stderr '^info: GET /nope 404' > /dev/null ||
	not_ok "without a journal, a line goes to stderr"
start_receiver
code GET /nope > /dev/null
wait_for $((5 * SLOW)) in_journal "$NOPE" > /dev/null ||
	not_ok "the journal back, the next entry reaches it"
check "the journal back: the line it missed alone on stderr" 1 "$(grep -c 'GET /nope 404' "$LOG")"
stop_daemon
stop_receiver
check "the daemon's last entry, at shutdown, is in the journal" stopped \
	"$(query 3 | jq -r .MESSAGE | tail -n 1)"

finish
