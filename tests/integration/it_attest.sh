#!/bin/sh
# Signed verdicts (trust.md section 6): the daemon's key, GET /key, and
# GET /artifact/<hash>/attestation, checked with the openssl command line.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/trust.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
H0=859245c72641256e051ead98898edc989faac09b4dcb35ec0fa3c346bf4f7645
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
NOHASH=1111111111111111111111111111111111111111111111111111111111111111
"$MKART" --round 5 --parent "$H4" --seed 5 "$STORE/round-00005" > "$WORK/h5"
H5=$(cat "$WORK/h5")
printf '\377' | dd of="$STORE/round-00005/weights.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null
write_conf "commitment_policy = ledger" "rescan_interval = 3600"
start_daemon
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store is verified"

check "the signing key is created with mode 0600" 600 "$(stat -c %a "$STATE/signing.key")"
check "and is never logged" 0 "$(grep -c 'PRIVATE KEY' "$LOG")"
get /key > "$WORK/key.json"
jq -r .public_key "$WORK/key.json" > "$WORK/daemon.pub"
check "GET /key serves the public key and its id" "$(keyid "$WORK/daemon.pub")" "$(jq -r .keyid "$WORK/key.json")"

get "/artifact/$H4/attestation" > "$WORK/att.json"
check "an attestation is a DSSE envelope over an in-toto statement" "application/vnd.in-toto+json 1" \
	"$(jq -r '"\(.payloadType) \(.signatures | length)"' "$WORK/att.json")"
if verify_envelope "$WORK/att.json" "$WORK/daemon.pub"; then ok "openssl pkeyutl -verify -rawin accepts its signature"; else not_ok "openssl pkeyutl -verify -rawin accepts its signature"; fi
check "signed by the key GET /key names" "$(jq -r .keyid "$WORK/key.json")" "$(jq -r '.signatures[0].keyid' "$WORK/att.json")"
check "the statement names the artifact by its content hash" "https://in-toto.io/Statement/v1 round-00004 $H4" \
	"$(jq -r '"\(._type) \(.subject[0].name) \(.subject[0].digest.sha256)"' "$WORK/payload.out")"
check "the predicate carries the verdict" "urn:lensemble-verifyd:verdict:v1 verified true intact 5 ledger lensemble-verifyd" \
	"$(jq -r '"\(.predicateType) \(.predicate.state) \(.predicate.trusted) \(.predicate.chain.status) \(.predicate.chain.length) \(.predicate.commitment.source) \(.predicate.verifier.name)"' "$WORK/payload.out")"
check "with when it was verified and issued" true \
	"$(jq '.predicate | (.verified_at | test("^[0-9]{4}-")) and (.issued_at | test("^[0-9]{4}-"))' "$WORK/payload.out")"
get "/artifact/$H0/attestation" > "$WORK/att0.json"
verify_envelope "$WORK/att0.json" "$WORK/daemon.pub"
check "an untrusted verdict is signed as untrusted" false "$(jq -r .predicate.trusted "$WORK/payload.out")"
keygen other
if verify_envelope "$WORK/att.json" "$WORK/other.pub"; then not_ok "another key does not verify it"; else ok "another key does not verify it"; fi
jq -c --arg p "$(jq -c '.predicate.trusted = true' "$WORK/payload.out" | base64 -w0)" '.payload = $p' "$WORK/att0.json" > "$WORK/forged.json"
if verify_envelope "$WORK/forged.json" "$WORK/daemon.pub"; then not_ok "a verdict rewritten in transit does not verify"; else ok "a verdict rewritten in transit does not verify"; fi
check "an unknown hash: 404" 404 "$(code GET "/artifact/$NOHASH/attestation")"
check "a failed artifact: 409 not_verified" "409 not_verified" \
	"$(code GET "/artifact/$H5/attestation") $(get "/artifact/$H5/attestation" | jq -r .error.code)"
check "another path under the artifact: 404" 404 "$(code GET "/artifact/$H4/other")"

# The participant's offline check, with the public key pinned.
check "verify-attestation accepts the daemon's trusted verdict" "0 trusted $H4" \
	"$("$top_builddir/lensemble-verify" verify-attestation --key "$WORK/daemon.pub" --expect "$H4" "$WORK/att.json" > "$WORK/va.out"; echo "$? $(cut -d' ' -f1-2 "$WORK/va.out")")"
check "and refuses its untrusted one" 1 \
	"$("$top_builddir/lensemble-verify" verify-attestation --key "$WORK/daemon.pub" "$WORK/att0.json" > "$WORK/va.out" 2>&1; echo $?)"
check "and one checked against another key" 1 \
	"$("$top_builddir/lensemble-verify" verify-attestation --key "$WORK/other.pub" "$WORK/att.json" > "$WORK/va.out" 2>&1; echo $?)"

# The Python participant client against the real daemon: it loads only
# what the daemon's signed verdict vouches for, under the pinned key.
if [ -x /usr/bin/python3 ]; then
	pyload() {
		PYTHONPATH="$top_srcdir/clients/python" /usr/bin/python3 -c '
import sys
from lensemble_verify_client import load_verified, VerificationError
try:
    t = load_verified(sys.argv[1], daemon=sys.argv[2], public_key=sys.argv[3], framework=None)
    print("loaded", len(t))
except VerificationError as e:
    print(e.code)
' "$STORE/$1" "$(url '')" "$2" 2>&1
	}
	check "load_verified loads a round the daemon's signed verdict trusts" "loaded 3" "$(pyload round-00004 "$WORK/daemon.pub")"
	check "load_verified refuses a round the daemon does not trust" untrusted "$(pyload round-00000 "$WORK/daemon.pub")"
	check "load_verified refuses a verdict under another key" untrusted "$(pyload round-00004 "$WORK/other.pub")"
fi

# The key survives restarts; a key others can read is refused.
ID=$(jq -r .keyid "$WORK/key.json")
stop_daemon
start_daemon
check "the same key after a restart" "$ID" "$(get /key | jq -r .keyid)"
stop_daemon
chmod 644 "$STATE/signing.key"
"$DAEMON" -f -c "$CONF" > "$WORK/refused.log" 2>&1
check "a signing key others may read stops the daemon with status 1" 1 "$?"
check "saying so" 1 "$(grep -c 'signing_key' "$WORK/refused.log")"
chmod 600 "$STATE/signing.key"
start_daemon
finish
