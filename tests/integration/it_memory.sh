#!/bin/sh
# Statement memory (trust.md section 8): a writer of the store cannot take
# a signed commitment back, erase an equivocation or pick its winner by
# removing a file; every trusted signature on a statement counts; a
# RoundClose naming an artifact of another round commits nothing; only
# the operator withdraws a commitment, durably, with a reason.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/trust.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
TOKEN=lensemble-operator-token-0123456789
printf '%s\n' "$TOKEN" > "$WORK/token"
chmod 644 "$WORK/token"
keygen coord
keygen second
mkdir -p "$WORK/keys" "$STORE/commitments"
cp "$WORK/coord.pub" "$WORK/second.pub" "$WORK/keys/"
chmod -R a+rX "$WORK/keys"
COORD=$(keyid "$WORK/coord.pub")
"$MKART" --round 5 --parent "$H4" --seed 501 "$STORE/round-00005" > "$WORK/h5"
"$MKART" --round 5 --parent "$H4" --seed 502 "$STORE/round-00005b" > "$WORK/h5b"
H5=$(cat "$WORK/h5")
H5B=$(cat "$WORK/h5b")
"$MKART" --round 6 --parent "$H5" --seed 601 "$STORE/round-00006" > "$WORK/h6"
H6=$(cat "$WORK/h6")
envelope "$PT_CP" "$(cp_stmt . 4 "$(head_of "$STORE/ledger.jsonl")")" coord > "$STORE/commitments/ledger-4.json"

write_conf "trusted_keys = $WORK/keys" "token_file = $WORK/token" "rescan_interval = 3600"
start_daemon
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store verified"
alert() { metric "integrity_alerts{kind=\"$1\"}"; }
field() { get "/artifact/$1" | jq -r "$2"; }
auth() { echo "Authorization: Bearer $TOKEN"; }
check "the signed checkpoint commits round 4" true "$(field "$H4" .trusted)"

# --- an equivocation stays until the operator resolves it ----------------------
envelope "$PT_RC" "$(rc_stmt . 4 "$H5")" coord > "$STORE/commitments/rc4-a.json"
envelope "$PT_RC" "$(rc_stmt . 4 "$H5B")" coord > "$STORE/commitments/rc4-b.json"
readable "$STORE/commitments"
equiv() { [ "$(alert equivocation)" = 1 ]; }
if wait_for $((5 * SLOW)) equiv > /dev/null; then ok "two signed statements for round 4: equivocation"; else not_ok "two signed statements for round 4: equivocation"; fi
check "neither side is trusted" "false false" "$(field "$H5" .trusted) $(field "$H5B" .trusted)"
rm -f "$STORE/commitments/rc4-b.json"
gone() { grep -q 'signed statement commitments/rc4-b.json is gone' "$LOG"; }
wait_for $((5 * SLOW)) gone > /dev/null || not_ok "the removed statement file is noticed"
check "a store writer removing one side does not end the equivocation" 1 "$(alert equivocation)"
check "nor makes the other side trusted" false "$(field "$H5" .trusted)"
stop_daemon
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store verified after a restart"
check "the equivocation is kept over a restart" "1 false" "$(alert equivocation) $(field "$H5" .trusted)"

# --- withdrawal by the operator --------------------------------------------------
check "DELETE /commitment needs the operator token" 401 "$(code DELETE "/commitment?run=.&round=4&hash=$H5B")"
check "a hash nothing commits for that round: 404" 404 \
	"$(code DELETE "/commitment?run=.&round=4&hash=$H4" -H "$(auth)")"
check "a malformed round: 400" 400 "$(code DELETE "/commitment?run=.&round=x&hash=$H5B" -H "$(auth)")"
check "a malformed hash: 400" 400 "$(code DELETE "/commitment?run=.&round=4&hash=ABC" -H "$(auth)")"
curl -s -X DELETE -H "$(auth)" -o "$WORK/w.out" -w '%{http_code}' \
	"$(url "/commitment?run=.&round=4&hash=$H5B&reason=signed%20in%20error")" > "$WORK/w.code"
