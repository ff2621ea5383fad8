#!/bin/sh
# Requests a hostile client sends, each answered at once with the JSON
# error object: a chunked body over max_body_bytes, thousands of header
# fields, NUL and control bytes in the request line and headers, a wrong
# token with a huge body, repeated or over-long query parameters, a
# Content-Length that is not a number, a transfer coding other than
# chunked. What libmicrohttpd answers itself, before any callback of
# ours, is checked at the end: one answer, its own HTML, and the
# connection closed at once.
# Raw sockets (/dev/tcp, read -t -u) need bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/integration/lib.sh"
need timeout

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f\n", b - a }'; }
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# is_error CODE BODY: exactly {"error":{"code":CODE,"detail":"<sentence>"}}.
is_error() {
	[ -n "$2" ] || return 1      # jq -e takes no input for a pass
	printf '%s' "$2" | jq -e --arg c "$1" '
	    (keys == ["error"]) and ((.error | keys) == ["code", "detail"]) and
	    .error.code == $c and (.error.detail | type == "string" and length > 0)' > /dev/null 2>&1
}

# raw TEXT [SECONDS]: TEXT sent as is (printf %b: \r, \n, \xHH, \0 are
# expanded, nothing else, so a "%00" in a path stays three characters) on
# a fresh connection; what comes back until the server closes or SECONDS
# pass goes to $WORK/raw. Sets STATUS, HEADERS and BODY, and RAW_SECONDS:
# from sending to the server's close (or SECONDS), read by builtins alone
# so that starting processes does not count. TEXT goes in one write:
# bash's printf writes a line at a time, and a server answering a
# malformed first line closes with the later ones unread, which resets
# the connection and may drop the answer before it is read.
raw() {
	printf '%b' "$1" > "$WORK/req"
	(
		exec 7<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
		t0=$EPOCHREALTIME
		cat "$WORK/req" >&7
		# Up to a NUL (none in an answer), the close, or the time limit.
		LC_ALL=C IFS= read -r -d '' -t "${2:-$((5 * SLOW))}" -u 7 answer
		t1=$EPOCHREALTIME
		printf '%s' "$answer"
		awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }' > "$WORK/raw-seconds"
	) > "$WORK/raw" 2>/dev/null
	RAW_SECONDS=$(cat "$WORK/raw-seconds" 2>/dev/null || echo 99)
	rm -f "$WORK/raw-seconds"
	parse_raw
}
parse_raw() {
	STATUS=$(head -n 1 "$WORK/raw" | awk '{ print $2 }')
	HEADERS=$(tr -d '\r' < "$WORK/raw" | awk '/^$/ { exit } { print }')
	BODY=$(tr -d '\r' < "$WORK/raw" | awk 'body { print } /^$/ { body = 1 }')
}
header_value() { printf '%s\n' "$HEADERS" | awk -v n="$1" 'tolower($0) ~ "^" tolower(n) ":" { sub(/^[^:]*: */, ""); print; exit }'; }

# check_error DESC STATUS CODE [NEEDLE]: the last answer was the JSON error,
# served as JSON, and its detail mentions NEEDLE.
check_error() {
	check "$1: status" "$2" "$STATUS"
	if is_error "$3" "$BODY"; then
		ok "$1: the JSON error object with code $3"
	else
		not_ok "$1: the JSON error object with code $3, got: $(printf '%s' "$BODY" | head -c 300)"
	fi
	case $(header_value Content-Type) in
	application/json*) ok "$1: served as application/json" ;;
	*) not_ok "$1: served as application/json, got '$(header_value Content-Type)'" ;;
	esac
	if [ -n "${4:-}" ]; then
		case $(printf '%s' "$BODY" | jq -r .error.detail 2>/dev/null) in
		*"$4"*) ok "$1: the detail says \"$4\"" ;;
		*) not_ok "$1: the detail says \"$4\": $BODY" ;;
		esac
	fi
}

