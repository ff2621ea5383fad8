#!/bin/sh
# HTTPS: a self-signed certificate made here, the API over TLS, plain HTTP
# on the TLS port refused, and TLS material that is missing, mismatched
# or not PEM refused with a message that says so.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/integration/lib.sh"
need openssl

CERT="$WORK/cert.pem"
KEY="$WORK/key.pem"
# The certificate names the address clients use, so curl verifies it
# fully against it as the only trusted root.
if ! openssl req -x509 -newkey rsa:2048 -nodes -keyout "$KEY" -out "$CERT" -days 2 \
	-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 > "$WORK/openssl.out" 2>&1; then
	echo "SKIP: openssl cannot make a self-signed certificate:"; cat "$WORK/openssl.out"
	rm -rf "$WORK"
	exit 77
fi
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/other-key.pem" -out "$WORK/other-cert.pem" \
	-days 2 -subj /CN=other > /dev/null 2>&1
chmod 644 "$CERT"
# Root's alone: the daemon reads it before it gives up root.
chmod 600 "$KEY"

# lib.sh's HTTP functions again, over HTTPS and trusting only our certificate.
url() { echo "https://127.0.0.1:$PORT$1"; }
code() {
	local m=$1 p=$2; shift 2
	curl -s --cacert "$CERT" -o /dev/null -w '%{http_code}' -X "$m" "$@" "$(url "$p")"
}
get() { curl -s --cacert "$CERT" "$(url "$1")"; }
post() {
	local p=$1 b=$2; shift 2
	curl -s --cacert "$CERT" -X POST -H 'Content-Type: application/json' --data-binary "$b" "$@" "$(url "$p")"
}

# refused DESC FILE CONF_LINES...: the daemon will not start, and its
# error names FILE or the TLS setup.
refused() {
	local desc=$1 file=$2; shift 2
	write_conf "$@"
	timeout $((10 * SLOW)) "$DAEMON" -f -c "$CONF" > "$WORK/refused.out" 2>&1
	check "$desc: the daemon does not start" 1 "$?"
	if grep '^error:' "$WORK/refused.out" | grep -q -i -e "$file" -e tls -e certificate; then
		ok "$desc: the error names the TLS material"
	else
		not_ok "$desc: the error names the TLS material; it says: $(grep '^error:' "$WORK/refused.out" | tr '\n' ' ')"
	fi
	if grep '^error:' "$WORK/refused.out" | grep -q 'address in use'; then
		not_ok "$desc: the error does not blame the listen address"
	else
		ok "$desc: the error does not blame the listen address"
	fi
}

# ---- -t: the pair goes together ---------------------------------------
write_conf "tls_cert = $CERT"
"$DAEMON" -t -c "$CONF" > "$WORK/t.out" 2>&1
check "-t refuses tls_cert without tls_key" 1 "$?"
check "saying they go together" 1 "$(grep -c 'tls_cert and tls_key go together' "$WORK/t.out")"
write_conf "tls_key = $KEY"
"$DAEMON" -t -c "$CONF" > "$WORK/t.out" 2>&1
check "-t refuses tls_key without tls_cert" 1 "$?"
write_conf "tls_cert = $CERT" "tls_key = $KEY"
"$DAEMON" -t -c "$CONF" > "$WORK/t.out" 2>&1
check "-t accepts both" 0 "$?"

# ---- bad TLS material -------------------------------------------------
refused "a missing certificate file" "$WORK/missing.pem" "tls_cert = $WORK/missing.pem" "tls_key = $KEY"
echo "not a certificate" > "$WORK/junk.pem"
chmod 644 "$WORK/junk.pem"
refused "a certificate file that is not PEM" "$WORK/junk.pem" "tls_cert = $WORK/junk.pem" "tls_key = $KEY"
refused "a key that does not match the certificate" "$WORK/other-key.pem" "tls_cert = $CERT" "tls_key = $WORK/other-key.pem"

# ---- the API over HTTPS -----------------------------------------------
cp -r "$DATA/store-basic/." "$STORE/"
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
write_conf "tls_cert = $CERT" "tls_key = $KEY" "connection_timeout = 3"
start_daemon
check "the log says the listener is HTTPS" 1 "$(grep -c "listening on 127.0.0.1:$PORT (HTTPS)" "$LOG")"
check "GET /healthz over HTTPS, the certificate verified" 200 "$(code GET /healthz)"
is_state() { [ "$(state_of "$1")" = "$2" ]; }
if wait_for $((10 * SLOW)) is_state "$H4" verified > /dev/null; then
	ok "GET /artifact over HTTPS: the status object"
else
	not_ok "GET /artifact over HTTPS: the status object (got '$(get "/artifact/$H4" | head -c 200)')"
