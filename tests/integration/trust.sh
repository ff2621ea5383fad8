# Shared by the trust tests: Ed25519 keys and DSSE envelopes made with the
# openssl command line alone, so that the daemon's verifier is checked
# against a signer that is not ours (trust.md sections 2 and 3).
need openssl

# keygen NAME: $WORK/NAME.key and $WORK/NAME.pub
keygen() {
	openssl genpkey -algorithm ed25519 -out "$WORK/$1.key" 2>/dev/null
	openssl pkey -in "$WORK/$1.key" -pubout -out "$WORK/$1.pub"
	chmod 644 "$WORK/$1.pub"
}

# keyid PUBFILE: hex SHA-256 of the 32 raw public-key bytes
keyid() {
	openssl pkey -pubin -in "$1" -outform DER | tail -c 32 | sha256sum | cut -d' ' -f1
}

# envelope TYPE PAYLOAD NAME: a DSSE envelope signed by $WORK/NAME.key
envelope() {
	printf '%s' "$2" > "$WORK/payload.bin"
	{ printf 'DSSEv1 %d %s %d ' "${#1}" "$1" "$(wc -c < "$WORK/payload.bin")"
	  cat "$WORK/payload.bin"; } > "$WORK/pae.bin"
	openssl pkeyutl -sign -rawin -inkey "$WORK/$3.key" -in "$WORK/pae.bin" -out "$WORK/sig.bin"
	jq -cn --arg t "$1" --arg p "$(base64 -w0 < "$WORK/payload.bin")" \
		--arg k "$(keyid "$WORK/$3.pub")" --arg s "$(base64 -w0 < "$WORK/sig.bin")" \
		'{payloadType: $t, payload: $p, signatures: [{keyid: $k, sig: $s}]}'
}

PT_RC=application/vnd.lensemble.roundclose+json
PT_CP=application/vnd.lensemble.ledger-checkpoint+json

# rc_stmt RUN ROUND HASH / cp_stmt RUN RECORDS HEAD: the compact payloads
rc_stmt() {
	printf '{"schema_version":2,"kind":"round_close","run":"%s","round_index":%s,"global_model_hash":"%s"}' "$1" "$2" "$3"
}
cp_stmt() {
	printf '{"kind":"ledger_checkpoint","run":"%s","records":%s,"head_record_hash":"%s"}' "$1" "$2" "$3"
}

# record_hash LINE: the hash the next record's prev_record_hash holds
# (interfaces.md section 1; jq -cS matches Python's compact sorted JSON for
# the ASCII records used here).
record_hash() {
	{ printf '%s\000' "lensemble/provenance/ledger-record/v1"
	  printf '%s' "$1" | jq -cSj .; } | sha256sum | cut -d' ' -f1
}

# head_of LEDGER [N]: the record hash of record N (default: the last)
head_of() {
	local n=${2:-$(grep -c . "$1")}
	record_hash "$(grep . "$1" | sed -n "${n}p")"
}

# append_record LEDGER ROUND HASH: a correctly chained record, as a
# writer of the store without any key could append it
append_record() {
	local prev; prev=$(head_of "$1")
	jq -cn --argjson r "$2" --arg h "$3" --arg p "$prev" \
		'{schema_version: 1, round_index: $r, participants: ["site-x"], dataset_roots: {}, global_model_hash: $h, prev_record_hash: $p}' >> "$1"
}

# verify_envelope FILE PUBFILE: the first signature checked by openssl alone;
# the payload is left in $WORK/payload.out
verify_envelope() {
	jq -r .payload "$1" | base64 -d > "$WORK/payload.out"
	jq -r '.signatures[0].sig' "$1" | base64 -d > "$WORK/sig.out"
	local t; t=$(jq -r .payloadType "$1")
	{ printf 'DSSEv1 %d %s %d ' "${#t}" "$t" "$(wc -c < "$WORK/payload.out")"
	  cat "$WORK/payload.out"; } > "$WORK/pae.out"
	openssl pkeyutl -verify -rawin -pubin -inkey "$2" -sigfile "$WORK/sig.out" -in "$WORK/pae.out" > /dev/null 2>&1
}
