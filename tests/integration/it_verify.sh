#!/bin/sh
# POST /verify in its three forms, 200 and 202, and every error status;
# the path form on directories and tars no scan has seen yet, alone, in a
# concurrent burst, and with clients that hang up.
. "$top_srcdir/tests/integration/lib.sh"
need tar

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

# --- The path form: a path the store does not know is looked up -------------
# Artifacts are built outside the store and renamed in, then named at
# once: the answer must not depend on whether a scan saw them first.
SRC="$WORK/src"
mkdir -p "$SRC"
WAIT=$((30 * SLOW))     # seconds an answer may be held, under valgrind too
# pack DIR TAR: a POSIX tar of DIR.
pack() { tar --format=posix -C "$(dirname "$1")" -cf "$2" "$(basename "$1")"; }
# verdict PATH: "verdict kind" of a path-form POST /verify that waits.
verdict() {
	post "/verify?wait=$WAIT" "{\"path\":\"$1\"}" | jq -r '"\(.verdict) \(.copies[0].kind)"'
}
detail() { post /verify "$1" | jq -r .error.detail; }

"$MKART" --round 0 --seed 60 "$SRC/late-dir" > "$WORK/h_late_dir"
"$MKART" --round 0 --seed 61 "$SRC/late" > "$WORK/h_late_tar"
pack "$SRC/late" "$SRC/late.tar"
readable "$SRC"
mv "$SRC/late-dir" "$STORE/late-dir"
mv "$SRC/late.tar" "$STORE/late.tar"
check "a directory named by path as it appears: ok" "ok dir" "$(verdict late-dir)"
check "a tar named by path as it appears: ok" "ok tar" "$(verdict late.tar)"
check "the tar is known by its hash afterwards" verified "$(state_of "$(cat "$WORK/h_late_tar")")"
r=$(post "/verify?wait=$WAIT" "{\"path\":\"late.tar\",\"expected_hash\":\"$(cat "$WORK/h_late_dir")\"}")
check "a tar with another expected_hash: fail" fail "$(echo "$r" | jq -r .verdict)"

# What is not an artifact: 404, saying "artifact", not "directory".
mkdir -p "$STORE/plain-dir"
echo notes > "$STORE/notes.txt"
ln -s "$STORE/late.tar" "$STORE/link.tar"
readable "$STORE"
for p in round-00042 plain-dir notes.txt link.tar late-dir/weights.safetensors; do
	check "404 for $p, an artifact nowhere" "404 no artifact at that path" \
		"$(code POST /verify -H 'Content-Type: application/json' -d "{\"path\":\"$p\"}") $(detail "{\"path\":\"$p\"}")"
done
check "400 for a path outside the store, saying artifact" \
	'path must name an artifact inside the store, without ".." or hidden parts' "$(detail '{"path":"../etc"}')"
check "404 for a hash no artifact claims, saying artifact" "no artifact in the store claims this hash" \
	"$(detail '{"content_hash":"1111111111111111111111111111111111111111111111111111111111111111"}')"

# A burst of concurrent path-form requests, most for paths no scan has
# seen yet: six directories and six tars renamed in as one run, each
# named three times, and six paths with no artifact.
mkdir -p "$SRC/burst"
for i in 1 2 3 4 5 6; do
	"$MKART" --round 0 --seed $((70 + i)) --bytes 65536 "$SRC/burst/d$i" > /dev/null
	"$MKART" --round 0 --seed $((80 + i)) --bytes 65536 "$SRC/t$i" > "$WORK/h_t$i"
	pack "$SRC/t$i" "$SRC/burst/t$i.tar"
done
readable "$SRC/burst"
mv "$SRC/burst" "$STORE/burst"
mkdir -p "$WORK/answers"
n=0 pids=
for i in 1 2 3 4 5 6; do
	for k in 1 2 3; do
		for p in "burst/d$i" "burst/t$i.tar"; do
			n=$((n + 1))
			curl -s -o "$WORK/answers/$n" -w '%{http_code}\n' -X POST -H 'Content-Type: application/json' \
				--data-binary "{\"path\":\"$p\"}" "$(url "/verify?wait=$WAIT")" > "$WORK/answers/$n.code" &
			pids="$pids $!"
		done
	done
	n=$((n + 1))
	curl -s -o "$WORK/answers/$n" -w '%{http_code}\n' -X POST -H 'Content-Type: application/json' \
		--data-binary "{\"path\":\"burst/none$i\"}" "$(url "/verify?wait=$WAIT")" > "$WORK/answers/$n.code" &
	pids="$pids $!"
done
# Not a bare wait: the daemon is a child of this shell too.
wait $pids
good=0 dirs=0 tars=0 missing=0
for f in "$WORK"/answers/*.code; do
	a=${f%.code}
	case "$(cat "$f") $(jq -r '"\(.verdict) \(.copies[0].kind) \(.error.detail)"' "$a" 2>/dev/null)" in
	"200 ok dir null") good=$((good + 1)); dirs=$((dirs + 1)) ;;
	"200 ok tar null") good=$((good + 1)); tars=$((tars + 1)) ;;
	"404 null null no artifact at that path") missing=$((missing + 1)) ;;
	*) not_ok "a burst answer: $(cat "$f") $(cat "$a")" ;;
	esac
done
check "the burst: every artifact verifies, 18 directories and 18 tars" "36 18 18" "$good $dirs $tars"
check "the burst: every path with no artifact is 404" 6 "$missing"
check "the burst's tars are known by their hashes" "verified verified" \
	"$(state_of "$(cat "$WORK/h_t1")") $(state_of "$(cat "$WORK/h_t6")")"

# Clients that hang up while their path is looked up or verified: the
# daemon goes on answering the others.
"$MKART" --round 0 --seed 90 "$SRC/gone" > /dev/null
pack "$SRC/gone" "$SRC/gone.tar"
readable "$SRC"
mv "$SRC/gone.tar" "$STORE/gone.tar"
pids=
for i in $(seq 1 20); do
	curl -s -o /dev/null --max-time 0.01 -X POST -H 'Content-Type: application/json' \
		--data-binary "{\"path\":\"gone.tar\"}" "$(url "/verify?wait=$WAIT")" &
	pids="$pids $!"
	curl -s -o /dev/null --max-time 0.01 -X POST -H 'Content-Type: application/json' \
		--data-binary "{\"path\":\"gone$i.tar\"}" "$(url "/verify?wait=$WAIT")" &
	pids="$pids $!"
done
wait $pids
check "after clients hung up, the path form still answers" "ok tar" "$(verdict gone.tar)"
check "and the daemon is healthy" 200 "$(code GET /healthz)"

finish
