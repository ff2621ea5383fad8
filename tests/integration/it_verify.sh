#!/bin/sh
# POST /verify in its three forms, 200 and 202, and every error status.
. "$top_srcdir/tests/integration/lib.sh"

cp -r "$DATA/store-basic/." "$STORE/"
H3=0a180a891c6e40afe74b71a0f047a2f08ff387a88554a40a2460f72d55fea8b7
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
start_daemon
# The first pass over the whole store must be over, not only round 4's:
# a verification still running would add to verifications_total below.
settled() {
	[ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ] &&
		[ "$(state_of "$H4")" = verified ]
}
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"

before=$(metric verifications_total)
r=$(post /verify "{\"content_hash\":\"$H4\"}")
check "content_hash form: 200 verdict ok" ok "$(echo "$r" | jq -r .verdict)"
check "it carries the status object" "$H4" "$(echo "$r" | jq -r .content_hash)"
check "and no reasons" 0 "$(echo "$r" | jq '.reasons | length')"
check "it re-verified instead of answering from cache" $((before + 1)) "$(metric verifications_total)"

rc="{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":3,\"global_model_hash\":\"$H4\"}"
check "RoundClose for round 3 naming round 4's hash: ok" ok "$(post /verify "$rc" | jq -r .verdict)"
rc1="{\"schema_version\":1,\"kind\":\"round_close\",\"round_index\":3,\"global_model_hash\":\"$H4\"}"
check "RoundClose schema_version 1 is accepted" ok "$(post /verify "$rc1" | jq -r .verdict)"
bad="{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":2,\"global_model_hash\":\"$H4\"}"
r=$(post /verify "$bad")
check "RoundClose whose round is not the artifact's minus one: fail" fail "$(echo "$r" | jq -r .verdict)"
check "with a reason naming the rounds" 1 "$(echo "$r" | jq '[.reasons[] | select(test("round_index 4"))] | length')"

check "path form: ok" ok "$(post /verify '{"path":"round-00003"}' | jq -r .verdict)"
check "path form with the right expected_hash: ok" ok \
	"$(post /verify "{\"path\":\"round-00003\",\"expected_hash\":\"$H3\"}" | jq -r .verdict)"
check "path form with another expected_hash: fail" fail \
	"$(post /verify "{\"path\":\"round-00003\",\"expected_hash\":\"$H4\"}" | jq -r .verdict)"
check "an absolute path inside the store works" ok \
	"$(post /verify "{\"path\":\"$STORE/round-00003\"}" | jq -r .verdict)"

# 202: the answer is not held.
hdr=$(curl -s -D - -o "$WORK/body" -X POST -H 'Content-Type: application/json' \
	--data-binary "{\"content_hash\":\"$H3\"}" "$(url '/verify?wait=0')" | tr -d '\r')
check "wait=0 answers 202" 202 "$(echo "$hdr" | sed -n 's/^HTTP\/1.1 \([0-9]*\).*/\1/p')"
check "202 has a Location" "Location: /artifact/$H3" "$(echo "$hdr" | grep '^Location:')"

# A failed artifact: the verdict says why.
printf '\001' | dd of="$STORE/round-00002/weights.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
r=$(post /verify '{"path":"round-00002"}')
check "a tampered artifact verifies as fail" fail "$(echo "$r" | jq -r .verdict)"
check "with its code" checkpoint_integrity "$(echo "$r" | jq -r .code)"

# Errors.
check "415 without a JSON content type" 415 "$(code POST /verify -H 'Content-Type: text/plain' -d '{}')"
check "400 for invalid JSON" 400 "$(code POST /verify -H 'Content-Type: application/json' -d '{')"
check "400 for a duplicate key" 400 "$(code POST /verify -H 'Content-Type: application/json' -d "{\"content_hash\":\"$H4\",\"content_hash\":\"$H3\"}")"
check "400 for invalid UTF-8" 400 "$(printf '{"path":"\377"}' | curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @- "$(url /verify)")"
check "400 for an unknown field" 400 "$(code POST /verify -H 'Content-Type: application/json' -d "{\"content_hash\":\"$H4\",\"x\":1}")"
check "400 for a RoundClose with schema_version 3" 400 "$(code POST /verify -H 'Content-Type: application/json' -d "{\"schema_version\":3,\"kind\":\"round_close\",\"round_index\":3,\"global_model_hash\":\"$H4\"}")"
check "400 for wait=301" 400 "$(code POST '/verify?wait=301' -H 'Content-Type: application/json' -d "{\"content_hash\":\"$H4\"}")"
check "400 for wait=abc" 400 "$(code POST '/verify?wait=abc' -H 'Content-Type: application/json' -d "{\"content_hash\":\"$H4\"}")"
check "400 for a path outside the store" 400 "$(code POST /verify -H 'Content-Type: application/json' -d '{"path":"../etc"}')"
check "400 for a hidden path" 400 "$(code POST /verify -H 'Content-Type: application/json' -d '{"path":".round-00001.tmp-x"}')"
check "404 for a hash no artifact claims" 404 "$(code POST /verify -H 'Content-Type: application/json' -d '{"content_hash":"1111111111111111111111111111111111111111111111111111111111111111"}')"
check "404 for a path with no artifact" 404 "$(code POST /verify -H 'Content-Type: application/json' -d '{"path":"round-00042"}')"
check "405 for GET /verify" 405 "$(code GET /verify)"
big=$(head -c 70000 /dev/zero | tr '\0' ' ')
check "413 for a body over 64 KiB" 413 "$(printf '%s' "$big" | curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @- "$(url /verify)")"
# A lying Content-Length is refused before any body byte is read.
r=$(printf 'POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n' |
	timeout 5 curl -s telnet://127.0.0.1:$PORT 2>/dev/null | head -n 1 | tr -d '\r')
check "413 for a declared length over the limit, with no body sent" "HTTP/1.1 413 Content Too Large" "$r"
check "the error body names the code" payload_too_large \
	"$(printf '%s' "$big" | curl -s -X POST -H 'Content-Type: application/json' --data-binary @- "$(url /verify)" | jq -r .error.code)"

# New artifacts named by path are adopted before any scan sees them.
"$MKART" --round 5 --parent "$H4" "$STORE/round-00005" > "$WORK/h5"
readable "$STORE/round-00005"
r=$(post /verify '{"path":"round-00005"}')
check "a directory no scan has seen yet verifies by path" ok "$(echo "$r" | jq -r .verdict)"
check "and is known by its hash afterwards" verified "$(state_of "$(cat "$WORK/h5")")"

finish
