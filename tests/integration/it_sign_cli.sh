#!/bin/sh
# lensemble-verify keygen, sign-roundclose, sign-ledger and verify-envelope
# against the openssl command line (trust.md sections 2, 3 and 7): what
# the one signs the other verifies, byte for byte. No daemon is started;
# lib.sh gives the scratch directory and the ok/check helpers.
. "$top_srcdir/tests/integration/lib.sh"
need openssl
need base64
need sha256sum

V="$top_builddir/lensemble-verify"
K="$WORK/keys"
mkdir -p "$K"
RC_TYPE=application/vnd.lensemble.roundclose+json
CP_TYPE=application/vnd.lensemble.ledger-checkpoint+json
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
DOMAIN='lensemble/provenance/ledger-record/v1'

# exits DESC WANT COMMAND...: COMMAND's exit status is WANT. Whatever it
# prints must never hold a private key.
exits() {
	local desc=$1 want=$2 rc
	shift 2
	"$@" > "$WORK/out" 2> "$WORK/err"
	rc=$?
	check "$desc" "$want" "$rc"
	[ "$rc" = "$want" ] || sed 's/^/#   /' "$WORK/out" "$WORK/err"
	if grep -q 'PRIVATE KEY' "$WORK/out" "$WORK/err"; then
		not_ok "$desc: a private key was printed"
	fi
}
says() {
	if grep -q -- "$2" "$WORK/out" "$WORK/err"; then ok "$1"; else
		not_ok "$1: no '$2' in: $(cat "$WORK/out" "$WORK/err")"; fi
}

# key_id PUBFILE: the id computed by openssl alone.
key_id() {
	openssl pkey -pubin -in "$1" -outform DER | tail -c 32 | sha256sum | cut -c1-64
}

# pae ENVELOPE OUT: PAE(payloadType, payload) rebuilt in shell.
pae() {
	local t
	t=$(jq -r .payloadType "$1")
	jq -r .payload "$1" | base64 -d > "$WORK/payload.bin"
	printf 'DSSEv1 %d %s %d ' "${#t}" "$t" "$(wc -c < "$WORK/payload.bin")" > "$2"
	cat "$WORK/payload.bin" >> "$2"
}

# record_hash LINE: interfaces.md section 1, computed by jq and sha256sum.
record_hash() {
	{ printf '%s\000' "$DOMAIN"; printf '%s' "$1" | jq -cjS .; } | sha256sum | cut -c1-64
}

# ---- keygen ---------------------------------------------------------------
exits "keygen writes a key pair" 0 "$V" keygen "$K/coord"
ID=$(cat "$WORK/out")
check "keygen prints the key id, as openssl computes it" "$(key_id "$K/coord.pub")" "$ID"
check "the private key file is mode 600" 600 "$(stat -c %a "$K/coord.key")"
check "the public key file is mode 644" 644 "$(stat -c %a "$K/coord.pub")"
check "the private key is PKCS#8 PEM" "-----BEGIN PRIVATE KEY-----" "$(head -n 1 "$K/coord.key")"
check "openssl derives the same public key from it" "$(cat "$K/coord.pub")" \
	"$(openssl pkey -in "$K/coord.key" -pubout)"
SUM=$(sha256sum "$K/coord.key" "$K/coord.pub")
exits "keygen refuses to overwrite a key" 1 "$V" keygen "$K/coord"
says "it says why" "already exists"
check "the key files are unchanged" "$SUM" "$(sha256sum "$K/coord.key" "$K/coord.pub")"
exits "keygen without a prefix: 2" 2 "$V" keygen
exits "keygen with two prefixes: 2" 2 "$V" keygen "$K/a" "$K/b"
# A missing last directory is made, mode 0700 (it holds a private key);
# a missing path above it is said, with the command that makes it.
exits "keygen into a missing directory" 0 "$V" keygen "$K/new/coord"
check "makes the directory, mode 700" 700 "$(stat -c %a "$K/new")"
check "and writes both key files in it" "coord.key coord.pub" "$(ls "$K/new" | tr '\n' ' ' | sed 's/ $//')"
says "it says it made the directory" "made the directory $K/new, mode 0700"
exits "keygen under two missing directories: 1" 1 "$V" keygen "$K/none/deeper/coord"
says "it says what to do" "mkdir -p -m 0700 $K/none/deeper"
check "and makes nothing" no "$([ -e "$K/none" ] && echo yes || echo no)"
openssl genpkey -algorithm ed25519 -out "$K/ossl.key" 2>/dev/null
openssl pkey -in "$K/ossl.key" -pubout -out "$K/ossl.pub"
OID=$(key_id "$K/ossl.pub")

