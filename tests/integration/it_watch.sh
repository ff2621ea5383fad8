#!/bin/sh
# The store changing under the daemon: a new artifact renamed into place,
# a byte flipped in a verified weight file (and flipped back), a directory
# removed, a ledger appearing.
. "$top_srcdir/tests/integration/lib.sh"

cp -r "$DATA/store-basic/." "$STORE/"
H2=c3eaa23b9433b29ff174122f7aafdeff518f944e32c6123f2d83340ebb81d1c5
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
write_conf "rescan_interval = 3600"   # only inotify can see changes in time
start_daemon
is_state() { [ "$(state_of "$1")" = "$2" ]; }
# Every round's first verification done, not only round 4's: the failure
# and alert counts below are for the flipped byte alone.
settled() {
	[ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ] &&
		is_state "$H4" verified
}
wait_for $((10 * SLOW)) settled >/dev/null || not_ok "store-basic verified"

# The coordinator's save: a hidden temporary directory, renamed into place.
tmp="$STORE/.round-00005.tmp-x1y2"
"$MKART" --round 5 --parent "$H4" --tensors 8 --bytes 1048576 "$tmp" > "$WORK/h5"
chmod -R a+rX "$tmp"
H5=$(cat "$WORK/h5")
# A hidden name raises no change: a scan of the whole store, asked for by
# touching its root, reads it and passes it by.
scanned_through "$STORE"
check "the save in progress is not served" 404 "$(code GET "/artifact/$H5")"
mv "$tmp" "$STORE/round-00005"
if t=$(wait_for $((10 * SLOW)) is_state "$H5" verified); then
	ok "a new artifact renamed into the store is verified by the watcher ($t s)"
else
	not_ok "a new artifact renamed into the store is verified by the watcher"
fi

# One byte flipped in a verified weight file.
check "no artifact_failed alert before" 0 "$(metric 'integrity_alerts{kind="artifact_failed"}')"
w="$STORE/round-00002/weights.safetensors"
orig=$(od -An -tx1 -j 400 -N 1 "$w" | tr -d ' ')
printf '\377' | dd of="$w" bs=1 seek=400 conv=notrunc 2>/dev/null
if t=$(wait_for $((10 * SLOW)) is_state "$H2" failed); then
	ok "a flipped byte turns the artifact failed by the watcher ($t s)"
else
	not_ok "a flipped byte turns the artifact failed by the watcher"
fi
check "with checkpoint_integrity" checkpoint_integrity "$(get "/artifact/$H2" | jq -r .code)"
check "the artifact_failed alert is raised" 1 "$(metric 'integrity_alerts{kind="artifact_failed"}')"
check "the failure is counted by code" 1 "$(metric 'verification_failures_total{code="checkpoint_integrity"}')"
check "the alert is logged once when raised" 1 "$(grep -c 'alert raised: artifact_failed: round-00002' "$LOG")"

# Flipped back: verified again, alert cleared.
printf "\\$(printf '%03o' "0x$orig")" | dd of="$w" bs=1 seek=400 conv=notrunc 2>/dev/null
if wait_for $((10 * SLOW)) is_state "$H2" verified >/dev/null; then
	ok "restored bytes verify again"
else
	not_ok "restored bytes verify again"
fi
check "the alert is cleared" 0 "$(metric 'integrity_alerts{kind="artifact_failed"}')"
check "the clearing is logged once" 1 "$(grep -c 'alert cleared: artifact_failed: round-00002' "$LOG")"

# A directory removed.
rm -rf "$STORE/round-00005"
gone() { [ "$(code GET "/artifact/$H5")" = 404 ]; }
if wait_for $((10 * SLOW)) gone >/dev/null; then ok "a removed artifact is forgotten"; else not_ok "a removed artifact is forgotten"; fi

# A weight file replaced by rename (new inode, same bytes): re-verified.
before=$(metric verifications_total)
cp "$STORE/round-00001/weights.safetensors" "$STORE/round-00001/.w.tmp"
mv "$STORE/round-00001/.w.tmp" "$STORE/round-00001/weights.safetensors"
more() { [ "$(metric verifications_total)" -gt "$before" ]; }
if wait_for $((10 * SLOW)) more >/dev/null; then ok "a replaced file is verified again"; else not_ok "a replaced file is verified again"; fi

# Periodic rescan without inotify events is covered by a short interval.
finish
