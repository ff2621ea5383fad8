#!/bin/sh
# Replicas: two daemons with their own state directories on one store
# give the same trusted answer for every artifact, because the signed
# statements that commit live in the store, not in either database.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/trust.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
keygen coord
mkdir -p "$WORK/keys" "$STORE/commitments"
cp "$WORK/coord.pub" "$WORK/keys/"
chmod -R a+rX "$WORK/keys"
envelope "$PT_CP" "$(cp_stmt . 4 "$(head_of "$STORE/ledger.jsonl")")" coord > "$STORE/commitments/ledger-4.json"
"$MKART" --round 5 --parent "$H4" --seed 5 "$STORE/round-00005" > "$WORK/h5"
H5=$(cat "$WORK/h5")
envelope "$PT_RC" "$(rc_stmt . 4 "$H5")" coord > "$STORE/commitments/roundclose-4.json"
"$MKART" --round 6 --parent "$H5" --seed 6 "$STORE/round-00006" > "$WORK/h6"   # not committed yet
H6=$(cat "$WORK/h6")
write_conf "trusted_keys = $WORK/keys" "rescan_interval = 3600"

# The second replica: its own state directory, port and log.
STATE2="$WORK/state2"; CONF2="$WORK/verifyd2.conf"; LOG2="$WORK/daemon2.log"
mkdir -p "$STATE2"
[ -n "$RUN_AS" ] && chown "$RUN_AS" "$STATE2"
sed "s|^state_dir = .*|state_dir = $STATE2|" "$CONF" > "$CONF2"

start_daemon
"$DAEMON" -f -c "$CONF2" > "$LOG2" 2>&1 &
PID2=$!
for i in $(seq 1 $((100 * SLOW))); do
	PORT2=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$LOG2" | head -n 1)
	[ -n "$PORT2" ] && break
	sleep 0.05
done
[ -n "$PORT2" ] || { not_ok "the second replica started"; cat "$LOG2"; }

# A replica's /metrics answers before its first scan is merged: it has
# settled once it is ready and all seven artifacts have a verdict.
settled_at() {
	[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz")" = 200 ] &&
	curl -s "http://127.0.0.1:$1/metrics" | awk '
		$1 ~ /artifacts\{state="(pending|verifying)"\}/ { s += $2 }
		$1 ~ /artifacts\{state="(verified|failed)"\}/ { v += $2 }
		END { exit !(NR > 0 && s == 0 && v == 7) }'
}
both_settled() { settled_at "$PORT" && settled_at "$PORT2"; }
wait_for $((10 * SLOW)) both_settled > /dev/null || not_ok "both replicas verified the store"
answers() {
	curl -s "http://127.0.0.1:$1/artifacts" |
		jq -c '[.artifacts[] | {h: .content_hash, trusted, signed: .commitment.signed}] | sort_by(.h)'
}
A=$(answers "$PORT")
B=$(answers "$PORT2")
check "both replicas list the same artifacts with the same trust" "$A" "$B"
check "seven artifacts, five trusted (round 0 has no pin; round 6 no commitment yet)" "7 5" \
	"$(echo "$A" | jq -r '"\(length) \([.[] | select(.trusted)] | length)"')"
check "the same committed head" "$(curl -s "http://127.0.0.1:$PORT/chain" | jq -c .committed_head)" \
	"$(curl -s "http://127.0.0.1:$PORT2/chain" | jq -c .committed_head)"
check "the second replica is ready for a load balancer's health check" 200 \
	"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT2/readyz")"

# A statement added to the store reaches both, without any post.
envelope "$PT_RC" "$(rc_stmt . 5 "$H6")" coord > "$STORE/commitments/roundclose-5.json"
readable "$STORE/commitments"
t6() { [ "$(curl -s "http://127.0.0.1:$1/artifact/$H6" | jq -r .trusted)" = true ]; }
t6both() { t6 "$PORT" && t6 "$PORT2"; }
if wait_for $((5 * SLOW)) t6both > /dev/null; then ok "a statement written to the store commits on both replicas"; else not_ok "a statement written to the store commits on both replicas"; fi

kill -TERM "$PID2"; wait "$PID2"
check "the second replica exits with status 0" 0 "$?"
finish