# ---- sign-roundclose, checked by openssl ------------------------------------
RC_PAYLOAD='{"schema_version":2,"kind":"round_close","run":"runs/a","round_index":3,"global_model_hash":"'$H4'"}'
exits "sign-roundclose writes an envelope" 0 "$V" sign-roundclose --key "$K/coord.key" \
	--run runs/a --round 3 --hash "$H4" -o "$WORK/rc.json"
check "it names the round_close payload type" "$RC_TYPE" "$(jq -r .payloadType "$WORK/rc.json")"
check "one signature, by the key's id" "1 $ID" \
	"$(jq -r '"\(.signatures | length) \(.signatures[0].keyid)"' "$WORK/rc.json")"
check "the payload is the statement of trust.md" "$RC_PAYLOAD" \
	"$(jq -r .payload "$WORK/rc.json" | base64 -d)"
check "the envelope file is mode 644" 644 "$(stat -c %a "$WORK/rc.json")"
pae "$WORK/rc.json" "$WORK/pae.bin"
jq -r '.signatures[0].sig' "$WORK/rc.json" | base64 -d > "$WORK/sig.bin"
exits "openssl pkeyutl verifies its signature over the PAE" 0 \
	openssl pkeyutl -verify -rawin -pubin -inkey "$K/coord.pub" \
	-sigfile "$WORK/sig.bin" -in "$WORK/pae.bin"
exits "openssl refuses it under another key" 1 \
	openssl pkeyutl -verify -rawin -pubin -inkey "$K/ossl.pub" \
	-sigfile "$WORK/sig.bin" -in "$WORK/pae.bin"
exits "verify-envelope accepts it" 0 "$V" verify-envelope --key "$K/coord.pub" "$WORK/rc.json"
check "and prints the statement in one line" "$RC_PAYLOAD" "$(cat "$WORK/out")"
exits "sign-roundclose to standard output" 0 "$V" sign-roundclose --key "$K/coord.key" \
	--run runs/a --round 3 --hash "$H4"
check "the same envelope (Ed25519 is deterministic)" "$(cat "$WORK/rc.json")" "$(cat "$WORK/out")"

# ---- sign-roundclose ARTIFACT: the round and hash from the artifact ---------------
# RoundClose t commits the artifact of round t+1: given the artifact, the
# tool reads its round and recomputes its hash, so t is never typed.
ART="$WORK/art"
"$MKART" --chain 3 "$ART" > /dev/null
H1=$("$V" --json "$ART/round-00001" | jq -r .content_hash)
H2=$("$V" --json "$ART/round-00002" | jq -r .content_hash)
rc_payload() {
	printf '{"schema_version":2,"kind":"round_close","run":"%s","round_index":%s,"global_model_hash":"%s"}' "$@"
}
exits "sign-roundclose ARTIFACT signs the artifact's RoundClose" 0 "$V" sign-roundclose \
	--key "$K/coord.key" --run runs/a "$ART/round-00002" -o "$WORK/rc-art.json"
check "round 2's artifact: round_index 1, its content hash" "$(rc_payload runs/a 1 "$H2")" \
	"$(jq -r .payload "$WORK/rc-art.json" | base64 -d)"
says "it says which round it signs" "is round 2 with content hash $H2: signing RoundClose round 1 of run runs/a"
pae "$WORK/rc-art.json" "$WORK/pae-art.bin"
jq -r '.signatures[0].sig' "$WORK/rc-art.json" | base64 -d > "$WORK/sig-art.bin"
exits "openssl verifies its signature over the PAE" 0 \
	openssl pkeyutl -verify -rawin -pubin -inkey "$K/coord.pub" \
	-sigfile "$WORK/sig-art.bin" -in "$WORK/pae-art.bin"
exits "the same statement given by hand" 0 "$V" sign-roundclose --key "$K/coord.key" \
	--run runs/a --round 1 --hash "$H2"
check "is the same envelope" "$(cat "$WORK/rc-art.json")" "$(cat "$WORK/out")"
exits "without --run, to standard output" 0 "$V" sign-roundclose --key "$K/coord.key" "$ART/round-00001"
check "run \".\", round 0, round 1's hash" "$(rc_payload . 0 "$H1")" \
	"$(jq -r .payload "$WORK/out" | base64 -d)"
