#!/bin/sh
# Long runs: old rounds removed to save space stay in their descendants'
# chains as pruned links (when they were verified and committed), over a
# restart too, and held to commitments made after they went; a removed
# round nobody committed still breaks the chain; a broken extra copy of a
# committed round raises its alert without breaking the chains through the
# good copy; the loop-stall histogram is exported.
. "$top_srcdir/tests/integration/lib.sh"

CLI="$top_builddir/lensemble-verify"
"$MKART" --chain 6 "$STORE" > "$WORK/head"
H5=$(cat "$WORK/head")
H0=$("$CLI" --json "$STORE/round-00000" | jq -r .content_hash)
H3=$("$CLI" --json "$STORE/round-00003" | jq -r .content_hash)
"$CLI" keygen "$WORK/coord" > /dev/null
mkdir -p "$WORK/keys"
cp "$WORK/coord.pub" "$WORK/keys/"
chmod -R a+rX "$WORK/keys"
"$CLI" sign-ledger --key "$WORK/coord.key" "$STORE/ledger.jsonl" > /dev/null
# Round 6 is written but never committed; round 7 builds on it.
"$MKART" --round 6 --parent "$H5" --seed 66 "$STORE/round-00006" > "$WORK/h6"
H6=$(cat "$WORK/h6")
"$MKART" --round 7 --parent "$H6" --seed 77 "$STORE/round-00007" > "$WORK/h7"
H7=$(cat "$WORK/h7")
printf 'operator-token-0123456789\n' > "$WORK/op.token"; chmod 644 "$WORK/op.token"
write_conf "trusted_keys = $WORK/keys" "genesis_hash = $H0" "rescan_interval = 3600" "token_file = $WORK/op.token"
start_daemon
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the run is verified"
alert() { metric "integrity_alerts{kind=\"$1\"}"; }
field() { get "/artifact/$1" | jq -r "$2"; }
check "round 5 is trusted, its chain of 6 intact" "true intact 6 0" \
	"$(field "$H5" '"\(.trusted) \(.chain.status) \(.chain.length) \(.chain.pruned)"')"

# --- pruning: rounds 0 to 2 removed -----------------------------------------------
rm -rf "$STORE/round-00000" "$STORE/round-00001" "$STORE/round-00002"
pruned() { [ "$(metric artifacts_pruned_total)" = 3 ]; }
if wait_for $((5 * SLOW)) pruned > /dev/null; then ok "removing three committed rounds counts them in artifacts_pruned_total"; else not_ok "removing three committed rounds counts them"; fi
check "round 5 stays trusted through three pruned links" "true intact 6 3 $H0" \
	"$(field "$H5" '"\(.trusted) \(.chain.status) \(.chain.length) \(.chain.pruned) \(.chain.root)"')"
check "round 3, now the oldest present, too" "true 3" "$(field "$H3" '"\(.trusted) \(.chain.pruned)"')"
check "pruning raises no alert" 0 "$(get /metrics | awk '/^lensemble_verifyd_integrity_alerts/ { s += $2 } END { print s }')"
check "it is logged at info" 3 "$(grep -c 'stays in its descendants. chains as a pruned link' "$LOG")"
check "the committed head stays at round 5" 5 "$(metric committed_head_round)"
check "GET /chain?run= shows the three pruned links in round order" "0 1 2 null $H0" \
	"$(get '/chain?run=.' | jq -r '"\([.pruned[].round_index] | join(" ")) \(.pruned[0].parent_hash) \(.pruned[1].parent_hash)"')"
check "... beside the artifacts still there" "3 4 5 6 7" \
	"$(get '/chain?run=.' | jq -r '[.artifacts[].round_index] | join(" ")')"
check "... a page shows the pruned links of its rounds only" "1 2|3" \
	"$(get '/chain?run=.&after=0&limit=1' | jq -r '"\([.pruned[].round_index] | join(" "))|\([.artifacts[].round_index] | join(" "))"')"
