#!/bin/sh
# Every route over every kind of commitment slot: one that holds only a
# hash a rewritten ledger noted, one withdrawn, one under equivocation,
# and a pruned round. A writer of the store once made the daemon dead on
# GET /artifact/<hash> of a round whose slot held only a noted hash, and,
# since the ledger memory outlives a restart, dead again at every GET.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/trust.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
H1=24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b368744915
H2=c3eaa23b9433b29ff174122f7aafdeff518f944e32c6123f2d83340ebb81d1c5
H3=0a180a891c6e40afe74b71a0f047a2f08ff387a88554a40a2460f72d55fea8b7
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
TOKEN=lensemble-operator-token-0123456789
printf '%s\n' "$TOKEN" > "$WORK/token"
chmod 644 "$WORK/token"
keygen coord
mkdir -p "$WORK/keys" "$STORE/commitments"
cp "$WORK/coord.pub" "$WORK/keys/"
chmod -R a+rX "$WORK/keys"
# Rounds 1 to 3 committed by a signed checkpoint; round 4 present, uncommitted.
head -n 3 "$DATA/store-basic/ledger.jsonl" > "$STORE/ledger.jsonl"
envelope "$PT_CP" "$(cp_stmt . 3 "$(head_of "$STORE/ledger.jsonl")")" coord > "$STORE/commitments/ledger-3.json"

write_conf "trusted_keys = $WORK/keys" "token_file = $WORK/token" "rescan_interval = 3600"
start_daemon
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store verified"
alert() { metric "integrity_alerts{kind=\"$1\"}"; }
field() { get "/artifact/$1" | jq -r "$2"; }
alive() { kill -0 "$DPID" 2>/dev/null && [ "$(code GET /healthz)" = 200 ]; }
check "rounds 1 to 3 trusted, round 4 not" "true false" "$(field "$H3" .trusted) $(field "$H4" .trusted)"

# The attack: record 1 changed, every record re-chained, and a chained
# record for round 3 naming round 4's hash appended; renamed into place.
rewrite() {
	: > "$STORE/ledger.new"
	n=0
	while IFS= read -r line; do
		if [ "$n" = 0 ]; then
			printf '%s\n' "$line" >> "$STORE/ledger.new"
		else
			[ "$n" = 1 ] && line=$(printf '%s' "$line" | jq -c '.participants = ["site-z"]')
			printf '%s' "$line" | jq -c --arg p "$(head_of "$STORE/ledger.new")" '.prev_record_hash = $p' >> "$STORE/ledger.new"
		fi
		n=$((n + 1))
	done < "$STORE/ledger.jsonl"
	append_record "$STORE/ledger.new" 3 "$H4"
	chmod a+r "$STORE/ledger.new"
	mv "$STORE/ledger.new" "$STORE/ledger.jsonl"
}
rewrite
rewritten() { [ "$(alert ledger_rewritten)" = 1 ]; }
if wait_for $((5 * SLOW)) rewritten > /dev/null; then ok "the rewrite raises ledger_rewritten"; else not_ok "the rewrite raises ledger_rewritten"; fi
check "GET /artifact of the round the rewrite names: 200" 200 "$(code GET "/artifact/$H4")"
check "and its /attestation answers" 200 "$(code GET "/artifact/$H4/attestation")"
check "the daemon is alive" 0 "$(alive; echo $?)"
check "under signed, the unsigned rewrite commits nothing and raises no equivocation" "false 0" \
	"$(field "$H4" .trusted) $(alert equivocation)"
check "and the signed rounds keep their trust" true "$(field "$H3" .trusted)"

# Under "ledger" the rewritten record counts: round 3's slot then holds a
# hash the rewrite noted beside the remembered ones.
sed -i 's/^commitment_policy = .*//' "$CONF"
echo "commitment_policy = ledger" >> "$CONF"
kill -HUP "$DPID"
reloaded() { [ "$(grep -c 'configuration reloaded' "$LOG")" -ge 1 ]; }
wait_for $((5 * SLOW)) reloaded > /dev/null || not_ok "the configuration is reloaded"
check "under ledger, GET /artifact of the noted-only round: 200" 200 "$(code GET "/artifact/$H4")"
check "its commitment has no source to show" "null false" \
	"$(field "$H4" '"\(.commitment.source) \(.commitment.matches)"')"
check "the daemon is alive" 0 "$(alive; echo $?)"

# Withdrawn: the operator withdraws round 1's record (round 2's artifact).
check "withdraw the record committing round 2: 200" 200 \
	"$(code DELETE "/commitment?run=.&round=1&hash=$H2&reason=test" -H "Authorization: Bearer $TOKEN")"
# Under equivocation: two signed statements for round 0.
H0=859245c72641256e051ead98898edc989faac09b4dcb35ec0fa3c346bf4f7645
"$MKART" --round 1 --parent "$H0" --seed 111 "$STORE/round-00001b" > "$WORK/h1b"
H1B=$(cat "$WORK/h1b")
envelope "$PT_RC" "$(rc_stmt . 0 "$H1B")" coord > "$STORE/commitments/rc0-b.json"
readable "$STORE"
equiv() { [ "$(alert equivocation)" -ge 1 ]; }
wait_for $((5 * SLOW)) equiv > /dev/null || not_ok "an equivocation on round 0"
# Pruned: a committed round's directory removed.
rm -rf "$STORE/round-00003"
pruned() { [ "$(get "/chain?run=." | jq '[.pruned[]?] | length')" -ge 1 ] || [ "$(code GET "/artifact/$H3")" = 404 ]; }
wait_for $((5 * SLOW)) pruned > /dev/null || not_ok "round 3 is pruned"

for policy in ledger signed; do
	sed -i 's/^commitment_policy = .*//' "$CONF"
	echo "commitment_policy = $policy" >> "$CONF"
	kill -HUP "$DPID"
	for h in "$H1" "$H1B" "$H2" "$H3" "$H4"; do
		for route in "/artifact/$h" "/artifact/$h/attestation"; do
			c=$(code GET "$route")
			case $c in 200|404) ;; *) not_ok "$policy: GET $route answered $c" ;; esac
		done
		c=$(code POST /verify?wait=0 -H 'Content-Type: application/json' -d "{\"content_hash\":\"$h\"}")
		case $c in 200|202|404) ;; *) not_ok "$policy: POST /verify of $h answered $c" ;; esac
	done
	for route in /chain "/chain?run=." /artifacts /commitments /alerts /metrics /readyz /key; do
		c=$(code GET "$route")
		case $c in 200|404|503) ;; *) not_ok "$policy: GET $route answered $c" ;; esac
	done
	get /chain | jq -e . > /dev/null || not_ok "$policy: /chain is JSON"
	curl -s --max-time $((2 * SLOW)) -o /dev/null -w '%{http_code}' "$(url /events)" > "$WORK/ev.code"
	check "$policy: GET /events opens" 200 "$(cat "$WORK/ev.code")"
	check "$policy: every route answered over every kind of slot, and the daemon is alive" 0 "$(alive; echo $?)"
done

# The memory outlives a restart: the same GETs again.
stop_daemon
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store verified after a restart"
check "after a restart, GET /artifact of round 4: 200" 200 "$(code GET "/artifact/$H4")"
check "and the daemon is alive" 0 "$(alive; echo $?)"

finish
