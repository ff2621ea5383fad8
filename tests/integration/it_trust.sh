#!/bin/sh
# Trust anchors (trust.md): under commitment_policy = signed, a writer of
# the store without a trusted key cannot make a model trusted. Every
# forgery below is one a store writer or a network client can try; each
# must be refused, while every signed path commits. Envelopes are made
# with the openssl command line, not with the project's signer.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/trust.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
H0=859245c72641256e051ead98898edc989faac09b4dcb35ec0fa3c346bf4f7645
H1=24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b368744915
H2=c3eaa23b9433b29ff174122f7aafdeff518f944e32c6123f2d83340ebb81d1c5
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
TOKEN=lensemble-operator-token-0123456789
printf '%s\n' "$TOKEN" > "$WORK/token"
chmod 644 "$WORK/token"
keygen coord
keygen other
mkdir -p "$WORK/keys"
cp "$WORK/coord.pub" "$WORK/keys/"
printf 'not a key\n' > "$WORK/keys/broken.pub"
chmod -R a+rX "$WORK/keys"
COORD=$(keyid "$WORK/coord.pub")

write_conf "trusted_keys = $WORK/keys" "token_file = $WORK/token" "rescan_interval = 3600"

# --- the configuration check --------------------------------------------------
"$DAEMON" -t -c "$CONF" > "$WORK/t.out" 2> "$WORK/t.err"
check "-t accepts a key directory with one bad file" 0 "$?"
check "-t names the bad key file" 1 "$(grep -c 'broken.pub' "$WORK/t.err")"
check "-t reports the policy and the keys" 1 "$(grep -c '^commitment policy signed; 1 trusted key(s)$' "$WORK/t.out")"
sed "s|^trusted_keys = .*|trusted_keys = $WORK/no-such-dir|" "$CONF" > "$WORK/bad.conf"
"$DAEMON" -t -c "$WORK/bad.conf" > /dev/null 2> "$WORK/t.err"
check "-t refuses a key directory that cannot be read" 1 "$?"
check "saying which" 1 "$(grep -c 'no-such-dir' "$WORK/t.err")"

start_daemon
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"
alert() { metric "integrity_alerts{kind=\"$1\"}"; }
field() { get "/artifact/$1" | jq -r "$2"; }
check "the policy in force is logged" 1 "$(grep -c 'commitment policy signed; 1 trusted key' "$LOG")"
check "the bad key file is logged with its name" 1 "$(grep -c 'broken.pub' "$LOG")"

# --- unsigned ledger records are shown but commit nothing ----------------------
check "an unsigned ledger record commits nothing under signed" "false ledger false" \
	"$(field "$H4" '"\(.trusted) \(.commitment.source) \(.commitment.signed)"')"
check "it is counted as an unsigned ledger commitment" 4 "$(metric 'commitments{source="ledger",signed="false"}')"
check "no committed head" null "$(get /chain | jq -c .committed_head)"

# --- the coordinator signs the ledger: records 1..4 commit ---------------------
mkdir -p "$STORE/commitments"
envelope "$PT_CP" "$(cp_stmt . 4 "$(head_of "$STORE/ledger.jsonl")")" coord > "$STORE/commitments/ledger-4.json"
readable "$STORE"
trusted4() { [ "$(field "$H4" .trusted)" = true ]; }
if wait_for $((5 * SLOW)) trusted4 > /dev/null; then ok "a signed checkpoint commits the ledger's records"; else not_ok "a signed checkpoint commits the ledger's records"; fi
check "the commitment shows the signature and the key" "ledger true $COORD" \
	"$(field "$H4" '"\(.commitment.source) \(.commitment.signed) \(.commitment.key_id)"')"
check "rounds 1 to 4 are signed ledger commitments" 4 "$(metric 'commitments{source="ledger",signed="true"}')"
check "the committed head is round 4" "4 $H4" "$(get /chain | jq -r '.committed_head | "\(.round_index) \(.content_hash)"')"
check "the commitments directory is no artifact" 0 "$(get /artifacts | jq '[.artifacts[].copies[].path | select(startswith("commitments"))] | length')"

