# Shared by the integration tests: start the real daemon on a loopback
# port against a scratch store, talk HTTP to it with curl, check with jq.
#
# Environment: top_srcdir, top_builddir (set by make check);
# VD_VALGRIND=1 runs the daemon under valgrind memcheck (timeouts scale).
set -u

: "${top_srcdir:?run through make check}"
: "${top_builddir:?run through make check}"
DATA="$top_srcdir/tests/data"
MKART="$top_builddir/tools/vd-mkartifact"
DAEMON="$top_builddir/lensemble-verifyd"
SLOW=1
[ "${VD_VALGRIND:-0}" = 1 ] && SLOW=8

PASSED=0
FAILED=0
DPID=
PORT=
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vd-it.XXXXXX")
# The daemon drops to an unprivileged user when started as root: it must
# be able to read the store and write its state directory.
chmod 755 "$WORK"
STORE="$WORK/store"
STATE="$WORK/state"
CONF="$WORK/verifyd.conf"
LOG="$WORK/daemon.log"
mkdir -p "$STORE" "$STATE"
# No request may hang a test: every curl gives up after a minute (more
# under valgrind) unless the test asks for its own --max-time.
echo "max-time = $((60 * SLOW))" > "$WORK/.curlrc"
CURL_HOME=$WORK
export CURL_HOME
RUN_AS=
if [ "$(id -u)" = 0 ]; then
	RUN_AS=nobody
	chown nobody "$STATE"
fi

need() {
	command -v "$1" >/dev/null 2>&1 || { echo "SKIP: $1 is not installed"; exit 77; }
}
need curl
need jq

ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
not_ok() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }

# check DESCRIPTION EXPECTED ACTUAL
check() {
	if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1: expected '$2', got '$3'"; fi
}

# write_conf [extra lines...]: a config with the test's store and state.
write_conf() {
	{
		echo "store = $STORE"
		echo "state_dir = $STATE"
		echo "listen = 127.0.0.1:0"
		echo "log_level = debug"
		echo "debounce_ms = 100"
		[ -n "$RUN_AS" ] && echo "user = $RUN_AS"
		for line in "$@"; do echo "$line"; done
	} > "$CONF"
}

# Make the store readable by the daemon's user, touching only what lacks
# it: chmod changes ctime, which the daemon rightly takes for a change.
readable() {
	find "$1" -type d ! -perm -o=rx -exec chmod a+rx {} + 2>/dev/null
	find "$1" -type f ! -perm -o=r -exec chmod a+r {} + 2>/dev/null
	return 0
}

start_daemon() {
	launch_daemon "$@"
	wait_ready
}

# launch_daemon [args...]: start the daemon and wait for its port only,
# not for readiness (a test of what it answers before it is ready).
launch_daemon() {
	local i
	[ -f "$CONF" ] || write_conf
	readable "$STORE"
	: > "$LOG"
	if [ "${VD_VALGRIND:-0}" = 1 ]; then
		valgrind --quiet --vgdb=no --fair-sched=yes --leak-check=full --show-leak-kinds=definite,indirect \
			--errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
			--log-file="$WORK/valgrind.%p" \
			"$DAEMON" -f -c "$CONF" "$@" >> "$LOG" 2>&1 &
	else
		"$DAEMON" -f -c "$CONF" "$@" >> "$LOG" 2>&1 &
	fi
	DPID=$!
	for i in $(seq 1 $((100 * SLOW))); do
		PORT=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$LOG" | head -n 1)
		[ -n "$PORT" ] && break
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.05
	done
	if [ -z "$PORT" ]; then
		echo "the daemon did not start:"; cat "$LOG"
		exit 1
	fi
}

wait_ready() {
	local i
	for i in $(seq 1 $((100 * SLOW))); do
		[ "$(code GET /readyz)" = 200 ] && return 0
		sleep 0.05
	done
	not_ok "the daemon became ready"
}

# stop_daemon [SECONDS]: SIGTERM, then it must exit 0 within SECONDS
# (default 5, scaled under valgrind).
stop_daemon() {
	local i rc limit=${1:-$((5 * SLOW))}
	[ -n "$DPID" ] || return 0
	kill -TERM "$DPID" 2>/dev/null
	for i in $(seq 1 $((20 * limit))); do
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$DPID" 2>/dev/null; then
		not_ok "the daemon exits within $limit s of SIGTERM"
		kill -KILL "$DPID"
	fi
	wait "$DPID"; rc=$?
	DPID=
	check "the daemon exits with status 0 on SIGTERM" 0 "$rc"
	check_valgrind
}