# fetch METHOD PATH [curl args...] through curl: sets STATUS, HEADERS, BODY.
fetch() {
	local m=$1 p=$2; shift 2
	curl -s --max-time $((10 * SLOW)) -X "$m" -D "$WORK/hdrs" -o "$WORK/body" "$@" "$(url "$p")"
	STATUS=$(awk 'NR == 1 { print $2 }' "$WORK/hdrs" 2>/dev/null)
	HEADERS=$(tr -d '\r' < "$WORK/hdrs" 2>/dev/null)
	BODY=$(cat "$WORK/body" 2>/dev/null)
	rm -f "$WORK/hdrs" "$WORK/body"
}

TOKEN=lensemble-operator-token-0123456789
printf '%s\n' "$TOKEN" > "$WORK/token"
chmod 644 "$WORK/token"
H=$(printf '%064d' 0 | tr 0 a)
write_conf "max_body_bytes = 1024" "token_file = $WORK/token" "connection_timeout = 15"
start_daemon

# ---- a chunked body over max_body_bytes --------------------------------
# One 2000-byte chunk, then nothing: the body never ends. The 413 must
# come at once, not when a timeout closes the connection.
rm -f "$WORK/raw"
(
	exec 7<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
	t0=$EPOCHREALTIME
	printf 'POST /verify HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n' >&7
	head -c 2000 /dev/zero | tr '\0' ' ' >&7
	printf '\r\n' >&7
	# The answer's head, up to the blank line, and its body.
	while IFS= read -r -t $((12 * SLOW)) -u 7 line; do
		printf '%s\n' "$line"
		[ "$line" = $'\r' ] && break
	done
	# The body has no line end: read stops at the end of the stream.
	read -r -t $((12 * SLOW)) -u 7 line
	printf '%s\n' "$line"
	echo "answered $(since "$t0")" > "$WORK/chunked-t"
	# Then the server closes, without waiting for the rest of the body.
	if timeout $((5 * SLOW)) cat <&7 > /dev/null; then
		echo "closed $(since "$t0")" >> "$WORK/chunked-t"
	fi
) > "$WORK/raw" 2>/dev/null
parse_raw
check_error "a chunked body over max_body_bytes, left unfinished" 413 payload_too_large "1024"
check "the 413 closes the connection" close "$(header_value Connection)"
read -r _ t_answer < <(grep '^answered' "$WORK/chunked-t" 2>/dev/null) || t_answer=99
if below "$t_answer" $((3 * SLOW)); then     # connection_timeout is 15 s
	ok "the 413 comes at once (${t_answer} s), not after a timeout"
else
	not_ok "the 413 comes at once: it took ${t_answer} s"
fi
read -r _ t_closed < <(grep '^closed' "$WORK/chunked-t" 2>/dev/null) || t_closed=99
if below "$t_closed" $((4 * SLOW)); then
	ok "and the server closes the connection soon after (${t_closed} s)"
else
	not_ok "the server closes the connection soon after the 413: ${t_closed} s"
fi
# The whole body sent by curl, chunked, is refused too, and a body within
# the limit still goes through.
head -c 5000 /dev/zero | tr '\0' ' ' > "$WORK/big"
fetch POST /verify -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' --data-binary @"$WORK/big"
check_error "a whole chunked body over max_body_bytes" 413 payload_too_large
fetch POST /verify -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' \
	--data-binary "{\"content_hash\":\"$H\"}"
check "a chunked body within max_body_bytes is read (404: no artifact claims the hash)" 404 "$STATUS"

# ---- many header fields ------------------------------------------------
fields() { local i; for i in $(seq 1 "$1"); do printf 'X-F%d: v\\r\\n' "$i"; done; }
raw "GET /healthz HTTP/1.1\r\nHost: t\r\n$(fields 150)\r\n"
check_error "150 header fields" 431 request_header_too_large "header fields"
raw "GET /healthz HTTP/1.1\r\nHost: t\r\n$(fields 2500)\r\n"
check_error "2500 header fields" 431 request_header_too_large
raw "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n$(fields 40)\r\n"
check "40 header fields are served" 200 "$STATUS"