tar -C "$ART" -cf "$WORK/round-00002.tar" round-00002
exits "a tar of the artifact" 0 "$V" sign-roundclose --key "$K/coord.key" --run runs/a \
	"$WORK/round-00002.tar"
check "signs the same envelope" "$(cat "$WORK/rc-art.json")" "$(cat "$WORK/out")"
exits "round 0's artifact: 1" 1 "$V" sign-roundclose --key "$K/coord.key" \
	"$ART/round-00000" -o "$WORK/rc-zero.json"
says "it says round 0 is pinned by genesis_hash" "round 0, the warm start, which no RoundClose commits"
says "with the pin to set" "genesis_hash = $("$V" --json "$ART/round-00000" | jq -r .content_hash)"
check "and writes nothing" no "$([ -e "$WORK/rc-zero.json" ] && echo yes || echo no)"
cp -r "$ART/round-00002" "$WORK/tampered"
printf '\377' | dd of="$WORK/tampered/weights.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
exits "an artifact that does not verify: 1" 1 "$V" sign-roundclose --key "$K/coord.key" \
	"$WORK/tampered" -o "$WORK/rc-bad.json"
says "it names the artifact and the reason" "$WORK/tampered does not verify (checkpoint_integrity"
check "and writes nothing" no "$([ -e "$WORK/rc-bad.json" ] && echo yes || echo no)"
check "nothing on standard output" "" "$(cat "$WORK/out")"
exits "a missing artifact: 1" 1 "$V" sign-roundclose --key "$K/coord.key" "$WORK/missing"
says "it names it" "$WORK/missing does not verify"
exits "a key that cannot sign is said before the artifact is read" 1 "$V" sign-roundclose \
	--key "$K/coord.pub" "$WORK/missing"
check "(nothing about the artifact)" "" "$(grep -- "$WORK/missing" "$WORK/err")"

# --round and --hash sign before the artifact exists; --artifact PATH
# warns when PATH is not the artifact of round T+1 with that hash.
exits "--round 1 --hash H2 --artifact round 2: 0" 0 "$V" sign-roundclose --key "$K/coord.key" \
	--round 1 --hash "$H2" --artifact "$ART/round-00002"
check "no warning" "" "$(cat "$WORK/err")"
exits "--round 2 (off by one) --hash H2 --artifact round 2: signed" 0 "$V" sign-roundclose \
	--key "$K/coord.key" --round 2 --hash "$H2" --artifact "$ART/round-00002"
says "with a warning naming both rounds" "warning: --artifact $ART/round-00002 is round 2, and RoundClose round 2 commits the artifact of round 3"
check "as given" "$(rc_payload . 2 "$H2")" "$(jq -r .payload "$WORK/out" | base64 -d)"
exits "--hash of another artifact: signed" 0 "$V" sign-roundclose --key "$K/coord.key" \
	--round 1 --hash "$H1" --artifact "$ART/round-00002"
says "with a warning naming both hashes" "has content hash $H2, not --hash $H1"
exits "--artifact that does not verify: signed" 0 "$V" sign-roundclose --key "$K/coord.key" \
	--round 1 --hash "$H2" --artifact "$WORK/tampered"
says "with a warning" "warning: --artifact $WORK/tampered does not verify"
exits "ARTIFACT and --round --hash: 2" 2 "$V" sign-roundclose --key "$K/coord.key" \
	--round 1 --hash "$H2" "$ART/round-00002"
exits "--round without --hash: 2" 2 "$V" sign-roundclose --key "$K/coord.key" --round 1
exits "two artifacts: 2" 2 "$V" sign-roundclose --key "$K/coord.key" \
	"$ART/round-00001" "$ART/round-00002"
exits "neither: 2" 2 "$V" sign-roundclose --key "$K/coord.key"
says "it says what to give" "give the ARTIFACT to commit"
exits "--artifact alone: 2" 2 "$V" sign-roundclose --key "$K/coord.key" --artifact "$ART/round-00002"
exits "--help shows the artifact form" 0 "$V" sign-roundclose --help
says "first" "sign-roundclose --key FILE \[--run RUN\] \[-o FILE\] ARTIFACT"
says "and says what T is" "T is its header's round_index"