check "... and the next page none" "|4" \
	"$(get '/chain?run=.&after=3&limit=1' | jq -r '"\([.pruned[].round_index] | join(" "))|\([.artifacts[].round_index] | join(" "))"')"

# --- a pruned round contradicted later ----------------------------------------------
# The coordinator's key signs another hash for round 1 after round 1 was
# removed: the chains through the pruned link break there, as they would at
# the artifact itself; withdrawn by the operator, they mend. (The hash is
# one no artifact claims: naming an artifact of another round commits
# nothing.)
HX=5f2a6c1e0b9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f
"$CLI" sign-roundclose --key "$WORK/coord.key" --run . --round 0 --hash "$HX" \
	-o "$STORE/commitments/other-1.json" > /dev/null
broken1() { [ "$(field "$H5" '"\(.chain.status) \(.chain.breaks[0].reason) \(.chain.breaks[0].round_index)"')" = "broken commitment_mismatch 1" ]; }
if wait_for $((5 * SLOW)) broken1 > /dev/null; then ok "a signed RoundClose naming another hash for pruned round 1 breaks round 5's chain there"; else not_ok "a signed RoundClose naming another hash for pruned round 1 breaks round 5's chain"; fi
check "round 3 is no longer trusted; no round is the committed head" "false -1" \
	"$(field "$H3" .trusted) $(metric committed_head_round)"
rm "$STORE/commitments/other-1.json"
gone1() { grep -q 'signed statement commitments/other-1.json is gone' "$LOG"; }
wait_for $((5 * SLOW)) gone1 > /dev/null || not_ok "the removed statement file is noticed"
check "the statement's file removed, what it committed stays" "false" "$(field "$H3" .trusted)"
check "the operator withdraws it" 200 \
	"$(code DELETE "/commitment?run=.&round=0&hash=$HX" -H "Authorization: Bearer operator-token-0123456789")"
mended() { [ "$(field "$H5" '"\(.trusted) \(.chain.status)"')" = "true intact" ]; }
if wait_for $((5 * SLOW)) mended > /dev/null; then ok "the statement removed, the chain through the pruned links mends"; else not_ok "the statement removed, the chain mends"; fi
check "the committed head is round 5 again" 5 "$(metric committed_head_round)"

# --- a removed round nobody committed still breaks the chain -----------------------
check "round 7 is verified, its chain intact, not committed" "verified intact false" \
	"$(field "$H7" '"\(.state) \(.chain.status) \(.trusted)"')"
rm -rf "$STORE/round-00006"
gone6() { [ "$(field "$H7" '.chain.breaks[0].reason')" = missing_parent ]; }
if wait_for $((5 * SLOW)) gone6 > /dev/null; then ok "a removed uncommitted round breaks its child's chain (missing_parent)"; else not_ok "a removed uncommitted round breaks its child's chain"; fi
check "and is not counted as pruned" 3 "$(metric artifacts_pruned_total)"

# --- the memory of what was committed survives a restart ---------------------------
# Round 4 is removed while the daemon is stopped: pruned all the same.
stop_daemon
rm -rf "$STORE/round-00004"
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null
check "after a restart round 5 is still trusted through its pruned links" "true 4" \
	"$(field "$H5" '"\(.trusted) \(.chain.pruned)"')"
check "a round removed while the daemon was stopped is counted as pruned" 1 \
	"$(metric artifacts_pruned_total)"
check "... and logged once" 1 "$(grep -c 'round 4 (round-00004, .*stays in its descendants. chains as a pruned link' "$LOG")"

# --- one bad copy of a committed round does not break the chain --------------------
cp -r "$STORE/round-00003" "$STORE/round-00003-copy"
rm "$STORE/round-00003-copy/weights.safetensors"
mkfifo "$STORE/round-00003-copy/weights.safetensors"
readable "$STORE"
bad() { [ "$(alert artifact_failed)" = 1 ]; }
if wait_for $((5 * SLOW)) bad > /dev/null; then ok "a broken extra copy raises artifact_failed"; else not_ok "a broken extra copy raises artifact_failed"; fi
check "the hash is reported failed, its good copy trusted and the bad one not" "failed true false" \
	"$(field "$H3" '"\(.state) \(.copies[] | select(.path == "round-00003") | .trusted) \(.copies[] | select(.path == "round-00003-copy") | .trusted)"')"