# --- forgery: a correctly chained record appended, with a new round ----------
"$MKART" --round 5 --parent "$H4" --seed 5 "$STORE/round-00005" > "$WORK/h5"; readable "$STORE/round-00005"
H5=$(cat "$WORK/h5")
append_record "$STORE/ledger.jsonl" 4 "$H5"
seen5() { [ "$(field "$H5" .state)" = verified ] && [ "$(get /chain | jq -r '.ledgers[0].records')" = 5 ]; }
wait_for $((5 * SLOW)) seen5 > /dev/null || not_ok "round 5 and the appended record are seen"
check "the appended record keeps the ledger chain valid" true "$(get /chain | jq -r '.ledgers[0].chain_valid')"
check "an appended, chained record without a key makes nothing trusted" "false ledger false" \
	"$(field "$H5" '"\(.trusted) \(.commitment.source) \(.commitment.signed)"')"
check "the committed head does not move" 4 "$(metric committed_head_round)"

# --- forgery: a grafted run committing a child of the real head --------------
mkdir -p "$STORE/evil"
"$MKART" --round 5 --parent "$H4" --seed 55 "$STORE/evil/round-00005" > "$WORK/he"
HE=$(cat "$WORK/he")
jq -cn --arg h "$HE" '{schema_version: 1, round_index: 4, participants: [], dataset_roots: {}, global_model_hash: $h, prev_record_hash: null}' > "$STORE/evil/ledger.jsonl"
readable "$STORE/evil"
seenE() { [ "$(field "$HE" .state)" = verified ]; }
wait_for $((5 * SLOW)) seenE > /dev/null || not_ok "the grafted round is seen"
check "a grafted run's round is not trusted" false "$(field "$HE" .trusted)"
check "its chain may not cross into another run (cross_run)" "broken cross_run" \
	"$(field "$HE" '"\(.chain.status) \(.chain.breaks[0].reason)"')"
# The ledger may be read while jq is still writing it: wait for its last state.
evil_ledger() { get /chain | jq -r '.ledgers[] | select(.path == "evil/ledger.jsonl") | "\(.records) \(.chain_valid) \(.first_break.reason)"'; }
evil_read() { [ "$(evil_ledger)" = "1 false first_record_not_round_0" ]; }
wait_for $((5 * SLOW)) evil_read > /dev/null
check "a ledger that does not begin at round 0 commits nothing" "1 false first_record_not_round_0" "$(evil_ledger)"
check "the committed head stays in the real run" ". $H4" "$(get /chain | jq -r '.committed_head | "\(.run) \(.content_hash)"')"
# Even with the real history copied beside it, the graft's statements are
# the real run's: they commit nothing in another run.
cp "$STORE/ledger.jsonl" "$STORE/evil/ledger.jsonl"
mkdir -p "$STORE/evil/commitments"
cp "$STORE/commitments/ledger-4.json" "$STORE/evil/commitments/"
sed -i "5s/$H5/$HE/" "$STORE/evil/ledger.jsonl"
readable "$STORE/evil"
wrongrun() { [ "$(metric 'envelopes_rejected_total{reason="wrong_run"}')" -ge 1 ] &&
	[ "$(field "$HE" .commitment.source)" = ledger ]; }
if wait_for $((5 * SLOW)) wrongrun > /dev/null; then ok "a statement copied into another run is refused (wrong_run)"; else not_ok "a statement copied into another run is refused"; fi
check "the graft is still not trusted" false "$(field "$HE" .trusted)"