# ---- the artifact generator lists every flag it takes --------------------------
exits "vd-mkartifact --help" 0 "$MKART" --help
for f in $(sed -n 's/^[[:space:]]*{ "\([a-z-]*\)", .*_argument.*/\1/p' "$top_srcdir/tools/vd-mkartifact.c"); do
	says "it lists --$f on a line of its own" "^ *--$f[ =]"
done

# ---- an envelope made by openssl alone ----------------------------------------
P='{"kind":"ledger_checkpoint","run":".","records":2,"head_record_hash":"'$H4'"}'
printf 'DSSEv1 %d %s %d %s' "${#CP_TYPE}" "$CP_TYPE" "${#P}" "$P" > "$WORK/pae2.bin"
SIG=$(openssl pkeyutl -sign -rawin -inkey "$K/ossl.key" -in "$WORK/pae2.bin" | base64 -w0)
printf '{"payloadType":"%s","payload":"%s","signatures":[{"keyid":"%s","sig":"%s"}]}\n' \
	"$CP_TYPE" "$(printf %s "$P" | base64 -w0)" "$OID" "$SIG" > "$WORK/shell.json"
exits "verify-envelope accepts an envelope signed by openssl" 0 \
	"$V" verify-envelope --key "$K/ossl.pub" "$WORK/shell.json"
check "and prints its statement" "$P" "$(cat "$WORK/out")"
P2='{"kind":"ledger_checkpoint","run":".","records":3,"head_record_hash":"'$H4'"}'
jq -c --arg p "$(printf %s "$P2" | base64 -w0)" '.payload = $p' "$WORK/shell.json" > "$WORK/swapped.json"
exits "a payload swapped after signing fails" 1 \
	"$V" verify-envelope --key "$K/ossl.pub" "$WORK/swapped.json"
says "as a bad signature" "bad_signature"
exits "another key fails" 1 "$V" verify-envelope --key "$K/coord.pub" "$WORK/shell.json"
says "as an unknown key" "unknown_key"
jq -c --arg id "$ID" '.signatures[0].keyid = $id' "$WORK/shell.json" > "$WORK/claim.json"
exits "a keyid claiming another key fails" 1 \
	"$V" verify-envelope --key "$K/coord.pub" "$WORK/claim.json"
says "as a bad signature" "bad_signature"
jq -c '.extra = 1' "$WORK/shell.json" > "$WORK/extra.json"
exits "an unknown envelope field fails" 1 "$V" verify-envelope --key "$K/ossl.pub" "$WORK/extra.json"
says "as malformed" "malformed"
exits "verify-envelope with a private key as PUBFILE fails" 1 \
	"$V" verify-envelope --key "$K/ossl.key" "$WORK/shell.json"
says "it says it is a private key" "private key"

# ---- sign-ledger ----------------------------------------------------------------
RUN="$WORK/run"
mkdir -p "$RUN"
cp "$DATA/store-basic/ledger.jsonl" "$RUN/ledger.jsonl"
N=$(grep -c . "$RUN/ledger.jsonl")
exits "sign-ledger signs the ledger" 0 "$V" sign-ledger --key "$K/coord.key" "$RUN/ledger.jsonl"
OUT="$RUN/commitments/ledger-$N.json"
check "into commitments/ledger-$N.json" yes "$([ -f "$OUT" ] && echo yes)"
check "the commitments directory is mode 755" 755 "$(stat -c %a "$RUN/commitments")"
check "no temporary file is left" "ledger-$N.json" "$(ls -A "$RUN/commitments")"
exits "verify-envelope accepts the checkpoint" 0 "$V" verify-envelope --key "$K/coord.pub" "$OUT"
check "the payload type is ledger-checkpoint" "$CP_TYPE" "$(jq -r .payloadType "$OUT")"
check "it covers every record, in run \".\"" "$N ." "$(jq -r '"\(.records) \(.run)"' "$WORK/out")"
check "head_record_hash is record $N's hash, computed in shell" \
	"$(record_hash "$(sed -n "${N}p" "$RUN/ledger.jsonl")")" "$(jq -r .head_record_hash "$WORK/out")"
pae "$OUT" "$WORK/pae3.bin"
jq -r '.signatures[0].sig' "$OUT" | base64 -d > "$WORK/sig3.bin"
exits "openssl verifies the checkpoint's signature" 0 \
	openssl pkeyutl -verify -rawin -pubin -inkey "$K/coord.pub" \
	-sigfile "$WORK/sig3.bin" -in "$WORK/pae3.bin"
