#!/bin/sh
# Changes are scanned where they happen: a round appended as a coordinator
# appends it, a run renamed in, renamed again and removed, a tar renamed in
# and replaced by a FIFO, a statement file added and removed, a header.json
# removed. None of them makes the daemon walk the whole store, and a whole
# scan afterwards (SIGHUP) finds nothing they missed.
. "$top_srcdir/tests/integration/lib.sh"

CLI="$top_builddir/lensemble-verify"
"$MKART" --chain 6 "$STORE" > "$WORK/head"
H5=$(cat "$WORK/head")
H0=$("$CLI" --json "$STORE/round-00000" | jq -r .content_hash)
"$CLI" keygen "$WORK/coord" > /dev/null
mkdir -p "$WORK/keys"
cp "$WORK/coord.pub" "$WORK/keys/"
chmod -R a+rX "$WORK/keys"
"$CLI" sign-ledger --key "$WORK/coord.key" "$STORE/ledger.jsonl" > /dev/null
write_conf "trusted_keys = $WORK/keys" "genesis_hash = $H0" "rescan_interval = 3600"
start_daemon
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the run is verified"
check "round 5 is the committed head" 5 "$(metric committed_head_round)"
whole() { metric 'store_scans_total{scope="whole"}'; }
changes() { metric 'store_scans_total{scope="changes"}'; }
W0=$(whole)
C0=$(changes)
check "the start walked the whole store" 1 "$W0"

# --- a round appended: saved hidden, renamed into place, committed and signed ---
tmp="$STORE/.round-00006.tmp"
H6=$("$MKART" --round 6 --parent "$H5" --seed 66 --ledger "$STORE/ledger.jsonl" "$tmp")
mv "$tmp" "$STORE/round-00006"
"$CLI" sign-ledger --key "$WORK/coord.key" "$STORE/ledger.jsonl" > /dev/null
readable "$STORE"
head6() { [ "$(metric committed_head_round)" = 6 ]; }
if wait_for $((5 * SLOW)) head6 > /dev/null; then ok "an appended round becomes the committed head"; else not_ok "an appended round becomes the committed head"; fi
check "round 6 is trusted with its chain of 7" "true 7" "$(get "/artifact/$H6" | jq -r '"\(.trusted) \(.chain.length)"')"
check "scanned where it changed" 1 "$([ "$(changes)" -gt "$C0" ] && echo 1)"

# --- a run renamed in, then removed ---------------------------------------------
"$MKART" --chain 3 --seed 500 "$WORK/run-b" > "$WORK/hb"
HB2=$(cat "$WORK/hb")
readable "$WORK/run-b"
mv "$WORK/run-b" "$STORE/run-b"
# Its ledger is merged after its artifacts, in a later turn of the same scan.
found_b() { [ "$(state_of "$HB2")" = verified ] && [ "$(metric 'commitments{source="ledger",signed="false"}')" = 2 ]; }
if wait_for $((5 * SLOW)) found_b > /dev/null; then ok "a run renamed into the store is found and verified"; else not_ok "a run renamed into the store is found and verified"; fi
check "GET /chain?run=run-b lists its 3 rounds" "0 1 2" \
	"$(get '/chain?run=run-b' | jq -r '[.artifacts[].round_index] | join(" ")')"