# --- forgery: envelopes by an unknown key, or with the payload swapped -------
envelope "$PT_RC" "$(rc_stmt . 4 "$H5")" other > "$STORE/commitments/forged.json"
readable "$STORE/commitments"
unknown() { [ "$(metric 'envelopes_rejected_total{reason="unknown_key"}')" -ge 1 ]; }
if wait_for $((5 * SLOW)) unknown > /dev/null; then ok "an envelope by an unknown key is refused (unknown_key)"; else not_ok "an envelope by an unknown key is refused"; fi
check "and commits nothing" false "$(field "$H5" .trusted)"
check "POSTed, it is 403 forbidden" 403 "$(code POST /roundclose -H 'Content-Type: application/json' --data-binary @"$STORE/commitments/forged.json")"
envelope "$PT_RC" "$(rc_stmt . 0 "$H1")" coord > "$WORK/genuine.json"
jq -c --arg p "$(rc_stmt . 4 "$H5" | base64 -w0)" '.payload = $p' "$WORK/genuine.json" > "$STORE/commitments/swapped.json"
readable "$STORE/commitments"
swapped() { [ "$(metric 'envelopes_rejected_total{reason="bad_signature"}')" -ge 1 ]; }
if wait_for $((5 * SLOW)) swapped > /dev/null; then ok "a payload swapped after signing is refused (bad_signature)"; else not_ok "a payload swapped after signing is refused"; fi
check "and commits nothing" false "$(field "$H5" .trusted)"
check "POSTed, it is 403 forbidden" 403 "$(code POST /roundclose -H 'Content-Type: application/json' --data-binary @"$STORE/commitments/swapped.json")"
rm -f "$STORE/commitments/forged.json" "$STORE/commitments/swapped.json"
check "a malformed envelope POSTed is 400" 400 "$(code POST /roundclose -H 'Content-Type: application/json' -d '{"payloadType":"x","payload":"!!","signatures":[]}')"

# --- a statement for another round or another run commits nothing ------------
check "a signed statement for a run that is not the one posted to: 400" 400 \
	"$(code POST '/roundclose?run=evil' -H 'Content-Type: application/json' --data-binary "$(envelope "$PT_RC" "$(rc_stmt . 4 "$H5")" coord)")"
check "a signed statement for round 5 naming the round-5 artifact (round 5 commits round 6) is 422 round_mismatch" "422 round_mismatch" \
	"$(post /roundclose "$(envelope "$PT_RC" "$(rc_stmt . 5 "$H5")" coord)" -o "$WORK/rm.out" -w '%{http_code}') $(jq -r .error.code "$WORK/rm.out")"
check "and does not commit the round-5 artifact" false "$(field "$H5" .trusted)"

# --- a replayed statement changes nothing -------------------------------------
check "a signed RoundClose for an already committed round: 201 the first time" 201 \
	"$(code POST /roundclose -H 'Content-Type: application/json' --data-binary @"$WORK/genuine.json")"
check "replayed: 200, nothing new" 200 \
	"$(code POST /roundclose -H 'Content-Type: application/json' --data-binary @"$WORK/genuine.json")"

# --- the genuine signed RoundClose for round 4 commits round 5 -----------------
envelope "$PT_RC" "$(rc_stmt . 4 "$H5")" coord > "$WORK/rc4.json"
check "a signed RoundClose needs no token: 201" 201 \
	"$(post /roundclose "$(cat "$WORK/rc4.json")" -o "$WORK/rc.out" -w '%{http_code}')"
check "answered as signed by the key" "signed true $COORD" "$(jq -r '"\(.source) \(.signed) \(.key_id)"' "$WORK/rc.out")"
check "round 5 is now trusted, signed" "true signed true $COORD" \
	"$(field "$H5" '"\(.trusted) \(.commitment.source) \(.commitment.signed) \(.commitment.key_id)"')"
check "commitments{source=signed} counts it" 2 "$(metric 'commitments{source="signed",signed="true"}')"

# --- forgery: an artifact and its header replaced together --------------------
rm -rf "$STORE/round-00005"
"$MKART" --round 5 --parent "$H4" --seed 77 "$STORE/round-00005" > "$WORK/hx"; readable "$STORE/round-00005"
HX=$(cat "$WORK/hx")
seenX() { [ "$(field "$HX" .state)" = verified ]; }
wait_for $((5 * SLOW)) seenX > /dev/null || not_ok "the replaced round is seen"
check "a round replaced with a self-consistent artifact is not trusted" "false commitment_mismatch" \
	"$(field "$HX" '"\(.trusted) \(.chain.breaks[0].reason)"')"