exits "sign-ledger --run --records 2 -o" 0 "$V" sign-ledger --key "$K/coord.key" \
	--run runs/a --records 2 "$RUN/ledger.jsonl" -o "$WORK/cp2.json"
exits "it verifies" 0 "$V" verify-envelope --key "$K/coord.pub" "$WORK/cp2.json"
check "records 2 of run runs/a, head: record 2's hash" \
	"2 runs/a $(record_hash "$(sed -n 2p "$RUN/ledger.jsonl")")" \
	"$(jq -r '"\(.records) \(.run) \(.head_record_hash)"' "$WORK/out")"
check "record 2's hash is record 3's prev_record_hash" \
	"$(sed -n 3p "$RUN/ledger.jsonl" | jq -r .prev_record_hash)" "$(jq -r .head_record_hash "$WORK/out")"
# -o to something that is not a regular file writes into it, never
# renames over it (a FIFO here; /dev/stdout or /dev/null alike).
mkfifo "$WORK/fifo"
cat "$WORK/fifo" > "$WORK/fifo.out" &
exits "sign-ledger -o FIFO" 0 "$V" sign-ledger --key "$K/coord.key" \
	"$RUN/ledger.jsonl" -o "$WORK/fifo"
wait
check "the FIFO is still a FIFO" yes "$([ -p "$WORK/fifo" ] && echo yes)"
check "and the envelope went through it" "$(cat "$OUT")" "$(cat "$WORK/fifo.out")"
exits "more records than the ledger has: 1" 1 "$V" sign-ledger --key "$K/coord.key" \
	--records $((N + 1)) "$RUN/ledger.jsonl" -o "$WORK/none.json"
exits "--records 0: 2" 2 "$V" sign-ledger --key "$K/coord.key" --records 0 "$RUN/ledger.jsonl"

# A broken chain: record 2's model hash changed, so record 3 no longer
# names the record before it.
BROKEN="$WORK/broken"
mkdir -p "$BROKEN"
sed '2s/"global_model_hash":"c/"global_model_hash":"d/' "$RUN/ledger.jsonl" > "$BROKEN/ledger.jsonl"
exits "sign-ledger refuses a ledger with a broken chain" 1 \
	"$V" sign-ledger --key "$K/coord.key" "$BROKEN/ledger.jsonl"
says "it names the break" "breaks at line 3"
check "and writes nothing" "" "$(ls -A "$BROKEN/commitments" 2>/dev/null)"
exits "or a count past the break" 1 \
	"$V" sign-ledger --key "$K/coord.key" --records 3 "$BROKEN/ledger.jsonl"
exits "the intact prefix may be signed" 0 \
	"$V" sign-ledger --key "$K/coord.key" --records 2 "$BROKEN/ledger.jsonl" -o -
tail -n +2 "$RUN/ledger.jsonl" > "$BROKEN/headless.jsonl"
exits "sign-ledger refuses a ledger whose first record is not round 0" 1 \
	"$V" sign-ledger --key "$K/coord.key" "$BROKEN/headless.jsonl"
: > "$BROKEN/empty.jsonl"
exits "sign-ledger refuses an empty ledger" 1 \
	"$V" sign-ledger --key "$K/coord.key" "$BROKEN/empty.jsonl" -o -

# ---- keys that must not sign, and usage ------------------------------------------
cp "$K/coord.key" "$K/open.key"
chmod 644 "$K/open.key"
exits "a private key readable by others does not sign" 1 "$V" sign-roundclose \
	--key "$K/open.key" --run . --round 0 --hash "$H4"
says "it says why" "group or others"
exits "a public key does not sign" 1 "$V" sign-roundclose \
	--key "$K/coord.pub" --run . --round 0 --hash "$H4"
exits "sign-roundclose without --hash: 2" 2 "$V" sign-roundclose --key "$K/coord.key" \
	--run . --round 0
exits "an upper-case hash: 2" 2 "$V" sign-roundclose --key "$K/coord.key" \
	--run . --round 0 --hash "$(echo "$H4" | tr a-f A-F)"
exits "a negative round: 2" 2 "$V" sign-roundclose --key "$K/coord.key" \
	--run . --round -1 --hash "$H4"
exits "a run outside the store: 2" 2 "$V" sign-roundclose --key "$K/coord.key" \
	--run ../x --round 0 --hash "$H4"
exits "an option given twice: 2" 2 "$V" sign-roundclose --key "$K/coord.key" \
	--run . --round 0 --hash "$H4" --hash "$H4"