fi
check "its content_hash" "$H4" "$(get "/artifact/$H4" | jq -r .content_hash)"
check "POST /verify over HTTPS" ok "$(post '/verify?wait=10' "{\"content_hash\":\"$H4\"}" | jq -r .verdict)"
check "GET /metrics over HTTPS" 1 "$(get /metrics | grep -c '^lensemble_verifyd_build_info{')"
check "errors over HTTPS are the JSON error object" not_found "$(get /no/such/route | jq -r .error.code)"

# tls_raw TEXT: TEXT sent as is (printf %b) over TLS; the answer until the
# server closes. A Content-Length that is not a number: libmicrohttpd
# would send its status line and headers twice; over TLS, where the
# daemon cannot answer in its place, the connection is closed unanswered.
tls_raw() {
	printf '%b' "$1" | timeout $((5 * SLOW)) openssl s_client -quiet -ign_eof -CAfile "$CERT" \
		-connect "127.0.0.1:$PORT" 2>/dev/null | tr -d '\r' | grep -c '^HTTP/'
}
check "a request sent raw over TLS gets one answer" 1 \
	"$(tls_raw 'GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n')"
t0=$(date +%s.%N)
check "Content-Length: 1x over HTTPS: no malformed answer, the connection closed" 0 \
	"$(tls_raw 'POST /verify HTTP/1.1\r\nHost: t\r\nContent-Length: 1x\r\n\r\n{}')"
took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
if awk -v t="$took" -v s="$SLOW" 'BEGIN { exit !(t < 2 * s) }'; then
	ok "and closed at once (${took} s)"
else
	not_ok "Content-Length: 1x over HTTPS is closed at once: ${took} s"
fi

check "curl without our certificate refuses the connection" 000 \
	"$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$(url /healthz)")"
check "plain HTTP to the HTTPS port gets no HTTP answer" 000 \
	"$(curl -s -o /dev/null --max-time $((5 * SLOW)) -w '%{http_code}' "http://127.0.0.1:$PORT/healthz")"
check "after that the daemon answers over HTTPS" 200 "$(code GET /healthz)"

# A client that connects and never starts the handshake holds nobody up,
# and is dropped after connection_timeout.
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
t=$(curl -s --cacert "$CERT" -o /dev/null --max-time 10 -w '%{http_code} %{time_total}' "$(url /healthz)")
# Held up, it would wait for the silent one's connection_timeout (3 s).
if [ "${t%% *}" = 200 ] && awk -v t="${t#* }" -v s="$SLOW" 'BEGIN { exit !(t < 2 * s) }'; then
	ok "a silent TCP client does not delay others (${t#* } s)"
else
	not_ok "a silent TCP client does not delay others (got '$t')"
fi
start=$(date +%s.%N)
if read -r -t $((15 * SLOW)) -u 3 _; then :; fi
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if awk -v t="$took" -v s="$SLOW" 'BEGIN { exit !(t < 8 * s) }'; then
	ok "a connection that never starts the handshake is closed after the timeout (${took} s)"
else
	not_ok "a connection that never starts the handshake is closed after the timeout (open after ${took} s)"
fi
exec 3>&-
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }
# A fixed span on purpose: what is measured is the CPU used over a stretch
# of time (a loop spinning on the dropped client burns about 100 ticks a
# second), and no event marks being idle. A loaded machine only lowers it.
c0=$(cpu_ticks); sleep 2; used=$(( $(cpu_ticks) - c0 ))
if [ "$used" -lt $((50 * SLOW)) ]; then
	ok "idle afterwards, the daemon uses no CPU ($used ticks in 2 s)"
else
	not_ok "idle afterwards, the daemon uses no CPU ($used ticks in 2 s)"
fi

# The rest of the daemon was not starved meanwhile: a new artifact is
# found and verified.
H5=$("$MKART" --round 5 --parent "$H4" --tensors 4 --bytes 65536 "$WORK/round-00005")
chmod -R a+rX "$WORK/round-00005"
mv "$WORK/round-00005" "$STORE/round-00005"
if wait_for $((5 * SLOW)) is_state "$H5" verified > /dev/null; then
	ok "after a silent TLS client, a new artifact is still found and verified"
else
	not_ok "after a silent TLS client, a new artifact is still found and verified (state '$(state_of "$H5")')"
fi

# A reload keeps the listener, and its TLS.
kill -HUP "$DPID"
reloaded() { grep -q 'configuration reloaded' "$LOG"; }
wait_for $((5 * SLOW)) reloaded > /dev/null || not_ok "the configuration is reloaded"
check "after SIGHUP the daemon still answers over HTTPS" 200 "$(code GET /healthz)"
check "and still refuses plain HTTP" 000 \
	"$(curl -s -o /dev/null --max-time $((5 * SLOW)) -w '%{http_code}' "http://127.0.0.1:$PORT/healthz")"

finish
