#!/bin/sh
# Lineage and commitments: store-basic as expected.json says, then
# scenario stores for a fork, a missing round, a tampered round, a
# rewritten ledger record, an orphan round, a --local-only detached root,
# a ledger appended to while running, and a pinned genesis.
. "$top_srcdir/tests/integration/lib.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
EXP="$DATA/store-basic/expected.json"
H0=859245c72641256e051ead98898edc989faac09b4dcb35ec0fa3c346bf4f7645
H1=24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b368744915
H2=c3eaa23b9433b29ff174122f7aafdeff518f944e32c6123f2d83340ebb81d1c5
H3=0a180a891c6e40afe74b71a0f047a2f08ff387a88554a40a2460f72d55fea8b7
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
write_conf "rescan_interval = 3600"
start_daemon
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"
alert() { metric "integrity_alerts{kind=\"$1\"}"; }
field() { get "/artifact/$1" | jq -r "$2"; }

# --- store-basic against its expected.json ----------------------------------
for h in $(jq -r '.artifacts | keys[]' "$EXP"); do
	want=$(jq -c --arg h "$h" '.artifacts[$h] | [.state, .chain, .committed, .trusted]' "$EXP")
	got=$(get "/artifact/$h" | jq -c '[.state, .chain.status, (.commitment.matches // false), .trusted]')
	check "store-basic ${h%????????????????????????????????????????????????????????} is as expected" "$want" "$got"
done
check "the committed head is as expected" "$(jq -c .committed_head "$EXP")" \
	"$(get /chain | jq -c '.committed_head | {round_index, content_hash}')"
check "no alerts, as expected" 0 "$(get /metrics | awk '/^lensemble_verifyd_integrity_alerts/ { s += $2 } END { print s }')"
check "committed_head_round metric" 4 "$(metric committed_head_round)"
check "round 4's commitment comes from the ledger" "ledger ledger.jsonl 3 true" \
	"$(field "$H4" '"\(.commitment.source) \(.commitment.where) \(.commitment.round_index) \(.commitment.matches)"')"
check "round 4's chain has length 5 and round 0 as root" "5 $H0" "$(field "$H4" '"\(.chain.length) \(.chain.root)"')"
check "the ledger is valid with 4 records" "true 4" "$(get /chain | jq -r '.ledgers[0] | "\(.chain_valid) \(.records)"')"

# --- an orphan round: written, never committed (the ledger append was lost) --
"$MKART" --round 5 --parent "$H4" --seed 5 "$STORE/round-00005" > "$WORK/h5"; readable "$STORE/round-00005"
H5=$(cat "$WORK/h5")
verified5() { [ "$(state_of "$H5")" = verified ]; }
wait_for $((3 * SLOW)) verified5 > /dev/null
check "an orphan round verifies with an intact chain" "verified intact" "$(field "$H5" '"\(.state) \(.chain.status)"')"
check "but is not committed and not trusted" "null false" "$(field "$H5" '"\(.commitment) \(.trusted)"')"
check "the committed head stays at round 4" 4 "$(get /chain | jq .committed_head.round_index)"
check "the run lists round 5 as a head" "$H5" "$(get /chain | jq -r '.runs[0].heads[0].content_hash')"

# --- the ledger appended to while the daemon runs ---------------------------
last=$(tail -n 1 "$STORE/ledger.jsonl")
prev=$("$top_builddir/lensemble-verify" --ledger --json "$STORE/ledger.jsonl" > /dev/null; printf '%s' "$last" |
	awk '{ print }' > "$WORK/last"; printf 'lensemble/provenance/ledger-record/v1\000' > "$WORK/pre";
	jq -cS . "$WORK/last" | tr -d '\n' >> "$WORK/pre"; sha256sum "$WORK/pre" | cut -d' ' -f1)