check "its ledger is read" 2 "$(metric 'commitments{source="ledger",signed="false"}')"
# Renamed: found under its new name, and still watched there.
mv "$STORE/run-b" "$STORE/run-c"
moved_c() { [ "$(get "/artifact/$HB2" | jq -r '.copies[0].path')" = run-c/round-00002 ]; }
if wait_for $((5 * SLOW)) moved_c > /dev/null; then ok "a run renamed is found under its new name"; else not_ok "a run renamed is found under its new name"; fi
check "GET /chain?run=run-b lists nothing" 0 "$(get '/chain?run=run-b' | jq '.artifacts | length')"
"$MKART" --round 3 --parent "$HB2" --seed 503 "$WORK/b3" > "$WORK/hb3"
HB3=$(cat "$WORK/hb3")
readable "$WORK/b3"
mv "$WORK/b3" "$STORE/run-c/round-00003"
found_b3() { [ "$(state_of "$HB3")" = verified ]; }
if wait_for $((5 * SLOW)) found_b3 > /dev/null; then ok "a round added to the renamed run is seen (its directory is still watched)"; else not_ok "a round added to the renamed run is seen"; fi
rm -rf "$STORE/run-c"
# rm -r is not atomic: wait for the whole run to be gone.
gone_b() { [ "$(code GET "/artifact/$HB2")" = 404 ] && [ "$(code GET "/artifact/$HB3")" = 404 ] &&
	[ "$(get '/chain?run=run-c' | jq '.artifacts | length')" = 0 ]; }
if wait_for $((5 * SLOW)) gone_b > /dev/null; then ok "a removed run's artifacts are forgotten"; else not_ok "a removed run's artifacts are forgotten"; fi
check "and GET /chain?run=run-c lists nothing" 0 "$(get '/chain?run=run-c' | jq '.artifacts | length')"

# --- a tar renamed in, then replaced by a FIFO ------------------------------------
"$MKART" --round 7 --parent "$H6" --seed 77 "$WORK/x7" > "$WORK/h7"
H7=$(cat "$WORK/h7")
tar -C "$WORK/x7" -cf "$STORE/.x7.tar" header.json weights.safetensors
chmod a+r "$STORE/.x7.tar"
mv "$STORE/.x7.tar" "$STORE/x7.tar"
tar7() { [ "$(get "/artifact/$H7" | jq -r '"\(.state) \(.copies[0].kind)"')" = "verified tar" ]; }
if wait_for $((5 * SLOW)) tar7 > /dev/null; then ok "a tar renamed into the store is verified"; else not_ok "a tar renamed into the store is verified"; fi
rm "$STORE/x7.tar"
mkfifo "$STORE/x7.tar"
gone7() { [ "$(code GET "/artifact/$H7")" = 404 ]; }
if wait_for $((5 * SLOW)) gone7 > /dev/null; then ok "the tar replaced by a FIFO is forgotten"; else not_ok "the tar replaced by a FIFO is forgotten"; fi
rm "$STORE/x7.tar"

# --- a statement file added, then removed -----------------------------------------
signed() { metric 'commitments{source="signed",signed="true"}'; }
check "no signed RoundClose yet" 0 "$(signed)"
"$CLI" sign-roundclose --key "$WORK/coord.key" --run . --round 6 --hash "$H7" \
	-o "$STORE/commitments/rc-6.json" > /dev/null
chmod a+r "$STORE/commitments/rc-6.json"
signed1() { [ "$(signed)" = 1 ]; }
if wait_for $((5 * SLOW)) signed1 > /dev/null; then ok "a statement file added is read"; else not_ok "a statement file added is read"; fi
rm "$STORE/commitments/rc-6.json"
gone6() { grep -q 'signed statement commitments/rc-6.json is gone' "$LOG"; }
if wait_for $((5 * SLOW)) gone6 > /dev/null; then ok "a statement file removed is noticed"; else not_ok "a statement file removed is noticed"; fi
check "what it committed is remembered" 1 "$(signed)"
check "the checkpoint beside it stays" 1 "$(metric 'commitments{source="ledger",signed="true"}' | awk '{ print ($1 > 0) }')"