check_valgrind() {
	local f
	[ "${VD_VALGRIND:-0}" = 1 ] || return 0
	for f in "$WORK"/valgrind.*; do
		[ -e "$f" ] || continue
		if [ -s "$f" ]; then
			not_ok "valgrind is clean ($f)"; cat "$f"
		else
			ok "valgrind reports no errors and no leaks"
		fi
		rm -f "$f"
	done
}

url() { echo "http://127.0.0.1:$PORT$1"; }

# code METHOD PATH [curl args...]: the HTTP status alone.
code() {
	local m=$1 p=$2; shift 2
	curl -s -o /dev/null -w '%{http_code}' -X "$m" "$@" "$(url "$p")"
}

get() { curl -s "$(url "$1")"; }

# post PATH BODY [curl args...]
post() {
	local p=$1 b=$2; shift 2
	curl -s -X POST -H 'Content-Type: application/json' --data-binary "$b" "$@" "$(url "$p")"
}

state_of() { get "/artifact/$1" | jq -r '.state // empty'; }

# wait_for SECONDS COMMAND...: until COMMAND succeeds; prints the seconds it took.
wait_for() {
	local limit=$1 start now; shift
	start=$(date +%s.%N)
	while :; do
		if "$@"; then
			now=$(date +%s.%N)
			awk -v a="$start" -v b="$now" 'BEGIN { printf "%.2f\n", b - a }'
			return 0
		fi
		now=$(date +%s.%N)
		if awk -v a="$start" -v b="$now" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
			return 1
		fi
		sleep 0.05
	done
}

metric() {
	get /metrics | awk -v n="lensemble_verifyd_$1" '$1 == n { print $2 }'
}

# settle_connections N: wait until the daemon counts at most N open
# connections, the one asking included. A client's close frees its slot
# only once the daemon has read it, some time later: a check that needs
# that slot waits for this, bounded, rather than race it. While the slots
# are still taken the asking connection itself may be refused (no count),
# and is asked again.
at_most_connections() { local n; n=$(metric http_connections); [ -n "$n" ] && [ "$n" -le "$1" ]; }
settle_connections() {
	wait_for $((5 * SLOW)) at_most_connections "$1" > /dev/null ||
		not_ok "the daemon sees closed connections go: $(metric http_connections) open, not at most $1"
}

# scans: the store scans begun so far, of the whole store or of changes.
scans() {
	get /metrics | awk '$1 ~ /^lensemble_verifyd_store_scans_total[{]/ { n += $2 } END { print n + 0 }'
}

# scanned_through [PATH]: wait, bounded, until every change the daemon had
# noted when this was called has been scanned and merged. Two more scans
# must begin: the first takes every change noted before it, and the second
# begins only once the first is merged. PATH is touched to bring them on,
# again each time a scan begins (touching at every look would put the
# scan off: each change restarts the debounce): by default a file
# "scan-probe" in the store (no artifact; removed afterwards). Touching a
# directory instead makes its scan read the whole directory; touching the
# store root, the whole store. A change is noted once the daemon logs
# "change in ..." for it; hidden names raise none.
scanned_through() {
	local probe=${1:-$STORE/scan-probe} n
	SCANS_SEEN=$(scans)
	n=$((SCANS_SEEN + 2))
	touch "$probe"
	wait_for $((10 * SLOW)) scanned_to "$n" "$probe" > /dev/null ||
		not_ok "the daemon scans what changed: $(scans) scans begun, not $n"
	[ -n "${1:-}" ] || rm -f "$probe"
}
scanned_to() {
	local c
	c=$(scans)
	[ "$c" -ge "$1" ] && return 0
	[ "$c" -gt "$SCANS_SEEN" ] && touch "$2"
	SCANS_SEEN=$c
	return 1
}

finish() {
	stop_daemon
	echo "$PASSED passed, $FAILED failed"
	if [ "$FAILED" -gt 0 ]; then
		echo "--- daemon log ---"; tail -n 60 "$LOG"
	fi
	rm -rf "$WORK"
	[ "$FAILED" -eq 0 ]
}

cleanup_on_exit() {
	[ -n "$DPID" ] && kill -KILL "$DPID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup_on_exit INT TERM