check "the operator withdraws one side: 200" 200 "$(cat "$WORK/w.code")"
check "answered with what was withdrawn and why" "true signed in error signed" \
	"$(jq -r '"\(.created) \(.withdrawn.reason) \(.withdrawn.sources)"' "$WORK/w.out")"
resolved() { [ "$(alert equivocation)" = 0 ] && [ "$(field "$H5" .trusted)" = true ]; }
if wait_for $((5 * SLOW)) resolved > /dev/null; then ok "the other side is trusted and the alert clears"; else not_ok "the other side is trusted and the alert clears"; fi
check "withdrawing again: 200, nothing new" "200 false" \
	"$(curl -s -X DELETE -H "$(auth)" -o "$WORK/w2.out" -w '%{http_code}' "$(url "/commitment?run=.&round=4&hash=$H5B")") $(jq -r .created "$WORK/w2.out")"
check "GET /commitments shows the withdrawn statement with its reason" "signed in error" \
	"$(get /commitments | jq -r --arg h "$H5B" '.commitments[] | select(.kind == "round_close" and .global_model_hash == $h) | .withdrawn.reason')"
check "and the withdrawal itself, by the operator, from the client's address" "operator 127.0.0.1" \
	"$(get /commitments | jq -r --arg h "$H5B" '.commitments[] | select(.kind == "withdrawal" and .global_model_hash == $h) | "\(.by) \(.from)"')"
check "the withdrawal is logged once" 1 "$(grep -c "commitment withdrawn by the operator.*$H5B" "$LOG")"
stop_daemon
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store verified after a restart"
check "the withdrawal is kept over a restart" "0 true false" \
	"$(alert equivocation) $(field "$H5" .trusted) $(field "$H5B" .trusted)"
rm -f "$STORE/commitments/rc4-a.json"
gone_a() { grep -q 'signed statement commitments/rc4-a.json is gone' "$LOG"; }
wait_for $((5 * SLOW)) gone_a > /dev/null || not_ok "the removed statement file is noticed"
check "removing the remaining statement's file keeps its commitment" true "$(field "$H5" .trusted)"

# --- every trusted signature counts -------------------------------------------
check "a statement signed by the second key: 201" 201 \
	"$(code POST /roundclose -H 'Content-Type: application/json' --data-binary "$(envelope "$PT_RC" "$(rc_stmt . 5 "$H6")" second)")"
envelope "$PT_RC" "$(rc_stmt . 5 "$H6")" coord > "$WORK/rc5-coord.json"
check "the same statement signed by the coordinator: 200, not created" "200 false" \
	"$(post /roundclose "$(cat "$WORK/rc5-coord.json")" -o "$WORK/p.out" -w '%{http_code}') $(jq -r .created "$WORK/p.out")"
check "round 6 is trusted" true "$(field "$H6" .trusted)"
rm -f "$WORK/keys/second.pub"
: > "$LOG.mark"
kill -HUP "$DPID"
reloaded() { [ "$(grep -c 'configuration reloaded' "$LOG")" -ge 1 ]; }
wait_for $((5 * SLOW)) reloaded > /dev/null || not_ok "the configuration is reloaded"
keyed() { [ "$(field "$H6" .commitment.key_id)" = "$COORD" ]; }
if wait_for $((5 * SLOW)) keyed > /dev/null; then ok "the second key revoked: the coordinator's signature stands"; else not_ok "the second key revoked: the coordinator's signature stands"; fi
check "round 6 stays trusted" true "$(field "$H6" .trusted)"
check "re-posting the coordinator's statement: 200, still trusted" "200 true" \
	"$(code POST /roundclose -H 'Content-Type: application/json' --data-binary @"$WORK/rc5-coord.json") $(field "$H6" .trusted)"

