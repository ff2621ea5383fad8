#!/bin/sh
# Hashing is shared fairly. Three sparse artifacts of a terabyte each
# (nothing on disk, a day of hashing at the floor rate) keep both workers
# busy; still:
# - a new round, committed by the coordinator's ledger, is verified and
#   trusted within 5 s, seen by a client that only polls GET (no POST
#   /verify, so not the reserved hasher's business);
# - the huge ones go on being hashed meanwhile (hashing_bytes_total
#   advances), each in turn, never all parked at once;
# - a GET of an unverified artifact moves its job ahead of the rest.
. "$top_srcdir/tests/integration/lib.sh"

# 1e12 bytes, under max_artifact_bytes (1 TiB). ThreadSanitizer cannot map
# a terabyte (its shadow): 100 GB is as good as forever. Valgrind cannot
# map 100 GB either, and hashes a hundred times slower: 10 GB is a quarter
# of an hour there.
HUGE=1000000000000
if nm -D "$DAEMON" 2>/dev/null | grep -q __tsan_init; then
	HUGE=100000000000
fi
[ "$SLOW" -gt 1 ] && HUGE=10000000000
claim() { printf '%064x' "$1"; }
huge() {
	"$MKART" --round "$1" --sparse --bytes "$HUGE" --claim "$(claim "$1")" "$STORE/$2" > /dev/null
}
# A metric, 0 while it is not there.
num() { v=$(metric "$1"); echo "${v:-0}"; }
busy_at_least() { [ "$(num workers_busy)" -ge "$1" ]; }
field() { get "/artifact/$1" | jq -r "$2"; }
# secs START: seconds since START (date +%s.%N).
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }

# Rounds 0 and 1, round 0 pinned and round 1 committed by the ledger.
H1=$("$MKART" --chain 2 "$STORE")
H0=$(jq -r .content_hash "$STORE/round-00000/header.json")
write_conf "workers = 2" "genesis_hash = $H0" "rescan_interval = 3600"
start_daemon
trusted() { [ "$(field "$1" .trusted)" = true ]; }
wait_for $((10 * SLOW)) trusted "$H1" > /dev/null || not_ok "round 1 is trusted before the hogs come"

huge 7001 hog-a
huge 7002 hog-b
huge 7003 hog-c
readable "$STORE"
three_started() {
	[ "$(num workers_busy)" -ge 2 ] && [ "$(num hashing_yields_total)" -ge 3 ]
}
wait_for $((10 * SLOW)) busy_at_least 2 > /dev/null || not_ok "the workers hash the huge artifacts"

# The coordinator commits round 2: its directory renamed into the store,
# its record appended to the ledger.
H2=$("$MKART" --round 2 --parent "$H1" --seed 2 --ledger "$STORE/ledger.jsonl" "$WORK/round-00002")
chmod -R a+rX "$WORK/round-00002"
before=$(num hashing_bytes_total)
start=$(date +%s.%N)
mv "$WORK/round-00002" "$STORE/round-00002"
if wait_for $((5 * SLOW)) trusted "$H2" > /dev/null; then
	ok "a new round is trusted on a plain GET within 5 s beside three huge artifacts ($(secs "$start") s)"
else
	not_ok "a new round is trusted on a plain GET within 5 s beside three huge artifacts: $(get "/artifact/$H2" | jq -c '{state, trusted, untrusted_reason}')"
fi
check "... verified" verified "$(field "$H2" .state)"

# The huge ones are still being hashed, every one of them in turn.
advanced() { [ "$(num hashing_bytes_total)" -gt "$before" ]; }
if wait_for $((5 * SLOW)) advanced > /dev/null; then
	ok "the huge artifacts are still hashed (hashing_bytes_total $before, then $(num hashing_bytes_total))"
else
	not_ok "the huge artifacts are still hashed: hashing_bytes_total stays $before"
fi
if wait_for $((10 * SLOW)) three_started > /dev/null; then
	ok "... taking turns on the two workers (hashing_yields_total $(num hashing_yields_total))"
else
	not_ok "... taking turns on the two workers: hashing_yields_total $(num hashing_yields_total)"
fi
check "... none of them judged yet" "pending pending pending" \
	"$(for n in 7001 7002 7003; do field "$(claim $n)" .state; done | xargs)"

# A round that arrives while every hasher is taken and a client asks for
# it by GET alone: it goes first as soon as a slice ends.
H3=$("$MKART" --round 3 --parent "$H2" --seed 3 --ledger "$STORE/ledger.jsonl" "$WORK/round-00003")
chmod -R a+rX "$WORK/round-00003"
mv "$WORK/round-00003" "$STORE/round-00003"
if wait_for $((5 * SLOW)) trusted "$H3" > /dev/null; then
	ok "the next round too"
else
	not_ok "the next round too: $(get "/artifact/$H3" | jq -c '{state, trusted, untrusted_reason}')"
fi

# Removing a huge artifact stops its hashing, whether it runs or waits
# its turn.
rm -rf "$STORE/hog-a"
gone() { [ -z "$(field "$(claim 7001)" '.state // empty')" ]; }
if wait_for $((10 * SLOW)) gone > /dev/null; then
	ok "a removed huge artifact is forgotten"
else
	not_ok "a removed huge artifact is forgotten"
fi
if grep -q "alert raised: artifact_failed: hog-a" "$LOG"; then
	not_ok "... and no failure was raised for it"
else
	ok "... and no failure was raised for it"
fi

finish