check "rounds 4 and 5 keep their chains through the good copy" "true intact" \
	"$(field "$H5" '"\(.trusted) \(.chain.status)"')"
check "the committed head stays at round 5" 5 "$(metric committed_head_round)"
rm -rf "$STORE/round-00003"
nogood() { [ "$(field "$H5" '.chain.breaks[0].reason')" = parent_failed ]; }
if wait_for $((5 * SLOW)) nogood > /dev/null; then ok "with no good copy left the chain breaks (parent_failed)"; else not_ok "with no good copy left the chain breaks"; fi

# --- per-run pins, anchors and tokens ----------------------------------------------
# Two more runs beside the root's: run-b with its own warm start, run-c
# whose early rounds were never seen (only rounds 3 and 4 are present).
stop_daemon
"$MKART" --chain 3 --seed 500 "$STORE/run-b" > /dev/null
HB0=$("$CLI" --json "$STORE/run-b/round-00000" | jq -r .content_hash)
HB2=$("$CLI" --json "$STORE/run-b/round-00002" | jq -r .content_hash)
"$MKART" --chain 5 --seed 900 "$STORE/run-c" > "$WORK/hc4"
HC3=$("$CLI" --json "$STORE/run-c/round-00003" | jq -r .content_hash)
HC4=$(cat "$WORK/hc4")
rm -rf "$STORE/run-c/round-00000" "$STORE/run-c/round-00001" "$STORE/run-c/round-00002"
TOKEN_B=token-for-run-b-0123456789
printf '%s\n' "$TOKEN_B" > "$WORK/b.token"; chmod 644 "$WORK/b.token"
printf '%s\n' operator-token-0123456789 > "$WORK/op.token"; chmod 644 "$WORK/op.token"
readable "$STORE"
write_conf "trusted_keys = $WORK/keys" "genesis_hash = $H0, run-b:$HB0" "anchor = run-c:3:$HC3" \
	"run_token_file = run-b:$WORK/b.token" "token_file = $WORK/op.token" \
	"commitment_policy = ledger" "rescan_interval = 3600" "loop_stall_warn_ms = 20"
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null
check "a run's own pinned warm start is trusted" "true pinned" \
	"$(field "$HB0" '"\(.trusted) \(.commitment.source)"')"
check "and so is its ledger-committed round 2 (policy ledger)" true "$(field "$HB2" .trusted)"
check "an anchor makes a later round a trusted root" "true intact $HC3 pinned" \
	"$(field "$HC3" '"\(.trusted) \(.chain.status) \(.chain.root) \(.commitment.source)"')"
check "and its committed child trusted through it" "true 2" "$(field "$HC4" '"\(.trusted) \(.chain.length)"')"
rc_b() { printf '{"schema_version":2,"kind":"round_close","round_index":%s,"global_model_hash":"%s"}' "$1" "$2"; }
check "run-b's token commits for run-b" 201 \
	"$(code POST '/roundclose?run=run-b' -H "Authorization: Bearer $TOKEN_B" -H 'Content-Type: application/json' -d "$(rc_b 7 "$HX")")"
check "but not for another run" 401 \
	"$(code POST '/roundclose?run=run-c' -H "Authorization: Bearer $TOKEN_B" -H 'Content-Type: application/json' -d "$(rc_b 7 "$HB2")")"
check "nor for the store root" 401 \
	"$(code POST /roundclose -H "Authorization: Bearer $TOKEN_B" -H 'Content-Type: application/json' -d "$(rc_b 7 "$HB2")")"