exits "an unknown option: 2" 2 "$V" sign-ledger --key "$K/coord.key" --bogus "$RUN/ledger.jsonl"
exits "verify-envelope without --key: 2" 2 "$V" verify-envelope "$OUT"
exits "--help lists the subcommands" 0 "$V" --help
says "sign-ledger is among them" "lensemble-verify sign-ledger --key FILE"

# ---- verify-attestation: verdicts signed by openssl alone ----------------------
# (trust.md section 6). att_stmt TRUSTED DIGESTS: an in-toto Statement as
# GET /artifact/<hash>/attestation carries it, one subject per digest in
# the jq array DIGESTS.
IT_TYPE=application/vnd.in-toto+json
H5=5555555555555555555555555555555555555555555555555555555555555555
VAT=2026-11-29T10:00:00.123Z
IAT=2026-11-29T10:05:00.456Z
att_stmt() {
	jq -cn --argjson t "$1" --argjson d "$2" --arg v "$VAT" --arg i "$IAT" '{
		_type: "https://in-toto.io/Statement/v1",
		subject: [$d | to_entries[] | {name: "copy-\(.key)/round-00004", digest: {sha256: .value}}],
		predicateType: "urn:lensemble-verifyd:verdict:v1",
		predicate: {state: "verified", trusted: $t,
			chain: {status: "intact", length: 5, root: $d[0]}, commitment: null,
			verified_at: $v, issued_at: $i,
			verifier: {name: "lensemble-verifyd", version: "test"}}}'
}
# att_env TYPE PAYLOAD NAME: a DSSE envelope signed by $K/NAME.key with
# openssl pkeyutl -sign -rawin over the PAE built in shell.
att_env() {
	printf '%s' "$2" > "$WORK/att-payload.bin"
	{ printf 'DSSEv1 %d %s %d ' "${#1}" "$1" "$(wc -c < "$WORK/att-payload.bin")"
	  cat "$WORK/att-payload.bin"; } > "$WORK/att-pae.bin"
	openssl pkeyutl -sign -rawin -inkey "$K/$3.key" -in "$WORK/att-pae.bin" -out "$WORK/att-sig.bin"
	jq -cn --arg t "$1" --arg p "$(base64 -w0 < "$WORK/att-payload.bin")" \
		--arg k "$(key_id "$K/$3.pub")" --arg s "$(base64 -w0 < "$WORK/att-sig.bin")" \
		'{payloadType: $t, payload: $p, signatures: [{keyid: $k, sig: $s}]}'
}
va() { "$V" verify-attestation "$@"; }
va_stdin() { "$V" verify-attestation --key "$1" - < "$2"; }
A="$WORK/att"
mkdir -p "$A"
att_env "$IT_TYPE" "$(att_stmt true "[\"$H4\",\"$H4\"]")" ossl > "$A/good.json"
exits "verify-attestation accepts a trusted verdict signed by openssl" 0 \
	va --key "$K/ossl.pub" "$A/good.json"
check "and prints one line naming the hash, the times and the key" \
	"trusted $H4 (verified_at $VAT, issued_at $IAT, key $OID)" "$(cat "$WORK/out")"
exits "it reads the attestation from standard input with -" 0 va_stdin "$K/ossl.pub" "$A/good.json"
check "the same line" "trusted $H4 (verified_at $VAT, issued_at $IAT, key $OID)" "$(cat "$WORK/out")"
exits "--expect the hash it names: 0" 0 va --key "$K/ossl.pub" --expect "$H4" "$A/good.json"
exits "--expect another hash: 1" 1 va --key "$K/ossl.pub" --expect "$H5" "$A/good.json"
says "it names both hashes" "about $H4, not the expected $H5"
check "and prints nothing on standard output" "" "$(cat "$WORK/out")"

att_env "$IT_TYPE" "$(att_stmt false "[\"$H4\"]")" ossl > "$A/untrusted.json"
exits "a verdict with trusted false: 1" 1 va --key "$K/ossl.pub" "$A/untrusted.json"
says "it says it is not trusted" "is not trusted"

att_env "$IT_TYPE" "$(att_stmt true "[\"$H4\"]")" coord > "$A/coord.json"
exits "a verdict signed by another key: 1" 1 va --key "$K/ossl.pub" "$A/coord.json"
says "as an unknown key" "unknown_key"
jq -c --arg id "$OID" '.signatures[0].keyid = $id' "$A/coord.json" > "$A/claim.json"
exits "signed by another key that claims this key's id: 1" 1 va --key "$K/ossl.pub" "$A/claim.json"
says "as a bad signature" "bad_signature"