# --- a RoundClose naming an artifact of another round commits nothing ----------
envelope "$PT_RC" "$(rc_stmt . 6 "$H6")" coord > "$STORE/commitments/off-by-one.json"
readable "$STORE/commitments"
mismatch() { [ "$(metric 'envelopes_rejected_total{reason="round_mismatch"}')" -ge 1 ]; }
if wait_for $((5 * SLOW)) mismatch > /dev/null; then ok "a statement file for the wrong round is refused (round_mismatch)"; else not_ok "a statement file for the wrong round is refused (round_mismatch)"; fi
check "and it is logged with the header's round" 1 "$(grep -c 'commitments/off-by-one.json refused (round_mismatch).*round_index 6, not 7' "$LOG")"
check "round 6 keeps its trust, and nothing is an equivocation" "true 0" "$(field "$H6" .trusted) $(alert equivocation)"
check "a token post for the wrong round: 422 round_mismatch" "422 round_mismatch" \
	"$(post '/roundclose' "{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":3,\"global_model_hash\":\"$H6\"}" -H "$(auth)" -o "$WORK/rm.out" -w '%{http_code}') $(jq -r .error.code "$WORK/rm.out")"

# --- a signed post is recorded whole (with its statement), or not at all --------
H30=3030303030303030303030303030303030303030303030303030303030303030
envelope "$PT_RC" "$(rc_stmt . 30 "$H30")" coord > "$WORK/rc30.json"
audited() { get /commitments | jq --arg h "$H30" '[.commitments[] | select(.global_model_hash == $h)] | length'; }
post30() { code POST /roundclose -H 'Content-Type: application/json' --data-binary @"$WORK/rc30.json"; }
if command -v sqlite3 > /dev/null 2>&1; then
	stop_daemon
	# The statement's row cannot be written, as on a full disk.
	sqlite3 "$STATE/state.db" "CREATE TRIGGER full BEFORE INSERT ON statements
		BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;"
	[ -n "$RUN_AS" ] && chown -R "$RUN_AS" "$STATE"
	start_daemon
	check "a signed post whose statement cannot be stored: 503" 503 "$(post30)"
	check "nothing of it is recorded or shown" "0 0" \
		"$(audited) $(grep -c "commitment recorded: run . round 30" "$LOG")"
	stop_daemon
	sqlite3 "$STATE/state.db" "DROP TRIGGER full;"
	[ -n "$RUN_AS" ] && chown -R "$RUN_AS" "$STATE"
	start_daemon
	check "nor after a restart" 0 "$(audited)"
	check "posted again: 201" 201 "$(post30)"
	check "recorded now" 1 "$(audited)"
	stop_daemon
	start_daemon
	check "and its statement is remembered: the same again is 200" "200 1" "$(post30) $(audited)"
else
	echo "# SKIP: no sqlite3; a post whose statement cannot be stored is not checked"
fi

# --- before the first scan: try again, not a refusal ---------------------------
# A coordinator that takes a 4xx for final would drop a good commitment.
stop_daemon
mv "$STORE" "$WORK/away"
# The store's return is seen by the next rescan.
write_conf "trusted_keys = $WORK/keys" "token_file = $WORK/token" "rescan_interval = 1"
launch_daemon
check "before the first scan, a token post is 503 not_ready" "503 not_ready" \
	"$(post /roundclose "$(cat "$WORK/rc5-coord.json")" -o "$WORK/nr.out" -w '%{http_code}') $(jq -r .error.code "$WORK/nr.out")"
check "and so is a withdrawal" 503 \
	"$(code DELETE "/commitment?run=.&round=4&hash=$H5B" -H "$(auth)")"
mv "$WORK/away" "$STORE"
wait_ready
check "once ready, the same post is 200" 200 \
	"$(code POST /roundclose -H 'Content-Type: application/json' --data-binary @"$WORK/rc5-coord.json")"

finish