check "while the operator token commits for run-b too" 200 \
	"$(code POST '/roundclose?run=run-b' -H "Authorization: Bearer operator-token-0123456789" -H 'Content-Type: application/json' -d "$(rc_b 7 "$HX")")"

# --- pagination ----------------------------------------------------------------------
check "GET /chain?run=run-b: rounds 0, 1 and 2" "0 1 2 null" \
	"$(get '/chain?run=run-b&limit=3' | jq -r '"\([.artifacts[].round_index] | map(tostring) | join(" ")) \(.next)"')"
check "limit 2 leaves a cursor to the rest" "0 1 1" \
	"$(get '/chain?run=run-b&limit=2' | jq -r '"\([.artifacts[].round_index] | map(tostring) | join(" ")) \(.next)"')"
check "after the cursor comes the rest" "2 null" \
	"$(get '/chain?run=run-b&limit=2&after=1' | jq -r '"\([.artifacts[].round_index] | map(tostring) | join(" ")) \(.next)"')"
check "with the run's committed head" "$HB2" "$(get '/chain?run=run-b' | jq -r .committed_head.content_hash)"
check "a bad limit is 400" 400 "$(code GET '/chain?run=run-b&limit=0')"
check "paging needs a run" 400 "$(code GET '/chain?limit=5')"
all=$(get /artifacts | jq -c '[.artifacts[].content_hash]')
paged=$(
	after=
	while :; do
		page=$(get "/artifacts?limit=4${after:+&after=$after}")
		echo "$page" | jq -c '.artifacts[].content_hash'
		after=$(echo "$page" | jq -r '.next // empty')
		[ -n "$after" ] || break
	done | jq -cs .)
check "GET /artifacts?limit= pages give the same list as one GET" "$all" "$paged"
check "a bad after is 400" 400 "$(code GET '/artifacts?limit=4&after=xyz')"

# --- the event loop's busy time per turn is exported -------------------------------
check "loop_stall_seconds is a histogram with samples" true \
	"$(get /metrics | awk '$1 == "lensemble_verifyd_loop_stall_seconds_count" { print ($2 > 0) ? "true" : "false" }')"

# A run of 6,000 rounds appearing at once (written hidden, then renamed
# into place, with its own warm start pinned) is merged in slices of a
# few thousand: turns of tens of milliseconds on any machine, each a
# stall logged with its length (over loop_stall_warn_ms, set to 20 above)
# and counted above 20 ms.
stalled() { grep -q 'warning: the event loop was busy for [0-9.]* ms in one turn' "$LOG"; }
reloaded() { [ "$(grep -c 'configuration reloaded' "$LOG")" -ge 1 ]; }
"$MKART" --chain 6000 --tensors 1 --bytes 64 "$STORE/.run-big" > /dev/null
HG0=$("$CLI" --json "$STORE/.run-big/round-00000" | jq -r .content_hash)
sed -i "s/^genesis_hash = .*/&, run-big:$HG0/" "$CONF"
kill -HUP "$DPID"
wait_for $((5 * SLOW)) reloaded > /dev/null || not_ok "the configuration is reloaded"
readable "$STORE/.run-big"
mv "$STORE/.run-big" "$STORE/run-big"
wait_for $((20 * SLOW)) stalled > /dev/null
ms=$(sed -n 's/.*warning: the event loop was busy for \([0-9.]*\) ms in one turn.*/\1/p' "$LOG" | tail -n 1)
check "a turn over 20 ms is logged with its length" true \
	"$(awk -v m="${ms:-0}" 'BEGIN { print (m >= 20) ? "true" : "false" }')"
long=$(get /metrics | awk '$1 == "lensemble_verifyd_loop_stall_seconds_count" { n = $2 }
	$1 == "lensemble_verifyd_loop_stall_seconds_bucket{le=\"0.02\"}" { le = $2 }
	END { print n - le }')
check "... and counted in loop_stall_seconds above 0.02" true \
	"$(awk -v l="${long:-0}" 'BEGIN { print (l > 0) ? "true" : "false" }')"
finish