printf '{"schema_version":1,"round_index":4,"participants":["site-a","site-b"],"dataset_roots":{"site-a":"%064d","site-b":"%064d"},"global_model_hash":"%s","prev_record_hash":"%s"}\n' 1 2 "$H5" "$prev" >> "$STORE/ledger.jsonl"
trusted5() { [ "$(field "$H5" .trusted)" = true ]; }
if wait_for $((3 * SLOW)) trusted5 > /dev/null; then ok "a record appended to the ledger commits round 5"; else not_ok "a record appended to the ledger commits round 5"; fi
check "the ledger chain stays valid" "true 5" "$(get /chain | jq -r '.ledgers[0] | "\(.chain_valid) \(.records)"')"
check "the committed head moves to round 5" "5 $H5" "$(get /chain | jq -r '"\(.committed_head.round_index) \(.committed_head.content_hash)"')"

# --- a fork: two verified artifacts with one parent --------------------------
"$MKART" --round 6 --parent "$H5" --seed 61 "$STORE/round-00006-a" > "$WORK/h6a"
"$MKART" --round 6 --parent "$H5" --seed 62 "$STORE/round-00006-b" > "$WORK/h6b"
readable "$STORE"
forked() { [ "$(alert fork)" = 1 ]; }
if wait_for $((3 * SLOW)) forked > /dev/null; then ok "a fork raises the fork alert"; else not_ok "a fork raises the fork alert"; fi
check "GET /chain lists the fork" "$H5 2" "$(get /chain | jq -r '.forks[0] | "\(.parent) \(.children | length)"')"
check "the fork is logged once" 1 "$(grep -c "alert raised: fork: 2 verified artifacts name $H5" "$LOG")"
rm -rf "$STORE/round-00006-b"
unforked() { [ "$(alert fork)" = 0 ]; }
if wait_for $((3 * SLOW)) unforked > /dev/null; then ok "removing one side clears the fork"; else not_ok "removing one side clears the fork"; fi
check "and the clearing is logged once" 1 "$(grep -c "alert cleared: fork: $H5" "$LOG")"
rm -rf "$STORE/round-00006-a"
# Its verified chain above round 2 would count below.
gone6a() { [ "$(code GET "/artifact/$(cat "$WORK/h6a")")" = 404 ]; }
if wait_for $((3 * SLOW)) gone6a > /dev/null; then ok "a removed artifact is forgotten"; else not_ok "a removed artifact is forgotten"; fi

# --- a tampered round: its descendants' chains break at it ------------------
w="$STORE/round-00002/weights.safetensors"
cp "$w" "$WORK/w2"
printf '\377' | dd of="$w" bs=1 seek=300 conv=notrunc 2>/dev/null
failed2() { [ "$(state_of "$H2")" = failed ]; }
wait_for $((3 * SLOW)) failed2 > /dev/null
check "round 3's chain is broken by its failed parent" "broken parent_failed $H3" \
	"$(field "$H3" '"\(.chain.status) \(.chain.breaks[0].reason) \(.chain.breaks[0].content_hash)"')"
check "round 4 inherits the break" "broken parent_failed false" \
	"$(field "$H4" '"\(.chain.status) \(.chain.breaks[0].reason) \(.trusted)"')"
check "chain_broken counts the verified artifacts above the break" 3 "$(alert chain_broken)"
check "artifact_failed is raised" 1 "$(alert artifact_failed)"
check "the committed head falls back to round 1" 1 "$(get /chain | jq .committed_head.round_index)"
cp "$WORK/w2" "$w"
healed() { [ "$(field "$H4" .trusted)" = true ]; }
if wait_for $((3 * SLOW)) healed > /dev/null; then ok "restored bytes restore the chain"; else not_ok "restored bytes restore the chain"; fi
check "and clear chain_broken" 0 "$(alert chain_broken)"

# --- a missing round ---------------------------------------------------------
# Round 2 was verified and committed: removed, it stays in its children's
# chains as a pruned link (retention), never a break.
mv "$STORE/round-00002" "$WORK/round-00002"
pruned() { [ "$(field "$H3" '.chain.pruned')" = 1 ]; }
if wait_for $((3 * SLOW)) pruned > /dev/null; then ok "a removed committed round is a pruned link of its child's chain"; else not_ok "a removed committed round is a pruned link of its child's chain"; fi
check "round 3 stays trusted" "true intact" "$(field "$H3" '"\(.trusted) \(.chain.status)"')"
mv "$WORK/round-00002" "$STORE/round-00002"
back2() { [ "$(state_of "$H2")" = verified ] && [ "$(field "$H3" '.chain.pruned')" = 0 ]; }
wait_for $((3 * SLOW)) back2 > /dev/null || not_ok "round 2 is back in its child's chain"

