#!/bin/sh
# HTTP limits, each set small: connections per address and in total, the
# idle and slow-client timeout, body and header sizes, JSON depth, UTF-8,
# methods and routes. Every refusal is the JSON error object, and the
# daemon keeps serving afterwards.
# Raw sockets (/dev/tcp, read -t -u) need bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/integration/lib.sh"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f\n", b - a }'; }
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# is_error CODE BODY: exactly {"error":{"code":CODE,"detail":"<sentence>"}}.
is_error() {
	printf '%s' "$2" | jq -e --arg c "$1" '
	    (keys == ["error"]) and (.error | type == "object") and
	    ((.error | keys) == ["code", "detail"]) and .error.code == $c and
	    (.error.detail | type == "string" and length > 0)' > /dev/null 2>&1
}

# fetch METHOD PATH [curl args...]: sets STATUS, HEADERS, BODY.
fetch() {
	local m=$1 p=$2; shift 2
	BODY=$(curl -s --max-time $((10 * SLOW)) -X "$m" -D "$WORK/hdrs" -o - "$@" "$(url "$p")")
	STATUS=$(awk 'NR == 1 { print $2 }' "$WORK/hdrs" 2>/dev/null)
	HEADERS=$(tr -d '\r' < "$WORK/hdrs" 2>/dev/null)
	rm -f "$WORK/hdrs"
}
header_value() { printf '%s\n' "$HEADERS" | awk -v n="$1" 'tolower($0) ~ "^" tolower(n) ":" { sub(/^[^:]*: */, ""); print; exit }'; }

# check_error DESC STATUS CODE: the last fetch was a JSON error.
check_error() {
	check "$1: status" "$2" "$STATUS"
	if is_error "$3" "$BODY"; then
		ok "$1: the body is the JSON error object with code $3"
	else
		not_ok "$1: the body is the JSON error object with code $3, got: $(printf '%s' "$BODY" | head -c 300)"
	fi
	case $(header_value Content-Type) in
	application/json*) ok "$1: served as application/json" ;;
	*) not_ok "$1: served as application/json, got '$(header_value Content-Type)'" ;;
	esac
}

# raw TEXT [SECONDS]: TEXT (printf escapes) on a fresh connection; prints
# what comes back until the server closes or SECONDS pass.
raw() {
	(
		exec 7<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
		printf "$1" >&7
		timeout "${2:-$((5 * SLOW))}" cat <&7
	) 2>/dev/null
}
raw_status() { raw "$@" | awk 'NR == 1 { print $2 }'; }
raw_body() { raw "$@" | tr -d '\r' | awk 'body { print } /^$/ { body = 1 }'; }

# ask FD: a GET /healthz on an open connection; prints the status, or
# "closed" or "none".
ask() {
	local line rc
	printf 'GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n' >&"$1" 2>/dev/null || { echo closed; return; }
	read -r -t $((5 * SLOW)) -u "$1" line; rc=$?
	line=${line%$'\r'}
	if [ "$rc" -eq 0 ] && [ -n "$line" ]; then
		printf '%s\n' "$line" | awk '{ print $2 }'
	elif [ "$rc" -gt 128 ]; then
		echo none
	else
		echo closed
	fi
	# The rest of the answer: headers and "ok\n".
	while read -r -t 0.3 -u "$1" line; do :; done
}

# closed_by_server FD SECONDS: the server ends the connection in time.
closed_by_server() {
	local line rc
	while :; do
		read -r -t "$2" -u "$1" line; rc=$?
		[ "$rc" -eq 0 ] && continue      # data, then keep reading
		[ "$rc" -eq 1 ] && return 0       # end of stream
		return 1                          # timed out
	done
}