check "commitment_mismatch is raised" 1 "$(alert commitment_mismatch)"
rm -rf "$STORE/round-00005"
"$MKART" --round 5 --parent "$H4" --seed 5 "$STORE/round-00005" > /dev/null; readable "$STORE/round-00005"
wait_for $((5 * SLOW)) seen5 > /dev/null

# --- forgery: the ledger truncated, then rewritten consistently ---------------
cp "$STORE/ledger.jsonl" "$WORK/ledger.good"
head -n 2 "$WORK/ledger.good" > "$STORE/ledger.jsonl"
rewritten() { [ "$(alert ledger_rewritten)" = 1 ]; }
if wait_for $((5 * SLOW)) rewritten > /dev/null; then ok "a truncated ledger raises ledger_rewritten"; else not_ok "a truncated ledger raises ledger_rewritten"; fi
check "the remembered records still commit: the head does not move back" "5 true true" \
	"$(metric committed_head_round) $(field "$H2" .trusted) $(field "$H4" .trusted)"
check "GET /chain shows the rewrite" "true 5" \
	"$(get /chain | jq -r '.ledgers[] | select(.path == "ledger.jsonl") | "\(.rewritten) \(.remembered_records)"')"
stop_daemon
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null
check "ledger_rewritten is kept over a restart" 1 "$(alert ledger_rewritten)"
check "and so are the remembered commitments" true "$(field "$H4" .trusted)"
cp "$WORK/ledger.good" "$STORE/ledger.jsonl"
cleared() { [ "$(alert ledger_rewritten)" = 0 ]; }
if wait_for $((5 * SLOW)) cleared > /dev/null; then ok "the restored ledger clears ledger_rewritten"; else not_ok "the restored ledger clears ledger_rewritten"; fi

# A consistent rewrite: record 2 names another hash, every later record
# re-chained, a fresh checkpoint signed by a key the daemon does not trust.
"$MKART" --round 2 --parent "$H1" --seed 222 "$STORE/round-00002b" > "$WORK/h2b"; readable "$STORE/round-00002b"
H2B=$(cat "$WORK/h2b")
head -n 1 "$WORK/ledger.good" > "$STORE/ledger.new"
sed -n 2p "$WORK/ledger.good" | jq -c --arg h "$H2B" --arg p "$(head_of "$STORE/ledger.new")" \
	'.global_model_hash = $h | .prev_record_hash = $p' >> "$STORE/ledger.new"
for n in 3 4 5; do
	sed -n "${n}p" "$WORK/ledger.good" | jq -c --arg p "$(head_of "$STORE/ledger.new")" '.prev_record_hash = $p' >> "$STORE/ledger.new"
done
mv "$STORE/ledger.new" "$STORE/ledger.jsonl"
readable "$STORE"
rewritten2() { [ "$(alert ledger_rewritten)" = 1 ] && [ "$(field "$H2B" .state)" = verified ]; }
if wait_for $((5 * SLOW)) rewritten2 > /dev/null; then ok "a consistent rewrite raises ledger_rewritten"; else not_ok "a consistent rewrite raises ledger_rewritten"; fi
check "the rewritten ledger's chain is valid on its own" true \
	"$(get /chain | jq -r '.ledgers[] | select(.path == "ledger.jsonl") | .chain_valid')"
check "the hash it names instead is not trusted" false "$(field "$H2B" .trusted)"
check "an unsigned record is no commitment under signed: no equivocation" 0 "$(alert equivocation)"
check "and the signed round keeps its trust" true "$(field "$H2" .trusted)"
check "the rewrite's first differing line is logged" 1 "$(grep -c 'ledger.jsonl was rewritten: line 2' "$LOG")"
check "DELETE /ledger needs the operator token" 401 "$(code DELETE '/ledger?path=ledger.jsonl')"
check "DELETE /ledger of an unknown ledger: 404" 404 \
	"$(code DELETE '/ledger?path=nowhere/ledger.jsonl' -H "Authorization: Bearer $TOKEN")"
