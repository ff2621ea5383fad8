#!/bin/sh
# A run directory the daemon cannot open (mode 000), then one it can list
# but not search (mode 444): its artifacts keep their verdicts and trust,
# nothing is swept, pruned, forgotten or alerted, its ledger is not taken
# for rewritten, the directory is one warning and one unreadable_dirs;
# readable again, everything resumes without hashing anything again. And
# --genesis-hash RUN:HEX on the command line pins that run's round 0.
. "$top_srcdir/tests/integration/lib.sh"

RUN=run-7
mkdir "$STORE/$RUN"
cp -r "$DATA/store-basic/." "$STORE/$RUN/"
rm -f "$STORE/$RUN/expected.json"
H0=859245c72641256e051ead98898edc989faac09b4dcb35ec0fa3c346bf4f7645
H1=24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b368744915
H2=c3eaa23b9433b29ff174122f7aafdeff518f944e32c6123f2d83340ebb81d1c5
H3=0a180a891c6e40afe74b71a0f047a2f08ff387a88554a40a2460f72d55fea8b7
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
ALL="$H0 $H1 $H2 $H3 $H4"

settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
alerts() { get /metrics | awk '/^lensemble_verifyd_integrity_alerts\{/ { s += $2 } END { print s + 0 }'; }
# Every artifact's state and trust, as GET /artifact answers them.
verdicts() {
	local h
	for h in $ALL; do get "/artifact/$h" | jq -r '"\(.state // "none"):\(.trusted)"'; done | tr '\n' ' '
}
ledger_view() {
	get /chain | jq -r --arg p "$RUN/ledger.jsonl" \
	    '[.ledgers[] | select(.path == $p)][0] | "\(.remembered_records) \(.rewritten)"'
}
gauge_is() { [ "$(metric unreadable_dirs)" = "$1" ]; }
# A scan that finished after now, and so began after what was done before.
scanned_since() { awk -v a="$(metric last_scan_timestamp_seconds)" -v b="$1" 'BEGIN { exit !(a > b) }'; }

write_conf "rescan_interval = 3600"
start_daemon --genesis-hash "$RUN:$H0"
uid=$(awk '/^Uid:/ { print $3 }' "/proc/$DPID/status" 2>/dev/null)
if [ "${uid:-0}" = 0 ]; then
	echo "SKIP: the daemon runs as root: file permissions do not stop it"
	kill -KILL "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null
	rm -rf "$WORK"
	exit 77
fi
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store was verified"

# --- the run as it is -------------------------------------------------------
EXPECTED="verified:true verified:true verified:true verified:true verified:true "
check "every artifact of $RUN is verified and trusted" "$EXPECTED" "$(verdicts)"
check "--genesis-hash $RUN:HEX pins that run's round 0" "pinned config true" \
	"$(get "/artifact/$H0" | jq -r '"\(.commitment.source) \(.commitment.where) \(.commitment.matches)"')"
if "$DAEMON" --help | grep -q -- '--genesis-hash \[RUN:\]HEX\[,\[RUN:\]HEX\.\.\.\]'; then
	ok "--help gives --genesis-hash its RUN: form"
else
	not_ok "--help gives --genesis-hash its RUN: form: $("$DAEMON" --help | grep -- --genesis-hash | tr '\n' '|')"
fi
check "the run's ledger is remembered" "4 false" "$(ledger_view)"
check "no directory is unreadable" 0 "$(metric unreadable_dirs)"
check "no alert" 0 "$(alerts)"
HASHED=$(metric bytes_hashed_total)

# logged SINCE PATTERN: lines of the log past line SINCE matching PATTERN.
logged() { tail -n +$(($1 + 1)) "$LOG" | grep -c -- "$2"; }