# --- a header.json removed: no longer an artifact ---------------------------------
"$MKART" --round 7 --parent "$H6" --seed 78 "$STORE/.d7" > "$WORK/d7"
D7=$(cat "$WORK/d7")
readable "$STORE/.d7"
mv "$STORE/.d7" "$STORE/d7"
found_d7() { [ "$(state_of "$D7")" = verified ]; }
wait_for $((5 * SLOW)) found_d7 > /dev/null || not_ok "d7 is verified"
# Renamed away, and a new directory made under its old name: that one is
# watched too, so files written into it in place are seen.
mv "$STORE/d7" "$STORE/d7.old"
mkdir "$STORE/d7"
chmod 755 "$STORE/d7"
moved_d7() { [ "$(get "/artifact/$D7" | jq -r '.copies[0].path')" = d7.old ]; }
wait_for $((5 * SLOW)) moved_d7 > /dev/null || not_ok "d7 renamed to d7.old is found there"
# Written once the new d7 is watched: a file touched in it until the
# daemon is told of it from there. (Files written before the watch is
# added are found too, by the scan that adds it: not what is tested.)
watched_d7() { touch "$STORE/d7/probe"; grep -q 'change in d7/probe' "$LOG"; }
wait_for $((5 * SLOW)) watched_d7 > /dev/null || not_ok "the new d7 is watched"
rm "$STORE/d7/probe"
"$MKART" --round 7 --parent "$H6" --seed 79 "$WORK/d8" > "$WORK/h8"
D8=$(cat "$WORK/h8")
cp "$WORK/d8/weights.safetensors" "$WORK/d8/header.json" "$STORE/d7/"
chmod a+r "$STORE/d7/weights.safetensors" "$STORE/d7/header.json"
found_d8() { [ "$(state_of "$D8")" = verified ]; }
if wait_for $((5 * SLOW)) found_d8 > /dev/null; then ok "files written in place into a new directory made under a renamed one's name are seen"; else not_ok "files written into a new directory under a renamed one's name are seen"; fi
check "and seen by its watch" 1 "$(grep -c -m 1 'change in d7/header.json' "$LOG")"
rm "$STORE/d7.old/header.json"
gone_d7() { [ "$(code GET "/artifact/$D7")" = 404 ]; }
if wait_for $((5 * SLOW)) gone_d7 > /dev/null; then ok "a directory whose header.json is removed is no longer an artifact"; else not_ok "a directory whose header.json is removed is no longer an artifact"; fi
rm -rf "$STORE/d7" "$STORE/d7.old"
gone_d8() { [ "$(code GET "/artifact/$D8")" = 404 ]; }
if wait_for $((5 * SLOW)) gone_d8 > /dev/null; then ok "both directories removed are forgotten"; else not_ok "both directories removed are forgotten"; fi

check "none of these walked the whole store" "$W0" "$(whole)"

# --- a whole scan afterwards finds nothing they missed ----------------------------
settled_all() { settled && [ "$(metric queue_depth)" = 0 ]; }
wait_for $((5 * SLOW)) settled_all > /dev/null || not_ok "everything settled"
snapshot() {
	{ get '/artifacts' | jq -c '[.artifacts[] | {content_hash, state, trusted, paths: [.copies[].path]}] | sort_by(.content_hash)'
	  get '/chain' | jq -c '[.runs[] | {run, committed_head}]'
	  get /metrics | grep -E '^lensemble_verifyd_(commitments|artifacts|unreadable_dirs|committed_head_round)[{ ]'
	} > "$1"
}
snapshot "$WORK/before"
kill -HUP "$DPID"
whole2() { [ "$(whole)" -gt "$W0" ] && settled_all; }
wait_for $((5 * SLOW)) whole2 > /dev/null || not_ok "SIGHUP walks the whole store"
# Begun is not done: once two scans more have begun, the whole one is merged.
scanned_through
wait_for $((5 * SLOW)) settled_all > /dev/null || not_ok "everything settled after the whole scan"
snapshot "$WORK/after"
if cmp -s "$WORK/before" "$WORK/after"; then
	ok "a whole scan agrees with what the scans of changes found"
else
	not_ok "a whole scan agrees with what the scans of changes found"
	diff "$WORK/before" "$WORK/after" | head -20
fi
finish
