#!/bin/sh
# lensemble-verify verify-oms and sign-oms: every bundle of model_signing's
# signed corpus (tests/data/oms, key and certificate methods) verifies,
# each mutation of it fails with exit 1 and a sentence naming what
# differs, and what sign-oms writes passes oms_check.py, an OMS verifier
# written from the specification with Python's cryptography. No daemon is
# started; lib.sh gives the scratch directory and the ok/check helpers.
. "$top_srcdir/tests/integration/lib.sh"
need openssl
need python3
need sha256sum
python3 -c 'import cryptography' 2>/dev/null || { echo "1..0 # SKIP python3-cryptography"; exit 77; }

V="$top_builddir/lensemble-verify"
PY="python3 $top_srcdir/tests/integration/oms_check.py"
D="$DATA/oms"
K="$D/keys"
PUB="$K/signing-key-pub.pem"
CA="$K/ca-cert.pem"

# exits DESC WANT COMMAND...: COMMAND's exit status is WANT.
exits() {
	local desc=$1 want=$2 rc
	shift 2
	"$@" > "$WORK/out" 2> "$WORK/err"
	rc=$?
	check "$desc" "$want" "$rc"
	[ "$rc" = "$want" ] || sed 's/^/#   /' "$WORK/out" "$WORK/err"
}
says() {
	if grep -q -- "$2" "$WORK/out" "$WORK/err"; then ok "$1"; else
		not_ok "$1: no '$2' in: $(cat "$WORK/out" "$WORK/err")"; fi
}
# fresh CASE: a writable copy of a corpus case in $WORK/m/CASE.
fresh() {
	rm -rf "$WORK/m"
	mkdir -p "$WORK/m"
	cp -r "$D/$1" "$WORK/m/$1"
	chmod -R u+w "$WORK/m"
	M="$WORK/m/$1"
}
# edit FILE PYTHON: rewrite the JSON bundle FILE with a Python expression
# over b (the bundle) and p (its decoded payload, written back).
edit() {
	python3 - "$1" "$2" <<'EOF'
import base64, json, sys
path, expr = sys.argv[1], sys.argv[2]
b = json.load(open(path))
p = json.loads(base64.b64decode(b["dsseEnvelope"]["payload"]))
exec(expr)
b["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(p).encode()).decode() \
    if "payload_kept" not in expr else b["dsseEnvelope"]["payload"]
json.dump(b, open(path, "w"))
EOF
}

# ---- the corpus -------------------------------------------------------------
for v in v0.3.1 v1.0.0; do
	exits "$v key, a one-file model (resource \".\", rawBytes): verified" 0 \
		"$V" verify-oms --key "$PUB" --signature "$D/$v-elliptic-key/model.sig" \
		"$D/$v-elliptic-key/signme-1"
done
for v in v1.0.1 v1.1.0; do
	exits "$v key, a directory with ignore-me ignored: verified" 0 \
		"$V" verify-oms --key "$PUB" --ignore-path ignore-me "$D/$v-elliptic-key"
done
for v in v0.3.1 v1.0.0 v1.0.1 v1.1.0; do
	exits "$v certificate, chain to the corpus CA: verified" 0 \
		"$V" verify-oms --ca-cert "$CA" --ignore-path ./ignore-me/ "$D/$v-certificate"
done
exits "v1.1.0 key: the bundle's own ignore_paths name ignore-me" 0 \
	"$V" verify-oms --key "$PUB" "$D/v1.1.0-elliptic-key"
exits "v1.0.1 key without --ignore-path: 1" 1 "$V" verify-oms --key "$PUB" "$D/v1.0.1-elliptic-key"
says "it names the unsigned file" '"ignore-me" is not in the signature'
exits "v1.0.1 certificate with --ignore-unsigned-files: verified" 0 \
	"$V" verify-oms --ca-cert "$CA" --ignore-unsigned-files "$D/v1.0.1-certificate"
exits "--json: one object" 0 "$V" verify-oms --json --key "$PUB" "$D/v1.1.0-elliptic-key"
check "it says verified, the method and the key" "true key e8450dec4eb99dae995da9af1bc2cc9f76ed669ee2e744f57abba763df3e3f8e" \
	"$(jq -r '"\(.verified) \(.method) \(.key_id)"' "$WORK/out")"
check "the subject's root digest" 92745110b1ab4368471cbe31664e10174e954b113a3df333db860317b2c6dec4 \
	"$(jq -r .root_digest "$WORK/out")"

# ---- mutations: each fails with 1 and names what differs -------------------------
fresh v1.1.0-elliptic-key
printf 'X' | dd of="$M/signme-1" bs=1 seek=3 conv=notrunc 2>/dev/null
exits "a byte of a file changed: 1" 1 "$V" verify-oms --key "$PUB" "$M"
says "it names the file and both digests" '"signme-1" differs from the signature: its sha256 is'

fresh v1.1.0-certificate
echo extra > "$M/extra.bin"
exits "an extra file: 1" 1 "$V" verify-oms --ca-cert "$CA" "$M"
says "it names the file" '"extra.bin" is not in the signature'
exits "... accepted with --ignore-unsigned-files" 0 \
	"$V" verify-oms --ca-cert "$CA" --ignore-unsigned-files "$M"
exits "... or with --ignore-path extra.bin" 0 "$V" verify-oms --ca-cert "$CA" --ignore-path extra.bin "$M"
mkdir -p "$M/sub/.git"
echo x > "$M/sub/.git/config"
exits "a default ignore matches at the top level only: sub/.git counts" 1 \
	"$V" verify-oms --ca-cert "$CA" --ignore-path extra.bin "$M"
says "it names it" '"sub/.git/config" is not in the signature'
rm -rf "$M/sub"
mkdir -p "$M/.git"
echo x > "$M/.git/config"
exits "... and .git at the top is ignored" 0 "$V" verify-oms --ca-cert "$CA" --ignore-path extra.bin "$M"

fresh v1.1.0-elliptic-key
rm "$M/signme-2"
exits "a missing file: 1" 1 "$V" verify-oms --key "$PUB" "$M"
says "it names the file" '"signme-2" is in the signature but missing'

mkdir "$M/signme-2"
exits "a resource naming a directory: 1" 1 "$V" verify-oms --key "$PUB" "$M"
says "it says so" 'resource "signme-2" names a directory'

fresh v1.1.0-elliptic-key
ln -s signme-1 "$M/link"
exits "a symbolic link in the model: 1" 1 "$V" verify-oms --key "$PUB" "$M"
says "it names it" '"link" is a symbolic link'

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out "$WORK/other.key" 2>/dev/null
openssl pkey -in "$WORK/other.key" -pubout -out "$WORK/other.pub"
chmod 600 "$WORK/other.key"
OTHER_HINT=$(sha256sum < "$WORK/other.pub" | cut -c1-64)
exits "another key (bundle with a hint): 1" 1 "$V" verify-oms --key "$WORK/other.pub" "$D/v1.1.0-elliptic-key"
says "it names both keys" "names key e8450dec.*not the key given ($OTHER_HINT)"
exits "another key (pre-v1.1 bundle with rawBytes): 1" 1 \
	"$V" verify-oms --key "$WORK/other.pub" --ignore-path ignore-me "$D/v1.0.1-elliptic-key"
says "it says the rawBytes hold another key" "rawBytes hold another public key"

fresh v1.1.0-elliptic-key
edit "$M/model.sig" "b['verificationMaterial']['publicKey']['hint'] = '$OTHER_HINT'; payload_kept = 1"
exits "a hint naming another key: 1" 1 "$V" verify-oms --key "$PUB" "$M"
says "it names the hinted key" "names key $OTHER_HINT"

fresh v1.1.0-elliptic-key
python3 - "$M/model.sig" "$D/v1.1.0-certificate/model.sig" <<'EOF'
import json, sys
b, o = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
b["dsseEnvelope"]["payload"] = o["dsseEnvelope"]["payload"]
json.dump(b, open(sys.argv[1], "w"))
EOF
exits "a payload swapped for another bundle's: 1" 1 "$V" verify-oms --key "$PUB" "$M"
says "the signature does not verify" "the DSSE signature does not verify"

$PY mkca "$WORK" || not_ok "mkca"
exits "a chain to another CA: 1" 1 "$V" verify-oms --ca-cert "$WORK/ca.pem" "$D/v1.1.0-certificate"
says "it says the chain does not verify" "does not verify against the CA certificates"
exits "a key bundle given a CA: 1" 1 "$V" verify-oms --ca-cert "$CA" "$D/v1.1.0-elliptic-key"
says "it says the bundle names a key" "names a public key, not a certificate chain"
exits "a certificate bundle given a key: 1" 1 "$V" verify-oms --key "$PUB" "$D/v1.1.0-certificate"
says "it says the bundle holds a chain" "signed by a certificate chain"

# Certificate bundles made by oms_check.py: a valid P-256 leaf, an expired one.
fresh v1.1.0-certificate
rm "$M/model.sig" "$M/ignore-me"
S1=$(sha256sum < "$M/signme-1" | cut -c1-64)
S2=$(sha256sum < "$M/signme-2" | cut -c1-64)
$PY statement "signme-1=$S1" "signme-2=$S2" > "$WORK/st.json"
$PY sign --key "$WORK/leaf.key" --cert "$WORK/leaf.pem" --statement "$WORK/st.json" > "$M/model.sig"
exits "a P-256 leaf of another CA, that CA given: verified" 0 \
	"$V" verify-oms --ca-cert "$WORK/ca.pem" "$M"
$PY sign --key "$WORK/expired.key" --cert "$WORK/expired.pem" --statement "$WORK/st.json" > "$M/model.sig"
exits "an expired leaf: 1" 1 "$V" verify-oms --ca-cert "$WORK/ca.pem" "$M"
says "it says the certificate has expired" "certificate has expired"

# Statements signed by a good key but naming paths no signer writes.
hostile() {
	local desc=$1 want=$2
	shift 2
	$PY statement "$@" > "$WORK/st.json"
	$PY sign --key "$WORK/leaf.key" --cert "$WORK/leaf.pem" --statement "$WORK/st.json" > "$M/model.sig"
	exits "$desc: 1" 1 "$V" verify-oms --ca-cert "$WORK/ca.pem" "$M"
	says "it says so" "$want"
}
hostile "a resource ../signme-1" "is not a relative path in canonical form" "../signme-1=$S1" "signme-2=$S2"
hostile "an absolute resource name" "is not a relative path in canonical form" "/etc/passwd=$S1" "signme-2=$S2"
hostile "a resource ./signme-1" "is not a relative path in canonical form" "./signme-1=$S1" "signme-2=$S2"
hostile "a resource listed twice" 'resource "signme-1" is listed twice' "signme-1=$S1" "signme-1=$S1" "signme-2=$S2"
hostile "unsorted resources" "not sorted by name" "signme-2=$S2" "signme-1=$S1"
hostile "a resource the model lacks" '"signme-3" is in the signature but missing' \
	"signme-1=$S1" "signme-2=$S2" "signme-3=$S2"

# ---- sign-oms: checked by oms_check.py and by verify-oms -----------------------
# certtool wrote the corpus key as SEC1 text: PKCS#8, as openssl genpkey writes it.
KEY="$WORK/sign.key"
(umask 077 && openssl pkey -in "$K/signing-key.pem" -out "$KEY")
mkdir -p "$WORK/model/sub dir" "$WORK/model/.git"
printf 'weights' > "$WORK/model/w.bin"
printf 'a-b' > "$WORK/model/a-b"
printf 'nested' > "$WORK/model/sub dir/x.json"
: > "$WORK/model/empty"
echo cache > "$WORK/model/cache"
echo ref > "$WORK/model/.git/HEAD"
exits "sign-oms with the corpus key: 0" 0 "$V" sign-oms --key "$KEY" --ignore-path cache "$WORK/model"
SIG="$WORK/model/model.sig"
check "the hint is the one model_signing computes for the key" 	e8450dec4eb99dae995da9af1bc2cc9f76ed669ee2e744f57abba763df3e3f8e 	"$(jq -r .verificationMaterial.publicKey.hint "$SIG")"
check "keyid is empty, tlogEntries too" '"" 0' 	"$(jq -r '"\"\(.dsseEnvelope.signatures[0].keyid)\" \(.verificationMaterial.tlogEntries | length)"' "$SIG")"
jq -r .dsseEnvelope.payload "$SIG" | base64 -d > "$WORK/payload.json"
check "resources sorted by code point" "a-b empty sub dir/x.json w.bin" \
	"$(jq -r '[.predicate.resources[].name] | join(" ")' "$WORK/payload.json")"
check "ignore_paths: the defaults, --ignore-path and the signature" \
	".git .gitattributes .github .gitignore cache model.sig" \
	"$(jq -r '.predicate.serialization.ignore_paths | join(" ")' "$WORK/payload.json")"
check "the subject is the directory's name" model "$(jq -r '.subject[0].name' "$WORK/payload.json")"
exits "oms_check.py verifies it" 0 $PY verify --key "$PUB" --signature "$SIG" "$WORK/model"
exits "verify-oms verifies it" 0 "$V" verify-oms --key "$PUB" "$WORK/model"
printf 'W' | dd of="$WORK/model/w.bin" bs=1 seek=0 conv=notrunc 2>/dev/null
exits "a byte changed: oms_check.py refuses" 1 $PY verify --key "$PUB" --signature "$SIG" "$WORK/model"
exits "a byte changed: verify-oms refuses" 1 "$V" verify-oms --key "$PUB" "$WORK/model"
says "naming the file" '"w.bin" differs'

rm "$SIG"
exits "sign-oms --shards 3 into another file: 0" 0 "$V" sign-oms --key "$KEY" --shards 3 \
	--signature "$WORK/shards.sig" "$WORK/model"
jq -r .dsseEnvelope.payload "$WORK/shards.sig" | base64 -d > "$WORK/payload.json"
check "shards of 3 bytes, none for the empty file" "a-b:0:3 cache:0:3 cache:3:6 sub dir/x.json:0:3 sub dir/x.json:3:6 w.bin:0:3 w.bin:3:6 w.bin:6:7" \
	"$(jq -r '[.predicate.resources[].name] | join(" ")' "$WORK/payload.json")"
exits "oms_check.py verifies the shards" 0 $PY verify --key "$PUB" --signature "$WORK/shards.sig" "$WORK/model"
exits "verify-oms verifies the shards" 0 "$V" verify-oms --key "$PUB" --signature "$WORK/shards.sig" "$WORK/model"
printf 'x' >> "$WORK/model/w.bin"
exits "a file grown by a byte: 1" 1 "$V" verify-oms --key "$PUB" --signature "$WORK/shards.sig" "$WORK/model"
says "it says where the shards end" '"w.bin" is 8 bytes long; the signature'"'"'s shards of it end at byte 7'

# Many shards hashed on several threads: the same bundle, the same verdict
# and the same sentences as on one, a difference in one shard included.
mkdir -p "$WORK/many/sub"
head -c 300000 /dev/urandom > "$WORK/many/a.bin"
head -c 123457 /dev/urandom > "$WORK/many/sub/b.bin"
head -c 4096 /dev/urandom > "$WORK/many/c.bin"
: > "$WORK/many/empty"
exits "sign-oms --shards 1000 --jobs 4: 0" 0 "$V" sign-oms --key "$KEY" --shards 1000 --jobs 4 \
	--signature "$WORK/many4.sig" "$WORK/many"
exits "sign-oms --shards 1000 --jobs 1: 0" 0 "$V" sign-oms --key "$KEY" --shards 1000 --jobs 1 \
	--signature "$WORK/many1.sig" "$WORK/many"
check "the same statement on 4 threads as on 1" \
	"$(jq -r .dsseEnvelope.payload "$WORK/many1.sig")" "$(jq -r .dsseEnvelope.payload "$WORK/many4.sig")"
check "429 shards" 429 "$(jq -r .dsseEnvelope.payload "$WORK/many4.sig" | base64 -d | jq '.predicate.resources | length')"
exits "oms_check.py verifies them" 0 $PY verify --key "$PUB" --signature "$WORK/many4.sig" "$WORK/many"
for j in 1 3 8; do
	exits "verify-oms --jobs $j: 0" 0 "$V" verify-oms --json --jobs $j --key "$PUB" --signature "$WORK/many4.sig" "$WORK/many"
	mv "$WORK/out" "$WORK/many-ok-$j"
done
check "--jobs 3 says what --jobs 1 says" "$(cat "$WORK/many-ok-1")" "$(cat "$WORK/many-ok-3")"
check "--jobs 8 says what --jobs 1 says" "$(cat "$WORK/many-ok-1")" "$(cat "$WORK/many-ok-8")"
printf 'X' | dd of="$WORK/many/a.bin" bs=1 seek=123456 conv=notrunc 2>/dev/null
printf 'Y' | dd of="$WORK/many/sub/b.bin" bs=1 seek=5 conv=notrunc 2>/dev/null
for j in 1 3 8; do
	exits "a byte changed in two shards, --jobs $j: 1" 1 "$V" verify-oms --json --jobs $j --key "$PUB" \
		--signature "$WORK/many4.sig" "$WORK/many"
	mv "$WORK/out" "$WORK/many-bad-$j"
done
check "--jobs 3 reports what --jobs 1 reports" "$(cat "$WORK/many-bad-1")" "$(cat "$WORK/many-bad-3")"
check "--jobs 8 reports what --jobs 1 reports" "$(cat "$WORK/many-bad-1")" "$(cat "$WORK/many-bad-8")"
check "the shards that differ, in order" '"a.bin" bytes 123000..124000|"sub/b.bin" bytes 0..1000' \
	"$(jq -r '[.differences[] | sub(" differ from.*"; "")] | join("|")' "$WORK/many-bad-3")"
exits "--jobs 0: 2" 2 "$V" verify-oms --jobs 0 --key "$PUB" "$WORK/many"

# Ranges of a MiB and more are hashed from a mapping: shards that start
# inside a page, and a whole file, give the digests of the bytes read.
mkdir -p "$WORK/big"
head -c 3145733 /dev/urandom > "$WORK/big/w.bin"
for j in 1 2; do
	exits "sign-oms a 3 MiB file in shards of 1048583, --jobs $j: 0" 0 "$V" sign-oms --key "$KEY" \
		--shards 1048583 --jobs $j --signature "$WORK/big$j.sig" "$WORK/big"
done
check "the same statement on 2 threads as on 1" \
	"$(jq -r .dsseEnvelope.payload "$WORK/big1.sig")" "$(jq -r .dsseEnvelope.payload "$WORK/big2.sig")"
check "the middle shard's digest is that of its bytes" \
	"$(tail -c +1048584 "$WORK/big/w.bin" | head -c 1048583 | sha256sum | cut -c1-64)" \
	"$(jq -r .dsseEnvelope.payload "$WORK/big2.sig" | base64 -d | jq -r '.predicate.resources[1].digest')"
exits "oms_check.py verifies the mapped shards" 0 $PY verify --key "$PUB" --signature "$WORK/big2.sig" "$WORK/big"
exits "sign-oms the 3 MiB file whole: 0" 0 "$V" sign-oms --key "$KEY" --signature "$WORK/bigw.sig" "$WORK/big"
check "its digest is that of the file" "$(sha256sum < "$WORK/big/w.bin" | cut -c1-64)" \
	"$(jq -r .dsseEnvelope.payload "$WORK/bigw.sig" | base64 -d | jq -r '.predicate.resources[0].digest')"
exits "oms_check.py verifies the mapped file" 0 $PY verify --key "$PUB" --signature "$WORK/bigw.sig" "$WORK/big"
printf 'Z' | dd of="$WORK/big/w.bin" bs=1 seek=2200000 conv=notrunc 2>/dev/null
exits "a byte changed in the last shard: 1" 1 "$V" verify-oms --json --key "$PUB" --signature "$WORK/big2.sig" "$WORK/big"
check "the shard that differs" '"w.bin" bytes 2097166..3145733' \
	"$(jq -r '[.differences[] | sub(" differ from.*"; "")] | join("|")' "$WORK/out")"
exits "a byte changed: the whole file refused" 1 "$V" verify-oms --key "$PUB" --signature "$WORK/bigw.sig" "$WORK/big"
says "naming it" '"w.bin" differs'

"$V" keygen --type ec-p256 "$WORK/p256" > "$WORK/out" 2>&1 || not_ok "keygen --type ec-p256"
check "keygen --type ec-p256 prints the OMS hint" "$(sha256sum < "$WORK/p256.pub" | cut -c1-64)" "$(cat "$WORK/out")"
check "openssl reads a P-256 key" "ASN1 OID: prime256v1" \
	"$(openssl pkey -in "$WORK/p256.key" -noout -text 2>/dev/null | grep 'ASN1 OID')"
exits "a single file signed with a P-256 key" 0 "$V" sign-oms --key "$WORK/p256.key" \
	--signature "$WORK/one.sig" "$WORK/model/w.bin"
check "named \".\" as model_signing names it" . \
	"$(jq -r .dsseEnvelope.payload "$WORK/one.sig" | base64 -d | jq -r '.predicate.resources[0].name')"
exits "oms_check.py verifies it" 0 $PY verify --key "$WORK/p256.pub" --signature "$WORK/one.sig" "$WORK/model/w.bin"
exits "verify-oms verifies it" 0 "$V" verify-oms --key "$WORK/p256.pub" --signature "$WORK/one.sig" "$WORK/model/w.bin"
"$V" keygen --type ec-p384 "$WORK/p384" > /dev/null 2>&1 || not_ok "keygen --type ec-p384"
exits "another P-384 key does not verify it" 1 "$V" verify-oms --key "$WORK/p384.pub" --signature "$WORK/one.sig" "$WORK/model/w.bin"
ln -s w.bin "$WORK/model/link"
exits "sign-oms refuses a symbolic link: 2" 2 "$V" sign-oms --key "$KEY" "$WORK/model"
says "naming it" '"link" is a symbolic link'
rm "$WORK/model/link"
"$V" keygen "$WORK/ed" > /dev/null 2>&1
exits "sign-oms refuses an Ed25519 key" 2 "$V" sign-oms --key "$WORK/ed.key" "$WORK/model"
says "saying why" "ECDSA"
exits "sign-oms without --signature for a file: 2" 2 "$V" sign-oms --key "$KEY" "$WORK/model/w.bin"

# ---- exit 2: usage and unreadable input --------------------------------------
exits "no bundle: 2" 2 "$V" verify-oms --key "$PUB" "$D/v1.1.0-elliptic-key/signme-1"
exits "a missing bundle file: 2" 2 "$V" verify-oms --key "$PUB" --signature "$WORK/none.sig" "$D/v1.1.0-elliptic-key"
says "it names the file" "cannot read the signature"
exits "a key file that is not a key: 2" 2 "$V" verify-oms --key "$CA" "$D/v1.1.0-elliptic-key"
exits "both --key and --ca-cert: 2" 2 "$V" verify-oms --key "$PUB" --ca-cert "$CA" "$D/v1.1.0-elliptic-key"
exits "an ignore path with ..: 2" 2 "$V" verify-oms --key "$PUB" --ignore-path ../x "$D/v1.1.0-elliptic-key"
exits "no PATH: 2" 2 "$V" verify-oms --key "$PUB"

finish