# metric_on FD NAME: the metric NAME, asked on the open connection FD and
# kept alive: asking opens no connection of its own, which would take a
# slot until the daemon has seen it close. Empty when FD gets no answer.
metric_on() {
	local LC_ALL=C line len=0 body
	printf 'GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n' >&"$1" 2>/dev/null || return 0
	while IFS= read -r -t $((5 * SLOW)) -u "$1" line; do
		line=${line%$'\r'}
		[ -n "$line" ] || break
		case $line in [Cc]ontent-[Ll]ength:*) len=${line#*:} len=${len// /} ;; esac
	done
	IFS= read -r -d '' -N "$len" -t $((5 * SLOW)) -u "$1" body || return 0
	printf '%s\n' "$body" | awk -v n="lensemble_verifyd_$2" '$1 == n { print $2 }'
}

healthz_time() { curl -s -o /dev/null --max-time 10 -w '%{http_code} %{time_total}' "$(url /healthz)"; }

H=$(printf '%064d' 0 | tr 0 a)

# ---- connection limits ------------------------------------------------
write_conf "max_connections_per_ip = 3" "max_connections = 8" "connection_timeout = 60" \
	"max_body_bytes = 1024" "max_request_header_bytes = 2048" "max_json_depth = 4"
start_daemon
# Connection 3 asks for the counts: a connection that asked and closed
# would hold one of 127.0.0.1's three slots until the daemon saw it go.
# The readiness probes' connections must be reaped before counting: a
# daemon under valgrind takes a while to see them closed.
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
alone() { [ "$(metric_on 3 http_connections)" = 1 ]; }
if wait_for $((5 * SLOW)) alone > /dev/null; then
	ok "http_connections falls to 1 (the one asking) once other clients have gone"
else
	not_ok "http_connections falls to 1 once other clients have gone: $(metric_on 3 http_connections)"
fi
check "http_connections_limit is max_connections" 8 "$(metric_on 3 http_connections_limit)"

exec 4<>"/dev/tcp/127.0.0.1/$PORT"
two() { [ "$(metric_on 3 http_connections)" = 2 ]; }
if wait_for $((5 * SLOW)) two > /dev/null; then
	ok "http_connections counts the open connections"
else
	not_ok "http_connections counts the open connections: $(metric_on 3 http_connections)"
fi
exec 5<>"/dev/tcp/127.0.0.1/$PORT"
check "three connections from one address are served" "200 200 200" "$(ask 3) $(ask 4) $(ask 5)"
if exec 6<>"/dev/tcp/127.0.0.1/$PORT"; then
	if closed_by_server 6 $((3 * SLOW)); then
		ok "a 4th connection from one address (max_connections_per_ip = 3) is closed"
	else
		not_ok "a 4th connection from one address (max_connections_per_ip = 3) is closed"
	fi
	exec 6>&-
else
	ok "a 4th connection from one address (max_connections_per_ip = 3) is refused"
fi
check "a request on a 4th connection gets no answer" 000 \
	"$(curl -s -o /dev/null --max-time $((3 * SLOW)) -w '%{http_code}' "$(url /healthz)")"
check "the connections within the limit still get answers (1st)" 200 "$(ask 3)"
check "the connections within the limit still get answers (3rd)" 200 "$(ask 5)"
exec 4>&-
free_slot() { [ "$(code GET /healthz --max-time 1)" = 200 ]; }
if wait_for $((3 * SLOW)) free_slot > /dev/null; then
	ok "a slot freed by a client is usable again"
else
	not_ok "a slot freed by a client is usable again"
fi
exec 3>&- 5>&-
# The next checks open connections of their own from 127.0.0.1, which has
# just held all of its 3: they start once the daemon has seen those go.
settle_connections 1

# ---- body limits ------------------------------------------------------
check "413 on a declared Content-Length over max_body_bytes, before any body is sent" 413 \
	"$(raw_status 'POST /verify HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n')"
body=$(raw_body 'POST /verify HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n')
if is_error payload_too_large "$body"; then
	ok "the lying Content-Length gets the JSON error object"
else
	not_ok "the lying Content-Length gets the JSON error object, got: $body"
