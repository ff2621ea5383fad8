#!/bin/sh
# Every golden artifact and the store-basic rounds, served by the running
# daemon: each copy's state and code, the status object, the read routes
# and their error statuses.
. "$top_srcdir/tests/integration/lib.sh"

cp -r "$DATA/store-basic/." "$STORE/"
cp -r "$DATA/golden-cases" "$STORE/cases"
rm -f "$STORE/cases/cases.json"
mkdir -p "$STORE/.round-00009.tmp-abc"
cp -r "$DATA/golden-cases/round-00000/." "$STORE/.round-00009.tmp-abc/"
start_daemon

all_done() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
wait_for $((10 * SLOW)) all_done >/dev/null || not_ok "every artifact verified within 10 s"

copy_verdict() {
	get /artifacts | jq -r --arg p "$1" \
		'.artifacts[].copies[] | select(.path == $p) | "\(.state) \(.code // "none")"'
}

# The reference verdicts, case by case.
n=$(jq '.cases | length' "$DATA/golden-cases/cases.json")
i=0
while [ "$i" -lt "$n" ]; do
	name=$(jq -r ".cases[$i].name" "$DATA/golden-cases/cases.json")
	expect=$(jq -r ".cases[$i].expect" "$DATA/golden-cases/cases.json")
	if [ "$expect" = ok ]; then
		want="verified none"
		hash=$(jq -r ".cases[$i].content_hash" "$DATA/golden-cases/cases.json")
		check "$name: header round_index" "$(jq -r ".cases[$i].round_index" "$DATA/golden-cases/cases.json")" \
			"$(get "/artifact/$hash" | jq -r '.header.round_index')"
	else
		want="failed $(jq -r ".cases[$i].code" "$DATA/golden-cases/cases.json")"
	fi
	check "$name is $want" "$want" "$(copy_verdict "cases/$name")"
	i=$((i + 1))
done

# store-basic: every round verified, one copy each.
for h in $(jq -r '.artifacts | keys[]' "$DATA/store-basic/expected.json"); do
	check "store-basic $h is verified" verified "$(state_of "$h")"
done

# A hash with a failed copy is failed, with the failed copy's code.
h=4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753
body=$(get "/artifact/$h")
check "a hash with a tampered copy is failed" failed "$(echo "$body" | jq -r .state)"
check "its code is the failed copy's" checkpoint_integrity "$(echo "$body" | jq -r .code)"
check "all four copies are listed" 4 "$(echo "$body" | jq '.copies | length')"
check "the status object has every field" \
	'["bytes","chain","code","commitment","content_hash","copies","detail","header","legacy","state","tensors","trusted","untrusted_reason"]' \
	"$(echo "$body" | jq -c 'keys')"
check "a copy has every field" '["code","detail","duration_ms","kind","oms","path","state","trusted","verified_at"]' \
	"$(echo "$body" | jq -c '.copies[] | select(.path == "cases/round-00000") | keys')"
check "verified_at is RFC 3339 UTC" true \
	"$(echo "$body" | jq '.copies[0].verified_at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$")')"

# The hidden save in progress is not an artifact.
check "a hidden temporary directory is ignored" 0 \
	"$(get /artifacts | jq '[.artifacts[].copies[] | select(.path | contains("tmp"))] | length')"

# Filters and errors.
check "?state=failed lists only failed" '["failed"]' "$(get '/artifacts?state=failed' | jq -c '[.artifacts[].state] | unique')"
check "?state=failed lists 3 failed hashes and 3 headerless directories" 6 "$(get '/artifacts?state=failed' | jq '.artifacts | length')"
check "?state=bogus is 400" 400 "$(code GET '/artifacts?state=bogus')"
check "a short hash is 400" 400 "$(code GET /artifact/abc)"
check "an uppercase hash is 400" 400 "$(code GET /artifact/4D7ED7DEE40F9A70CD8C3601C869BCFBBCE35FF92723DA1DDD4937B6D8FCC753)"
check "an unknown hash is 404" 404 "$(code GET /artifact/0000000000000000000000000000000000000000000000000000000000000000)"
check "the 404 body is an error object" not_found \
	"$(get /artifact/0000000000000000000000000000000000000000000000000000000000000000 | jq -r .error.code)"
check "an unknown route is 404" 404 "$(code GET /nope)"
check "DELETE /artifact/... is 405" 405 "$(code DELETE "/artifact/$h")"
check "405 names the allowed methods" "Allow: GET, HEAD" \
	"$(curl -s -D - -o /dev/null -X PUT "$(url /artifacts)" | tr -d '\r' | grep '^Allow:')"
check "HEAD /artifact works" 200 "$(curl -s -o /dev/null -w '%{http_code}' -I "$(url "/artifact/$h")")"
check "/healthz is 200" 200 "$(code GET /healthz)"
check "/readyz is 200 once scanned" 200 "$(code GET /readyz)"
check "the access log names method, route, status and duration" 1 \
	"$(grep -c 'GET /healthz 200 [0-9.]* ms' "$LOG")"

finish