# ---- NUL and control bytes ---------------------------------------------
raw "GET /healthz HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer $TOKEN\0x\r\n\r\n"
check_error "a NUL in Authorization" 400 bad_request "NUL"
raw "GET /healthz HTTP/1.1\r\nAuthorization: Bearer \0$TOKEN\r\nHost: t\r\n\r\n"
check_error "a NUL in Authorization, before another field" 400 bad_request "NUL"
raw "GET /healthz HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer x\0\r\n\r\n"
check_error "a NUL ending Authorization" 400 bad_request "NUL"
raw "GET /healthz HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer a\x01b\r\n\r\n"
check_error "a control byte in Authorization" 400 bad_request "Authorization"
raw "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Note: a\x1bb\r\n\r\n"
check_error "a control byte in another header field" 400 bad_request "control"
raw "GET /healthz\0/x HTTP/1.1\r\nHost: t\r\n\r\n"
check_error "a NUL in the request line" 400 bad_request "NUL"
raw "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-Note: a\tb \r\n\r\n"
check "a tab and a trailing blank in a field are fine" 200 "$STATUS"
fetch POST /roundclose -H "Authorization: Bearer $(printf 'x\001y')" -H 'Content-Type: application/json' \
	--data-binary '{}'
check_error "POST /roundclose with a control byte in the token" 400 bad_request

# ---- the token before the body -----------------------------------------
raw "POST /roundclose HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer wrong-token-0123456789\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
check_error "POST /roundclose with a wrong token and a huge Content-Length" 401 unauthorized
check "with WWW-Authenticate" 'Bearer realm="lensemble-verifyd"' "$(header_value WWW-Authenticate)"
raw "POST /roundclose HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 1000000000\r\n\r\n"
check_error "POST /roundclose without a token, not JSON, with a huge Content-Length" 401 unauthorized
raw "POST /roundclose HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer $TOKEN\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
check_error "POST /roundclose with the token and a huge Content-Length" 413 payload_too_large
raw "DELETE /ledger?path=ledger.jsonl HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer wrong-token-0123456789\r\nContent-Length: 1000000000\r\n\r\n"
check_error "DELETE /ledger with a wrong token and a huge Content-Length" 401 unauthorized

# ---- the request target ------------------------------------------------
for p in '/healthz%00' '/no%00where' "/artifact/$H%00" '/artifacts?state=%00'; do
	raw "GET $p HTTP/1.1\r\nHost: t\r\n\r\n"
	check_error "%00 in GET $p" 400 bad_request "NUL"
done
raw "GET /healthz%0a HTTP/1.1\r\nHost: t\r\n\r\n"
check_error "%0a in a path" 400 bad_request "control"
fetch POST '/verify?wait=3&wait=400' -H 'Content-Type: application/json' --data-binary "{\"content_hash\":\"$H\"}"
check_error "a query parameter given twice (wait=3&wait=400)" 400 bad_request "more than once"
fetch GET '/artifacts?state=verified&state=failed'
check_error "state given twice" 400 bad_request "more than once"
long=$(head -c 2000 /dev/zero | tr '\0' a)
fetch DELETE "/ledger?path=$long" -H "Authorization: Bearer $TOKEN"
check_error "an over-long path query value" 400 bad_request "too long"
fetch GET "/artifacts?$(for i in $(seq 1 40); do printf 'k%d=1&' "$i"; done)"
check_error "40 query parameters" 400 bad_request "parameters"
fetch GET '/artifacts?state=verified'
check "a query within the limits is served" 200 "$STATUS"

