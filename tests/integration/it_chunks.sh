#!/bin/sh
# Chunk digests: taken alongside the first verification, they turn a later
# re-verification of unchanged bytes into a parallel re-check, and locate
# a change (file and byte range) before the full pass fails the artifact.
. "$top_srcdir/tests/integration/lib.sh"

# 40 MiB in one file: three 16 MiB chunks.
"$MKART" --round 0 --tensors 4 --bytes 41943040 --seed 3 "$STORE/round-00000" > "$WORK/h0"
H0=$(cat "$WORK/h0")
cp "$STORE/round-00000/weights.safetensors" "$WORK/orig"
write_conf "rescan_interval = 3600" "workers = 2"
start_daemon
is() { [ "$(state_of "$H0")" = "$1" ]; }
wait_for $((10 * SLOW)) is verified > /dev/null || not_ok "the artifact verified"

# New identities, same bytes: a re-check, no full pass.
touch "$STORE/round-00000/weights.safetensors"
rechecked() { grep -q 're-checked round-00000 chunk by chunk: unchanged' "$LOG"; }
if wait_for $((5 * SLOW)) rechecked > /dev/null; then ok "unchanged bytes under new identities are re-checked chunk by chunk"; else not_ok "a touched file is re-checked chunk by chunk"; fi
check "and stay verified" verified "$(state_of "$H0")"

# One byte changed in the second chunk: located, then the full pass fails it.
printf '\377' | dd of="$STORE/round-00000/weights.safetensors" bs=1 seek=20000000 conv=notrunc 2>/dev/null
if wait_for $((5 * SLOW)) is failed > /dev/null; then ok "a changed byte fails the artifact"; else not_ok "a changed byte fails the artifact"; fi
check "the re-check names the file and the 16 MiB range" \
	"weights.safetensors bytes 16777216 to 33554432 changed" \
	"$(get "/artifact/$H0" | jq -r '.copies[0].changed')"
check "the full pass decides the code" checkpoint_integrity "$(get "/artifact/$H0" | jq -r .code)"
check "the change is logged once" 1 "$(grep -c 'round-00000: weights.safetensors bytes 16777216 to 33554432 changed; verifying it in full' "$LOG")"

# The byte restored: verified again by a full pass, which takes new digests.
printf '\'"$(printf '%03o' "$(od -An -tu1 -j 20000000 -N 1 "$WORK/orig" | tr -d ' ')")" |
	dd of="$STORE/round-00000/weights.safetensors" bs=1 seek=20000000 conv=notrunc 2>/dev/null
if wait_for $((5 * SLOW)) is verified > /dev/null; then ok "the restored byte verifies again"; else not_ok "the restored byte verifies again"; fi

# The digests outlive a restart: touched while stopped, re-checked on start.
stop_daemon
touch "$STORE/round-00000/weights.safetensors"
: > "$LOG"
start_daemon
if wait_for $((5 * SLOW)) rechecked > /dev/null; then ok "stored digests make the first re-verification after a restart a re-check"; else not_ok "stored digests survive a restart"; fi
check "verified" verified "$(state_of "$H0")"
finish