jq -c --arg p "$(att_stmt true "[\"$H4\"]" | base64 -w0)" '.payload = $p' \
	"$A/untrusted.json" > "$A/swapped.json"
exits "an untrusted verdict's payload swapped for a trusted one: 1" 1 \
	va --key "$K/ossl.pub" "$A/swapped.json"
says "as a bad signature" "bad_signature"

att_env application/json "$(att_stmt true "[\"$H4\"]")" ossl > "$A/type.json"
exits "a signed verdict with another payloadType: 1" 1 va --key "$K/ossl.pub" "$A/type.json"
says "as a wrong payload type" "payload_type"
jq -c --arg t "$IT_TYPE" '.payloadType = $t' "$A/type.json" > "$A/retyped.json"
exits "its payloadType rewritten after signing: 1" 1 va --key "$K/ossl.pub" "$A/retyped.json"
says "as a bad signature" "bad_signature"

att_env "$IT_TYPE" "$(att_stmt true "[\"$H4\",\"$H5\"]")" ossl > "$A/two.json"
exits "subjects with two different digests: 1" 1 va --key "$K/ossl.pub" "$A/two.json"
says "it says so" "different digests"
exits "even with --expect one of them" 1 va --key "$K/ossl.pub" --expect "$H4" "$A/two.json"
att_env "$IT_TYPE" "$(att_stmt true '[]')" ossl > "$A/none.json"
exits "no subject: 1" 1 va --key "$K/ossl.pub" "$A/none.json"
att_env "$IT_TYPE" "$(att_stmt true "[\"$(echo "$H4" | tr a-f A-F)\"]")" ossl > "$A/upper.json"
exits "an upper-case digest: 1" 1 va --key "$K/ossl.pub" "$A/upper.json"

att_env "$IT_TYPE" "$(att_stmt true "[\"$H4\"]" | jq -c '.predicateType = "https://slsa.dev/provenance/v1"')" \
	ossl > "$A/ptype.json"
exits "another predicateType: 1" 1 va --key "$K/ossl.pub" "$A/ptype.json"
says "it names the field" "predicateType"
att_env "$IT_TYPE" "$(att_stmt true "[\"$H4\"]" | jq -c '._type = "https://in-toto.io/Statement/v0.1"')" \
	ossl > "$A/v01.json"
exits "an in-toto Statement v0.1: 1" 1 va --key "$K/ossl.pub" "$A/v01.json"
att_env "$IT_TYPE" "$(att_stmt true "[\"$H4\"]" | jq -c '.predicate.trusted = "true"')" \
	ossl > "$A/string.json"
exits "trusted as the string \"true\": 1" 1 va --key "$K/ossl.pub" "$A/string.json"
att_env "$IT_TYPE" "$(att_stmt false "[\"$H4\"]" | sed 's/"trusted":false/"trusted":false,"trusted":true/')" \
	ossl > "$A/dup.json"
exits "trusted false then true, a duplicate key: 1" 1 va --key "$K/ossl.pub" "$A/dup.json"
says "the strict parser refuses it" "not strict JSON"
att_env "$IT_TYPE" "$(att_stmt true "[\"$H4\"]" | jq -c '.predicate.issued_at = "now\nforged line"')" \
	ossl > "$A/time.json"
exits "an issued_at that is not an RFC 3339 time: 1" 1 va --key "$K/ossl.pub" "$A/time.json"
exits "a roundclose envelope is no attestation: 1" 1 va --key "$K/coord.pub" "$WORK/rc.json"

exits "verify-attestation without --key: 2" 2 va "$A/good.json"
exits "an upper-case --expect: 2" 2 va --key "$K/ossl.pub" \
	--expect "$(echo "$H4" | tr a-f A-F)" "$A/good.json"
exits "two files: 2" 2 va --key "$K/ossl.pub" "$A/good.json" "$A/good.json"
exits "--expect given twice: 2" 2 va --key "$K/ossl.pub" --expect "$H4" --expect "$H4" "$A/good.json"
exits "--help lists verify-attestation" 0 "$V" --help
says "with its options" "lensemble-verify verify-attestation --key PUBFILE \[--expect HASH\] FILE"

finish
