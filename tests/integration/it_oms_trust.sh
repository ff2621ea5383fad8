#!/bin/sh
# A bundle the daemon signs says the artifact is trusted: trust taken back
# while the worker reads and signs its files (here the operator withdraws
# its commitment) means no bundle, 409, though the files never changed.
. "$top_srcdir/tests/integration/lib.sh"

TOKEN=lensemble-operator-token-0123456789
printf '%s\n' "$TOKEN" > "$WORK/token"
chmod 644 "$WORK/token"
# Big enough that signing takes a while (sparse: cheap to make); under
# valgrind hashing is ~100 times slower, so smaller.
mib=2048
[ "$SLOW" -gt 1 ] && mib=128
H0=$("$MKART" --round 0 --seed 1 --ledger "$STORE/ledger.jsonl" "$STORE/round-00000")
H1=$("$MKART" --round 1 --seed 2 --parent "$H0" --sparse --bytes $((mib * 1024 * 1024)) \
	--ledger "$STORE/ledger.jsonl" "$STORE/round-00001")
readable "$STORE"
write_conf "genesis_hash = $H0" "token_file = $WORK/token" "rescan_interval = 3600" \
	"max_verify_seconds = 600"
start_daemon
trusted1() { [ "$(get "/artifact/$H1" | jq -r .trusted)" = true ]; }
wait_for $((120 * SLOW)) trusted1 > /dev/null || not_ok "round 1 is verified and trusted"

# The request is in the daemon once its connection is counted beside the
# one that asks.
curl -s -o "$WORK/oms.out" -w '%{http_code}' --max-time $((300 * SLOW)) \
	"$(url "/artifact/$H1/oms")" > "$WORK/oms.code" &
OMS=$!
signing() { [ "$(metric http_connections)" -ge 2 ]; }
wait_for $((10 * SLOW)) signing > /dev/null || not_ok "the bundle is asked for"
check "the operator withdraws round 1's commitment meanwhile" 200 \
	"$(code DELETE "/commitment?run=.&round=0&hash=$H1" -H "Authorization: Bearer $TOKEN")"
check "round 1 is no longer trusted" false "$(get "/artifact/$H1" | jq -r .trusted)"
wait "$OMS"
check "the bundle asked for before is refused: 409 not_trusted" "409 not_trusted" \
	"$(cat "$WORK/oms.code") $(jq -r .error.code "$WORK/oms.out")"
check "and one asked for now" 409 "$(code GET "/artifact/$H1/oms")"
finish