# ---- the body's framing, and malformed requests ---------------------
# Each request gets exactly one answer, at once, and its connection is
# closed within a second: the JSON error wherever the daemon answers.
# status_lines: how many answers the last raw request got.
status_lines() { tr -d '\r' < "$WORK/raw" | grep -c '^HTTP/[0-9.]* [0-9][0-9][0-9] '; }
# once DESC TEXT: TEXT on a fresh connection; one answer, and the
# connection closed within a second.
once() {
	local t
	raw "$2" $((3 * SLOW))
	t=$RAW_SECONDS
	check "$1: exactly one answer" 1 "$(status_lines)"
	if below "$t" "$SLOW"; then
		ok "$1: answered and closed at once ($t s)"
	else
		not_ok "$1: answered and closed within a second: $t s"
	fi
}
POST='POST /verify HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n'
once "Content-Length: 1x" "${POST}Content-Length: 1x\r\n\r\n{}"
check_error "Content-Length: 1x" 400 bad_request "Content-Length"
once "Content-Length: -1" "${POST}Content-Length: -1\r\n\r\n"
check_error "Content-Length: -1" 400 bad_request "not a number"
once "an empty Content-Length" "${POST}Content-Length: \r\n\r\n"
check_error "an empty Content-Length" 400 bad_request "not a number"
once "a Content-Length over 2^64 - 1" "${POST}Content-Length: 99999999999999999999999\r\n\r\n"
check_error "a Content-Length over 2^64 - 1" 413 payload_too_large "1024"
once "two Content-Length fields" "${POST}Content-Length: 2\r\nContent-Length: 20\r\n\r\n{}"
check_error "two Content-Length fields" 400 bad_request "more than one Content-Length"
once "Transfer-Encoding: gzip with a body" "${POST}Transfer-Encoding: gzip\r\n\r\n{}"
check_error "Transfer-Encoding: gzip with a body" 501 not_implemented "gzip"
once "Transfer-Encoding: identity" "${POST}Transfer-Encoding: identity\r\n\r\n"
check_error "Transfer-Encoding: identity" 501 not_implemented "identity"
once "two Transfer-Encoding fields" "${POST}Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
check_error "two Transfer-Encoding fields" 501 not_implemented "more than one"
once "Transfer-Encoding: chunked beside a Content-Length" \
	"${POST}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
check_error "Transfer-Encoding: chunked beside a Content-Length" 400 bad_request "both"
# After an answered request on the same connection: the JSON error
# follows the first answer, and nothing else does.
raw "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n${POST}Content-Length: 1x\r\n\r\n" $((3 * SLOW))
check "Content-Length: 1x after a kept-alive request: two requests, two answers" 2 "$(status_lines)"
check "the second is the JSON 400" 'HTTP/1.1 400 Bad Request|bad_request' \
	"$(tr -d '\r' < "$WORK/raw" | grep '^HTTP/' | tail -n 1)|$(tr -d '\r' < "$WORK/raw" | tail -n 1 | jq -r .error.code 2>/dev/null)"

# What libmicrohttpd answers itself, before any callback of ours, in its
# own HTML (listed in docs/API.md): still one answer, at once, and the
# connection closed.
mhd_once() {
	once "$1" "$3"
	check "$1: libmicrohttpd's status" "$2" "$STATUS"
	case $BODY in
	'<html>'*) ok "$1: libmicrohttpd's HTML page" ;;
	*) not_ok "$1: libmicrohttpd's HTML page, got: $(printf '%s' "$BODY" | head -c 200)" ;;
	esac
}
mhd_once "GET / without an HTTP version" 400 'GET /\r\n\r\n'
mhd_once "GET /healthz HTTP/1.x" 400 'GET /healthz HTTP/1.x\r\nHost: t\r\n\r\n'
mhd_once "a header line without a colon" 400 'GET /healthz HTTP/1.1\r\nHost: t\r\nNo-Colon-Here\r\n\r\n'
mhd_once "a chunk size that is not hex" 400 "${POST}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
mhd_once "HTTP/9.9" 505 'GET /healthz HTTP/9.9\r\nHost: t\r\n\r\n'
mhd_once "the HTTP/2 preface" 505 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
# A request line without a space is closed on, unanswered.
raw 'GARBAGE\r\n\r\n' $((3 * SLOW))
t=$RAW_SECONDS
check "a request line without a space: no answer" 0 "$(status_lines)"
if below "$t" "$SLOW"; then
	ok "a request line without a space: closed at once ($t s)"
else
	not_ok "a request line without a space: closed within a second: $t s"
fi

check "after all of it the daemon still answers" 200 "$(code GET /healthz)"
finish
