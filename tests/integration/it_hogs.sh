#!/bin/sh
# Huge artifacts do not take the hashers over. Two sparse artifacts of
# 100 GB (a few KiB on disk) keep both workers hashing; still:
# - a participant's POST /verify?wait= of a small round is answered with
#   its verdict at once: a hasher is kept for explicit requests;
# - a participant's request for a round queued behind background work
#   goes ahead of it;
# - removing an artifact stops its hashing within a second;
# - SIGTERM leaves within shutdown_grace while hashing;
# - a job over max_verify_seconds is abandoned as io_error naming the
#   bound, and tried again later, each time after a longer delay.
. "$top_srcdir/tests/integration/lib.sh"

# 100 GB: minutes of hashing, hours at the floor rate. ThreadSanitizer
# cannot map a terabyte (its shadow), nor can valgrind; under valgrind
# 16 GB is as good as forever.
HUGE=100000000000
[ "$SLOW" -gt 1 ] && HUGE=16000000000
busy_at_least() { [ "$(metric workers_busy)" -ge "$1" ]; }
claim() { printf '%064x' "$1"; }
huge() {
	"$MKART" --round "$1" --sparse --bytes "$HUGE" --claim "$(claim "$1")" "$STORE/$2" > /dev/null
}
logged() { grep -q "$1" "$LOG"; }

# secs START: seconds since START (date +%s.%N).
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }
under() { awk -v t="$1" -v l="$2" 'BEGIN { exit !(t < l) }'; }

huge 7001 huge-a
huge 7002 huge-b
write_conf "workers = 2" "shutdown_grace = 3"
start_daemon
wait_for $((10 * SLOW)) busy_at_least 2 > /dev/null ||
	not_ok "both workers hash the sparse artifacts"

# A small round made now: background work would queue it behind both.
small=$("$MKART" --round 1 "$STORE/small")
readable "$STORE"
start=$(date +%s.%N)
body=$(post "/verify?wait=$((10 * SLOW))" '{"path": "small"}')
took=$(secs "$start")
check "a participant's verify while both workers are busy: verdict ok" ok \
	"$(echo "$body" | jq -r '.verdict')"
check "... of the small round" "$small" "$(echo "$body" | jq -r '.content_hash')"
if under "$took" $((3 * SLOW)); then
	ok "... answered in $took s, not after its wait"
else
	not_ok "... answered in $took s"
fi

# Removing one stops its hashing.
rm -rf "$STORE/huge-a"
start=$(date +%s.%N)
if wait_for $((3 * SLOW)) logged "stopped verifying huge-a" > /dev/null; then
	took=$(secs "$start")
	if under "$took" $((2 * SLOW)); then
		ok "a removed artifact stops being hashed ($took s)"
	else
		not_ok "a removed artifact stops being hashed: $took s"
	fi
else
	not_ok "a removed artifact stops being hashed"
fi
wait_for $((5 * SLOW)) sh -c "[ \"\$(curl -s '$(url /metrics)' | awk '\$1 == \"lensemble_verifyd_workers_busy\" { print \$2 }')\" = 1 ]" \
	> /dev/null || not_ok "one worker is left busy"
# The job stops on its own when the file goes; the store forgets the copy
# when its scan of the removal is merged, which may come later.
gone() { [ -z "$(state_of "$(claim 7001)")" ]; }
wait_for $((5 * SLOW)) gone > /dev/null
check "the removed artifact is forgotten, not failed" "" "$(state_of "$(claim 7001)")"
if logged "alert raised: artifact_failed: huge-a"; then
	not_ok "... and no failure was raised for it"
else
	ok "... and no failure was raised for it"
fi

# SIGTERM while hashing: out within the grace (3 s), not after the hash.
start=$(date +%s.%N)
stop_daemon $((10 * SLOW))
took=$(secs "$start")
if under "$took" $((3 + 2 * SLOW)); then
	ok "SIGTERM while hashing, shutdown_grace = 3: out in $took s"
else
	not_ok "SIGTERM while hashing, shutdown_grace = 3: out in $took s"
fi

# A participant's request goes ahead of queued background work: one
# worker, busy with huge-b, and a queue of new rounds behind it.
rm -rf "$STATE"/* "$STORE/small"
for i in 1 2 3 4 5 6; do "$MKART" --round "$i" --seed "$i" "$STORE/r$i" > /dev/null; done
last=$("$MKART" --round 9 --seed 9 "$STORE/r9")
write_conf "workers = 1"
start_daemon
wait_for $((10 * SLOW)) busy_at_least 1 > /dev/null
body=$(post "/verify?wait=$((10 * SLOW))" '{"content_hash": "'"$last"'"}')
check "the last round queued behind background work, asked for: verdict ok" ok \
	"$(echo "$body" | jq -r '.verdict')"
stop_daemon $((10 * SLOW))

# Over max_verify_seconds: abandoned as io_error, retried with backoff.
rm -rf "$STATE"/* "$STORE"/r*
write_conf "workers = 1" "max_verify_seconds = 2"
start_daemon
failed_io() { [ "$(get "/artifact/$(claim 7002)" | jq -r '.code')" = io_error ]; }
wait_for $((10 * SLOW)) failed_io > /dev/null || not_ok "the job over its time is abandoned"
detail=$(get "/artifact/$(claim 7002)" | jq -r '.detail')
case $detail in
*max_verify_seconds*) ok "io_error naming the bound: $detail" ;;
*) not_ok "io_error naming the bound: got '$detail'" ;;
esac
twice() { [ "$(grep -c 'gave up after' "$LOG")" -ge 2 ]; }
if wait_for $((15 * SLOW)) twice > /dev/null; then
	ok "abandoned again when retried"
	check "the first retry waits the time limit (2 s)" 1 \
		"$(grep -c 'gave up after .* verifying it again in 2 s' "$LOG")"
	check "the next waits twice as long" 1 \
		"$(grep -c 'gave up after .* verifying it again in 4 s' "$LOG")"
else
	not_ok "a job over its time is retried"
fi

finish