# unreadable MODE WHAT: the run made unreadable with MODE, checked, then
# readable again and checked.
unreadable() {
	local mode=$1 what=$2 base t
	base=$(wc -l < "$LOG")
	chmod "$mode" "$STORE/$RUN"
	if wait_for $((10 * SLOW)) gauge_is 1 > /dev/null; then
		ok "$what: unreadable_dirs is 1"
	else
		not_ok "$what: unreadable_dirs is 1 (it is $(metric unreadable_dirs))"
	fi
	# The gauge is set early in a scan's merge: what must not happen is
	# looked for once another scan after it has been merged whole.
	t=$(date +%s.%N)
	mkdir "$STORE/poke-$mode"
	if wait_for $((10 * SLOW)) scanned_since "$t" > /dev/null; then
		ok "$what: another scan is merged"
	else
		not_ok "$what: another scan is merged"
	fi
	check "$what: its artifacts keep their verdicts and trust" "$EXPECTED" "$(verdicts)"
	check "$what: none is pruned" 0 "$(metric artifacts_pruned_total)"
	check "$what: its ledger is neither forgotten nor rewritten" "4 false" "$(ledger_view)"
	check "$what: no alert" 0 "$(alerts)"
	check "$what: none raised" 0 "$(logged "$base" "alert raised")"
	check "$what: no artifact is reported gone" 0 "$(logged "$base" " $RUN/.* is gone")"
	check "$what: one warning names it, not repeated by the scan after" 1 "$(logged "$base" "cannot read $RUN: ")"
	check "$what: and its verdicts stand" "$EXPECTED" "$(verdicts)"

	chmod 755 "$STORE/$RUN"
	if wait_for $((10 * SLOW)) gauge_is 0 > /dev/null; then
		ok "$what, readable again: unreadable_dirs is 0"
	else
		not_ok "$what, readable again: unreadable_dirs is 0 (it is $(metric unreadable_dirs))"
	fi
	wait_for $((10 * SLOW)) settled > /dev/null
	check "$what, readable again: the verdicts are as before" "$EXPECTED" "$(verdicts)"
	check "$what, readable again: nothing was hashed again" "$HASHED" "$(metric bytes_hashed_total)"
	check "$what, readable again: no alert" 0 "$(alerts)"
	check "$what, readable again: none raised" 0 "$(logged "$base" "alert raised")"
	check "$what, readable again: the ledger as before" "4 false" "$(ledger_view)"
	check "$what, readable again: said once" 1 "$(logged "$base" "$RUN is readable again")"
}

unreadable 000 "a run directory that cannot be opened"
unreadable 444 "a run directory that can be listed but not searched"
check "nothing was ever pruned" 0 "$(metric artifacts_pruned_total)"

# --- a restart while the run cannot be read ---------------------------------
# Its stored verdicts and its ledger's memory wait for it: nothing is
# forgotten, hashed again or alerted once it can be read.
stop_daemon
chmod 000 "$STORE/$RUN"
readable() { return 0; }     # the store stays as it is for this start
start_daemon --genesis-hash "$RUN:$H0"
if wait_for $((10 * SLOW)) gauge_is 1 > /dev/null; then
	ok "restarted: unreadable_dirs is 1"
else
	not_ok "restarted: unreadable_dirs is 1 (it is $(metric unreadable_dirs))"
fi
check "restarted: no alert" 0 "$(alerts)"
chmod 755 "$STORE/$RUN"
wait_for $((10 * SLOW)) gauge_is 0 > /dev/null
found() { [ "$(verdicts)" = "$EXPECTED" ]; }
if wait_for $((10 * SLOW)) found > /dev/null; then
	ok "restarted, readable again: the stored verdicts and trust are back"
else
	not_ok "restarted, readable again: the stored verdicts and trust are back ($(verdicts))"
fi
check "restarted, readable again: nothing was hashed" 0 "$(metric bytes_hashed_total)"
check "restarted, readable again: its ledger's memory stood" "4 false" "$(ledger_view)"
check "restarted, readable again: no alert" 0 "$(alerts)"
check "restarted: none raised" 0 "$(grep -c "alert raised" "$LOG")"
check "restarted: no verdict forgotten, nothing pruned" 0 "$(metric artifacts_pruned_total)"
finish
