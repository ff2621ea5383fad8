#!/bin/sh
# While the daemon is starting (/readyz 503, its first store scan not
# done), a commitment is answered 503 not_ready with Retry-After, never a
# 4xx a coordinator would take for final: whatever the run (the root, a
# run only the configuration names) and whatever the commitment, one
# already recorded included. The first scan is held without a clock: the
# store's root is away, so no scan can finish until the test puts it back.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/trust.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
TOKEN=lensemble-operator-token-0123456789
printf '%s\n' "$TOKEN" > "$WORK/token"
chmod 644 "$WORK/token"
keygen coord
mkdir -p "$WORK/keys"
cp "$WORK/coord.pub" "$WORK/keys/"
chmod -R a+rX "$WORK/keys"
X1=1111111111111111111111111111111111111111111111111111111111111111
X2=2222222222222222222222222222222222222222222222222222222222222222
X3=3333333333333333333333333333333333333333333333333333333333333333
auth() { echo "Authorization: Bearer $TOKEN"; }
rc_body() { printf '{"schema_version":2,"kind":"round_close","round_index":%s,"global_model_hash":"%s"}' "$1" "$2"; }
envelope "$PT_RC" "$(rc_stmt . 21 "$X2")" coord > "$WORK/signed.json"

# seen NAME: "status code retry" of the answer curl left in NAME.h and
# NAME.out, retry when it has a Retry-After of some seconds
seen() {
	local after
	after=$(tr -d '\r' < "$WORK/$1.h" | sed -n 's/^[Rr]etry-[Aa]fter: //p')
	printf '%s %s %s' "$(sed -n '1s/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' "$WORK/$1.h")" \
		"$(jq -r '.error.code // "none"' "$WORK/$1.out")" \
		"$(case "$after" in [1-9]|[1-9][0-9]) echo retry ;; *) echo "no Retry-After" ;; esac)"
}

# answer NAME PATH BODY [curl args...]: seen of a POST
answer() {
	local name=$1 p=$2 b=$3; shift 3
	curl -s -X POST -H 'Content-Type: application/json' --data-binary "$b" "$@" \
		-D "$WORK/$name.h" -o "$WORK/$name.out" "$(url "$p")" > /dev/null
	seen "$name"
}

write_conf "trusted_keys = $WORK/keys" "token_file = $WORK/token" "rescan_interval = 1" \
	"genesis_hash = pinned-run:$X3"
start_daemon
check "a token post, recorded: 201" 201 \
	"$(code POST /roundclose -H "$(auth)" -H 'Content-Type: application/json' --data-binary "$(rc_body 20 "$X1")")"
check "a signed post, recorded: 201" 201 \
	"$(code POST /roundclose -H 'Content-Type: application/json' --data-binary @"$WORK/signed.json")"
stop_daemon

# --- starting: no scan can finish while the store's root is away -------------
mv "$STORE" "$WORK/away"
launch_daemon
curl -s -D "$WORK/readyz.h" -o "$WORK/readyz.out" "$(url /readyz)" > /dev/null
check "/readyz: 503 not_ready" "503 not_ready retry" "$(seen readyz)"
check "the token post already recorded: 503 not_ready, Retry-After" "503 not_ready retry" \
	"$(answer again /roundclose "$(rc_body 20 "$X1")" -H "$(auth)")"
check "a new token post: 503 not_ready, Retry-After" "503 not_ready retry" \
	"$(answer new /roundclose "$(rc_body 22 "$X3")" -H "$(auth)")"
check "the signed post already recorded: 503 not_ready, Retry-After" "503 not_ready retry" \
	"$(answer signed /roundclose "$(cat "$WORK/signed.json")")"
check "a post for a run only the configuration names: 503 not_ready, Retry-After" "503 not_ready retry" \
	"$(answer pinned '/roundclose?run=pinned-run' "$(rc_body 0 "$X1")" -H "$(auth)")"
check "a withdrawal: 503 not_ready" 503 \
	"$(code DELETE "/commitment?run=.&round=20&hash=$X1" -H "$(auth)")"
check "nothing was recorded meanwhile" 0 "$(grep -c 'commitment recorded' "$LOG")"
check "and the daemon is still not ready" 503 "$(code GET /readyz)"

# --- started: the same posts are answered for what they are -------------------
mv "$WORK/away" "$STORE"
wait_ready
check "the token post already recorded: 200" 200 \
	"$(code POST /roundclose -H "$(auth)" -H 'Content-Type: application/json' --data-binary "$(rc_body 20 "$X1")")"
check "the signed post already recorded: 200" 200 \
	"$(code POST /roundclose -H 'Content-Type: application/json' --data-binary @"$WORK/signed.json")"
check "the new token post: 201" 201 \
	"$(code POST /roundclose -H "$(auth)" -H 'Content-Type: application/json' --data-binary "$(rc_body 22 "$X3")")"
check "the run only the configuration names: 201" 201 \
	"$(code POST '/roundclose?run=pinned-run' -H "$(auth)" -H 'Content-Type: application/json' --data-binary "$(rc_body 0 "$X1")")"
check "a run that is none, once started: 400" 400 \
	"$(code POST '/roundclose?run=nowhere' -H "$(auth)" -H 'Content-Type: application/json' --data-binary "$(rc_body 0 "$X1")")"
stop_daemon
finish