fi

printf '{"content_hash":"%s"}' "$H" > "$WORK/body"
pad=$((1024 - $(wc -c < "$WORK/body")))
{ cat "$WORK/body"; printf "%${pad}s" ''; } > "$WORK/exact"
check "a body of exactly max_body_bytes is read (404: no artifact claims the hash)" 404 \
	"$(code POST /verify -H 'Content-Type: application/json' --data-binary @"$WORK/exact")"
{ cat "$WORK/exact"; printf ' '; } > "$WORK/over"
fetch POST /verify -H 'Content-Type: application/json' --data-binary @"$WORK/over"
check_error "one byte over max_body_bytes" 413 payload_too_large
head -c 5000 /dev/zero | tr '\0' ' ' > "$WORK/big"
fetch POST /verify -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' \
	--data-binary @"$WORK/big"
check_error "a chunked body growing past max_body_bytes" 413 payload_too_large
check "the 413 closes the connection" close "$(header_value Connection)"

# ---- header limits ----------------------------------------------------
fetch GET /healthz -H "X-Filler: $(head -c 3000 /dev/zero | tr '\0' a)"
check_error "headers over max_request_header_bytes (2048)" 431 request_header_too_large
fetch GET /healthz -H "X-Filler: $(head -c 60000 /dev/zero | tr '\0' a)"
check_error "headers far over max_request_header_bytes (60000 bytes)" 431 request_header_too_large
fetch GET "/artifact/$(head -c 3000 /dev/zero | tr '\0' a)"
check_error "a request line (path) over max_request_header_bytes" 431 request_header_too_large
fetch GET "/artifacts?q=$(head -c 3000 /dev/zero | tr '\0' a)"
check_error "a request line (query string) over max_request_header_bytes" 431 request_header_too_large
check "headers within the limit are served" 200 "$(code GET /healthz -H "X-Filler: $(head -c 1000 /dev/zero | tr '\0' a)")"

# ---- request bodies ---------------------------------------------------
fetch POST /verify -H 'Content-Type: application/json' --data-binary '{"a":{"a":{"a":{"a":{"a":{"a":1}}}}}}'
check_error "a body nested deeper than max_json_depth (4)" 400 bad_request
case $BODY in *nest*|*deep*) ok "the detail names the nesting" ;; *) not_ok "the detail names the nesting: $BODY" ;; esac
fetch POST /verify -H 'Content-Type: application/json' --data-binary "{\"content_hash\":\"$H\",\"x\":[[1]]}"
check "a body within max_json_depth is parsed (400 for the unknown field, not the depth)" 400 "$STATUS"
case $BODY in *nest*|*deep*) not_ok "the shallow body is not refused for depth: $BODY" ;; *) ok "the shallow body is not refused for depth" ;; esac
printf '{"path":"round-\377\376"}' > "$WORK/badutf8"
fetch POST /verify -H 'Content-Type: application/json' --data-binary @"$WORK/badutf8"
check_error "invalid UTF-8 in a body" 400 bad_request
printf '{"content_hash":"%s\300\200"}' "$H" > "$WORK/overlong"
fetch POST /verify -H 'Content-Type: application/json' --data-binary @"$WORK/overlong"
check_error "an overlong UTF-8 encoding in a body" 400 bad_request
fetch POST /verify -H 'Content-Type: text/plain' --data-binary "{\"content_hash\":\"$H\"}"
check_error "a body that is not application/json" 415 unsupported_media_type
fetch POST /verify -H 'Content-Type: application/json' --data-binary '{"content_hash":'
check_error "truncated JSON" 400 bad_request