cp "$WORK/ledger.good" "$STORE/ledger.jsonl"
wait_for $((5 * SLOW)) cleared > /dev/null || not_ok "the restored ledger clears ledger_rewritten again"
rm -rf "$STORE/round-00002b"

# --- key rotation over SIGHUP ----------------------------------------------------
keygen next
NEXT=$(keyid "$WORK/next.pub")
cp "$WORK/next.pub" "$WORK/keys/"; chmod a+r "$WORK/keys/next.pub"
kill -HUP "$DPID"
envelope "$PT_CP" "$(cp_stmt . 5 "$(head_of "$STORE/ledger.jsonl")")" next > "$STORE/commitments/ledger-5.json"
readable "$STORE/commitments"
both() { [ "$(field "$H5" .commitment.key_id)" = "$NEXT" ] || [ "$(get /chain | jq '[.commitments[] | select(.key_id == "'"$NEXT"'")] | length')" -ge 5 ]; }
if wait_for $((5 * SLOW)) both > /dev/null; then ok "with two keys trusted, the new key's checkpoint counts"; else not_ok "with two keys trusted, the new key's checkpoint counts"; fi
rm -f "$WORK/keys/coord.pub"
kill -HUP "$DPID"
# The new key's checkpoint named H2 before this reload: wait for the reload's
# own effects, the old key's statements refused once the scan it starts is merged.
refused4() { grep -c 'signed statement commitments/ledger-4.json refused (unknown_key)' "$LOG"; }
rotated() { [ "$(field "$H2" .commitment.key_id)" = "$NEXT" ] &&
	[ "$(metric 'commitments{source="signed",signed="true"}')" = 0 ] && [ "$(refused4)" -ge 1 ]; }
if wait_for $((5 * SLOW)) rotated > /dev/null; then ok "after the old key is removed, the new key's signature stands"; else not_ok "after the old key is removed, the new key's signature stands"; fi
check "rounds 1 to 5 stay trusted" "true true" "$(field "$H1" .trusted) $(field "$H5" .trusted)"
check "the old key's signed RoundClose posts stop counting" 0 "$(metric 'commitments{source="signed",signed="true"}')"
check "the old key's checkpoint is refused, once" 1 "$(refused4)"
kill -HUP "$DPID"
still() { grep -q 'signed statement commitments/ledger-4.json still refused' "$LOG"; }
wait_for $((5 * SLOW)) still > /dev/null || not_ok "the old checkpoint is read again after another reload"
check "and not warned about again at the next reload" 1 "$(refused4)"
rm -f "$STORE/commitments/ledger-5.json"
gone() { grep -q 'signed statement commitments/ledger-5.json is gone' "$LOG"; }
wait_for $((5 * SLOW)) gone > /dev/null || not_ok "the removed statement file is noticed"
check "a statement file removed keeps what it committed" true "$(field "$H4" .trusted)"
check "the operator withdraws it: 200" 200 \
	"$(code DELETE "/commitment?run=.&round=3&hash=$H4&reason=rotation" -H "Authorization: Bearer $TOKEN")"
revoked() { [ "$(field "$H4" .trusted)" = false ]; }
if wait_for $((5 * SLOW)) revoked > /dev/null; then ok "what the operator withdrew stops counting"; else not_ok "what the operator withdrew stops counting"; fi

# --- the operator forgets a ledger's memory ---------------------------------------
check "DELETE /ledger with the token: 200" 200 \
	"$(code DELETE '/ledger?path=ledger.jsonl' -H "Authorization: Bearer $TOKEN")"
relearned() { [ "$(get /chain | jq -r '.ledgers[] | select(.path == "ledger.jsonl") | .remembered_records')" = 5 ]; }
if wait_for $((5 * SLOW)) relearned > /dev/null; then ok "and it is re-learned from the file"; else not_ok "and it is re-learned from the file"; fi
finish