# --- a --local-only control run: parent null at round > 0 --------------------
mkdir -p "$STORE/local-run"
"$MKART" --round 3 --seed 33 "$STORE/local-run/round-00003" > "$WORK/hl"; readable "$STORE/local-run"
HL=$(cat "$WORK/hl")
# The break is known from the header alone; the verdict needs the hash.
detached() { [ "$(field "$HL" '"\(.state) \(.chain.breaks[0].reason)"')" = "verified detached_root" ]; }
if wait_for $((3 * SLOW)) detached > /dev/null; then ok "a detached root is reported (detached_root)"; else not_ok "a detached root is reported"; fi
check "it is verified but not trusted" "verified broken false" "$(field "$HL" '"\(.state) \(.chain.status) \(.trusted)"')"
check "its run is listed" true "$(get /chain | jq '[.runs[].run] | index("local-run") != null')"

# --- a rewritten ledger record ----------------------------------------------
cp "$STORE/ledger.jsonl" "$WORK/ledger.good"
# Record 2 (round 1, committing round 2) rewritten to name round 3's hash.
sed -i "2s/$H2/$H3/" "$STORE/ledger.jsonl"
broken() { [ "$(get /chain | jq -r '.ledgers[0].chain_valid')" = false ]; }
if wait_for $((3 * SLOW)) broken > /dev/null; then ok "a rewritten record breaks the ledger chain"; else not_ok "a rewritten record breaks the ledger chain"; fi
check "the first break is at the next line" "3 prev_hash_mismatch 2" \
	"$(get /chain | jq -r '.ledgers[0] | "\(.first_break.line) \(.first_break.reason) \(.suspect_line)"')"
check "ledger_broken is raised" 1 "$(alert ledger_broken)"
# The records read before stay remembered: the rewrite is flagged, and the
# round it names two hashes for is an equivocation, trusted no more.
check "ledger_rewritten is raised" 1 "$(alert ledger_rewritten)"
check "/chain says where the file departs from what was seen" "true $(grep -c . "$WORK/ledger.good")" \
	"$(get /chain | jq -r '.ledgers[0] | "\(.rewritten) \(.remembered_records)"')"
check "round 2 is now under equivocation, not trusted" "false false true" \
	"$(field "$H2" '"\(.trusted) \(.commitment.matches) \(.commitment.equivocation)"')"
check "the equivocation is raised" 1 "$(alert equivocation)"
check "the remembered records still commit round 4" true "$(field "$H4" .trusted)"
cp "$WORK/ledger.good" "$STORE/ledger.jsonl"
fixed() { [ "$(alert ledger_broken)" = 0 ] && [ "$(alert ledger_rewritten)" = 0 ] && [ "$(field "$H2" .trusted)" = true ]; }
if wait_for $((3 * SLOW)) fixed > /dev/null; then ok "the restored ledger clears the alerts"; else not_ok "the restored ledger clears the alerts"; fi
stop_daemon

# --- a pinned genesis -------------------------------------------------------
write_conf "genesis_hash = $H0"
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null
check "a pinned genesis makes round 0 trusted" "true pinned config" \
	"$(field "$H0" '"\(.trusted) \(.commitment.source) \(.commitment.where)"')"
stop_daemon
write_conf "genesis_hash = $(printf '%064d' 7)"
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null
check "another pinned genesis: round 0 is contradicted" "false commitment_mismatch" \
	"$(field "$H0" '"\(.trusted) \(.chain.breaks[0].reason)"')"
check "and every descendant's chain breaks there" "false commitment_mismatch $H0" \
	"$(field "$H4" '"\(.trusted) \(.chain.breaks[0].reason) \(.chain.breaks[0].content_hash)"')"
finish