# ---- methods and routes -----------------------------------------------
for route in "/artifact/$H:GET, HEAD" "/verify:POST" "/roundclose:POST" "/chain:GET, HEAD" \
	"/artifacts:GET, HEAD" "/metrics:GET, HEAD" "/healthz:GET, HEAD" "/readyz:GET, HEAD"; do
	path=${route%%:*}
	allow=${route#*:}
	case $allow in POST) m=DELETE ;; *) m=POST ;; esac
	fetch "$m" "$path" -H 'Content-Type: application/json' --data-binary '{}'
	name=${path%"$H"}
	check_error "$m $name" 405 method_not_allowed
	check "$m $name names the allowed methods" "$allow" "$(header_value Allow)"
	fetch PUT "$path"
	check "PUT $name is 405 too" 405 "$STATUS"
done
fetch GET /no/such/route
check_error "an unknown route" 404 not_found
fetch GET /artifact/NOT-A-HASH
check_error "an artifact name that is not a hash" 400 bad_request
fetch GET "/artifact/$H"
check_error "a hash no artifact claims" 404 not_found
fetch GET "/artifacts?state=bogus"
check_error "an unknown state filter" 400 bad_request
fetch POST "/verify?wait=9999" -H 'Content-Type: application/json' --data-binary "{\"content_hash\":\"$H\"}"
check_error "a wait out of range" 400 bad_request
check "HEAD is answered on a GET route" 200 "$(curl -s -o /dev/null -I --max-time 5 -w '%{http_code}' "$(url /healthz)")"

check "after all of it the daemon still answers" 200 "$(code GET /healthz)"
stop_daemon

