#!/bin/sh
# SIGTERM with a long shutdown_grace: the daemon leaves as soon as its
# hashers are done, not when the grace runs out, whether they are idle or
# finishing a hash; with no grace, at once. Each time with status 0 (and,
# under valgrind, no leak: the pool is freed after its threads are joined
# off the event loop).
. "$top_srcdir/tests/integration/lib.sh"

busy() { [ "$(metric workers_busy)" -ge 1 ]; }

# stop_timed LIMIT DESCRIPTION: SIGTERM (through stop_daemon), then the
# daemon must have left within LIMIT seconds.
stop_timed() {
	local start end
	start=$(date +%s.%N)
	stop_daemon "$1"
	end=$(date +%s.%N)
	if awk -v a="$start" -v b="$end" -v l="$1" 'BEGIN { exit !(b - a < l) }'; then
		ok "$2 ($(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s)"
	else
		not_ok "$2: it took $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s"
	fi
}

# Idle hashers leave at once.
write_conf "shutdown_grace = 60" "workers = 4"
start_daemon
stop_timed $((3 * SLOW)) "idle hashers and a 60 s grace: out at once"

# A hash in flight finishes within the grace, then the daemon leaves.
big_bytes=$((1024 * 1024 * 1024))
[ "$SLOW" -gt 1 ] && big_bytes=$((64 * 1024 * 1024))
"$MKART" --round 1 --sparse --bytes "$big_bytes" "$STORE/big" > /dev/null
start_daemon
wait_for $((5 * SLOW)) busy > /dev/null || not_ok "the big artifact is being hashed"
# The bound is the hash's time on a slow, loaded machine (ThreadSanitizer
# on two busy cores: about 6 s), well short of the grace.
limit=20
[ "$SLOW" -gt 1 ] && limit=40
stop_timed "$limit" "a hash in flight and a 60 s grace: out once it is done"

# No grace: the hash in flight is cancelled.
rm -rf "$STATE"/*
write_conf "shutdown_grace = 0"
start_daemon
wait_for $((5 * SLOW)) busy > /dev/null || not_ok "the big artifact is being hashed"
stop_timed $((3 * SLOW)) "a hash in flight and no grace: out at once"

finish
