#!/bin/sh
# A full verification queue: background work is shed first and queued
# again later; explicit requests beyond twice the bound get 503 with
# Retry-After, and everything is verified once the queue drains.
. "$top_srcdir/tests/integration/lib.sh"

# One worker busy with a large (sparse) artifact, the thread kept for
# participants with another (asked for explicitly); three small ones wait.
# Under valgrind hashing is ~100 times slower: smaller ones keep them busy.
big=2048
[ "$SLOW" -gt 1 ] && big=128
"$MKART" --round 0 --sparse --bytes $((big * 1024 * 1024)) --seed 1 "$STORE/a-big" > /dev/null
"$MKART" --round 0 --sparse --bytes $((big * 1024 * 1024)) --seed 2 "$STORE/a-big2" > "$WORK/h-big2"
for n in b c d; do "$MKART" --round 0 --seed "$(printf %d "'$n")" "$STORE/$n" > "$WORK/h-$n"; done
# Without slices: the big jobs keep both threads until the queue is seen
# full (taking turns is it_fair's).
write_conf "workers = 1" "queue_max = 1" "rescan_interval = 3600" "hash_slice_ms = 0"
start_daemon
check "the second big one, asked for, takes the participants' thread" 202 \
	"$(code POST '/verify?wait=0' -H 'Content-Type: application/json' \
	--data-binary "{\"content_hash\":\"$(cat "$WORK/h-big2")\"}")"
busy2() { [ "$(metric workers_busy)" = 2 ]; }
wait_for $((10 * SLOW)) busy2 > /dev/null || not_ok "both threads hash"

# Whether the first scan queued b or shed it, one of these three explicit
# requests finds twice the bound waiting.
got=
for n in c d b; do
	curl -s -D "$WORK/hdr-$n" -o "$WORK/body-$n" -X POST -H 'Content-Type: application/json' \
		--data-binary "{\"content_hash\":\"$(cat "$WORK/h-$n")\"}" "$(url '/verify?wait=0')"
	st=$(sed -n 's/^HTTP\/1.1 \([0-9]*\).*/\1/p' "$WORK/hdr-$n")
	[ "$st" = 503 ] && { got=$n; break; }
	check "an explicit request within twice the bound is accepted" 202 "$st"
done
check "beyond twice the bound: 503" true "$([ -n "$got" ] && echo true)"
check "with Retry-After" "Retry-After: 5" "$(tr -d '\r' < "$WORK/hdr-${got:-c}" | grep '^Retry-After:')"
check "and the overloaded error" overloaded "$(jq -r .error.code "$WORK/body-${got:-c}")"
check "the daemon still answers" 200 "$(code GET /healthz)"

# Two 2 GiB hashes on a loaded machine take tens of seconds: a wide bound.
all() { [ "$(metric 'artifacts{state="verified"}')" = 5 ]; }
if wait_for $((120 * SLOW)) all > /dev/null; then ok "shed background work is verified once the queue drains"; else not_ok "every artifact verified after the queue drained"; fi
finish