# ---- the total connection limit ---------------------------------------
# Two addresses, so the total limit is reached while neither address is
# at its own: max_connections = 3, max_connections_per_ip = 2.
# The holder asks once, so the daemon has surely accepted it, then idles,
# holding its connection until the test kills it (its sleep waits for
# nothing).
hold_from() {
	rm -f "$WORK/held"
	perl -MIO::Socket::INET -e '
	    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $ARGV[0],
	        LocalAddr => $ARGV[1]) or exit 1;
	    print $s "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
	    my $buf = "";
	    while ($buf !~ /\r\n\r\nok\n/) { sysread($s, $buf, 4096, length $buf) or exit 1 }
	    open(my $f, ">", $ARGV[2]) or exit 1; close $f;
	    sleep 120;' "$PORT" "$1" "$WORK/held" 3>&- 4>&- 5>&- 6>&- &
	HOLDER=$!
}
held() { [ -e "$WORK/held" ]; }
if command -v perl > /dev/null 2>&1 &&
	perl -MIO::Socket::INET -e 'IO::Socket::INET->new(LocalAddr => "127.0.0.2", Proto => "tcp") or exit 1'; then
	write_conf "max_connections = 3" "max_connections_per_ip = 2" "connection_timeout = 60"
	start_daemon
	exec 3<>"/dev/tcp/127.0.0.1/$PORT"
	wait_for $((5 * SLOW)) alone > /dev/null || not_ok "the readiness probes' connections are closed"
	exec 4<>"/dev/tcp/127.0.0.1/$PORT"
	check "two connections from 127.0.0.1 are served" "200 200" "$(ask 3) $(ask 4)"
	hold_from 127.0.0.2
	wait_for $((5 * SLOW)) held > /dev/null || not_ok "a third connection, from 127.0.0.2, is served"
	check "with 3 connections open (max_connections = 3), a 4th from another address is not served" 000 \
		"$(curl -s -o /dev/null --interface 127.0.0.2 --max-time $((3 * SLOW)) -w '%{http_code}' "$(url /healthz)")"
	check "the open connections still get answers" 200 "$(ask 3)"
	kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
	# Each of these takes the last free slot, then gives it back. One
	# that connects before the daemon has seen the one before it (or the
	# holder) go is refused at once, and asks again: no client may be
	# left waiting, and four are served in turn.
	worst=0 served=0 tries=0
	while [ "$served" -lt 4 ] && [ "$tries" -lt $((50 * SLOW)) ]; do
		tries=$((tries + 1))
		r=$(curl -s -o /dev/null --interface 127.0.0.2 --max-time $((5 * SLOW)) \
			-w '%{http_code} %{time_total}' "$(url /healthz)")
		[ "${r%% *}" = 200 ] && served=$((served + 1))
		below "$worst" "${r#* }" && worst=${r#* }
	done
	check "once a slot frees, new clients are served, one after the other ($tries tries)" 4 "$served"
	# One left waiting would wait out curl's --max-time (5 s).
	if below "$worst" "$(awk -v s="$SLOW" 'BEGIN { print 2 * s }')"; then
		ok "once a slot frees, new clients are served or refused at once (worst ${worst} s)"
	else
		not_ok "once a slot frees, new clients are served or refused at once: worst answer took ${worst} s"
	fi
	exec 3>&- 4>&-
	stop_daemon
else
	echo "# perl or a second loopback address is missing: the total limit is not tested"
fi

# ---- timeouts and slow clients ----------------------------------------
write_conf "connection_timeout = 2"
start_daemon

exec 3<>"/dev/tcp/127.0.0.1/$PORT"
t0=$(now)
if closed_by_server 3 $((10 * SLOW)); then
	t=$(since "$t0")
	if below "$t" $((5 * SLOW)) && below 1 "$t"; then
		ok "an idle connection is closed after about connection_timeout = 2 s ($t s)"
	else
		not_ok "an idle connection is closed after about connection_timeout = 2 s (took $t s)"
	fi
else
	not_ok "an idle connection is closed after about connection_timeout = 2 s (still open after 10 s)"
fi
exec 3>&-

# One byte a second of an endless request line and header, never finished.
rm -f "$WORK/slow" "$WORK/slow.open"
(
	trap '' PIPE
	exec 5<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
	: > "$WORK/slow.open"
	start=$(now)
	msg=$'GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: '
	i=0
	while [ "$i" -lt 15 ]; do
		if [ "$i" -lt "${#msg}" ]; then c=${msg:$i:1}; else c=a; fi
		printf '%s' "$c" >&5 2>/dev/null || { echo "cut $(since "$start")" > "$WORK/slow"; exit 0; }
		read -r -t 1 -u 5 line; rc=$?
		[ "$rc" -eq 1 ] && { echo "cut $(since "$start")" > "$WORK/slow"; exit 0; }
		i=$((i + 1))
	done
	echo "open $(since "$start")" > "$WORK/slow"
) &
SLOWPID=$!
slow_open() { [ -e "$WORK/slow.open" ] && [ "$(metric http_connections)" -ge 2 ]; }
wait_for $((5 * SLOW)) slow_open > /dev/null || not_ok "the slow client is connected"
# Asked again and again for as long as the slow client trickles (it ends
# by itself, cut off or after 15 bytes), and at least once.
worst=0 probes=0
while :; do
	r=$(healthz_time)
	probes=$((probes + 1))
	[ "${r%% *}" = 200 ] || worst=999
	below "$worst" "${r#* }" && worst=${r#* }
	[ -e "$WORK/slow" ] && break
	[ "$probes" -lt $((300 * SLOW)) ] || { not_ok "the slow client ends by itself"; break; }
	sleep 0.1
done
if below "$worst" "$SLOW"; then
	ok "GET /healthz answers in under 1 s while a slow client trickles (worst ${worst} s of $probes)"
else
	not_ok "GET /healthz answers in under 1 s while a slow client trickles (worst ${worst} s of $probes)"
fi
wait "$SLOWPID"
read -r verdict t < "$WORK/slow" 2>/dev/null || verdict=missing
if [ "$verdict" = cut ] && below "$t" $((6 * SLOW)); then
	ok "a client sending one byte a second is cut off near connection_timeout ($t s)"
else
	not_ok "a client sending one byte a second is cut off near connection_timeout = 2 s: ${verdict} after ${t:-?} s"
fi

check "after all of it the daemon still answers /healthz" 200 "$(code GET /healthz)"
finish
