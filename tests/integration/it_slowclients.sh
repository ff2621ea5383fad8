#!/bin/sh
# Slow clients: a request whose line and headers are not in within
# request_header_timeout is cut; with every connection slot held by
# half-sent requests from other addresses, health checks from 127.0.0.1
# still get through on the reserved connections, and those serve nothing
# else. Other addresses are 127.0.0.2 and up, which Linux routes to lo.
# Raw sockets (/dev/tcp, read -t -u) need bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/integration/lib.sh"
need perl
need timeout
perl -MIO::Socket::INET -e 'IO::Socket::INET->new(LocalAddr => "127.0.0.10", Proto => "tcp") or exit 1' ||
	{ echo "SKIP: 127.0.0.2-127.0.0.10 cannot be used as source addresses"; exit 77; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f\n", b - a }'; }
below() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# probe PATH [curl args]: "STATUS SECONDS" of one request from 127.0.0.1.
probe() {
	local p=$1; shift
	curl -s -o /dev/null --interface 127.0.0.1 --max-time $((10 * SLOW)) \
		-w '%{http_code} %{time_total}' "$@" "$(url "$p")"
}

# slowloris SECONDS PER_ADDRESS ADDR...: from each address, PER_ADDRESS
# connections that send half a request, then one byte a second; a
# connection the server closes is opened again at the next tick. Ends
# after SECONDS; writes "ready" to $WORK/loris once all are opened, and
# the count of ticks done to $WORK/loris.tick after each. Its sleep paces
# the trickle: it waits for nothing.
slowloris() {
	rm -f "$WORK/loris" "$WORK/loris.tick"
	perl -MIO::Socket::INET -MTime::HiRes=time,sleep -e '
	    use strict; use warnings;
	    $SIG{PIPE} = "IGNORE";
	    my ($port, $secs, $per, $flag, @addrs) = @ARGV;
	    my $end = time + $secs;
	    my $head = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ";
	    sub open1 {
	        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port,
	            LocalAddr => $_[0], Timeout => 2) or return undef;
	        $s->blocking(0);
	        syswrite($s, $head) or return undef;
	        return $s;
	    }
	    my @socks;
	    for my $a (@addrs) { push @socks, [$a, open1($a)] for 1 .. $per }
	    open(my $f, ">", $flag) or die; print $f "ready\n"; close $f;
	    my $ticks = 0;
	    while (time < $end) {
	        sleep 1;   # the pace of the trickle
	        for my $e (@socks) {
	            last if time >= $end;
	            my $s = $e->[1];
	            my $gone = !defined $s;
	            if (!$gone) {
	                my $buf; my $n = sysread($s, $buf, 4096);
	                # An answer, the end, or an error: the server let go.
	                $gone = 1 if defined $n || !$!{EAGAIN};
	                $gone = 1 if !$gone && !defined(syswrite($s, "a")) && !$!{EAGAIN};
	            }
	            if ($gone) { close $s if $s; $e->[1] = open1($e->[0]); }
	        }
	        $ticks++;
	        open(my $t, ">", "$flag.t") or die; print $t "$ticks\n"; close $t;
	        rename("$flag.t", "$flag.tick") or die;
	    }' "$PORT" "$1" "$2" "$WORK/loris" "${@:3}" 3>&- 4>&- 5>&- 6>&- &
	LORIS=$!
}
loris_ready() { [ -e "$WORK/loris" ]; }
loris_ticks() { cat "$WORK/loris.tick" 2>/dev/null || echo 0; }
ticked_past() { [ "$(loris_ticks)" -gt "$1" ]; }
ADDRS=$(for i in 2 3 4 5 6 7 8 9 10; do printf '127.0.0.%d ' "$i"; done)

# ---- the finding, with the default limits --------------------------------
# 9 addresses x 60 half-sent requests against 512 connections (64 per
# address). Only default settings, so that the same run measures a daemon
# without the reserve.
write_conf
start_daemon
r=$(probe /healthz)
echo "# GET /healthz alone: ${r#* } s"
slowloris $((14 * SLOW)) 60 $ADDRS
wait_for $((20 * SLOW)) loris_ready > /dev/null || not_ok "the slow clients connected"
full_now() {
	local n
	n=$(curl -s --interface 127.0.0.1 --max-time 2 "$(url /metrics)" |
		awk '$1 == "lensemble_verifyd_http_connections" { print $2 }')
	[ -n "$n" ] && [ "$n" -ge 512 ]
}
# Every slot taken (the slow clients beyond them wait in the listen queue).
full=0
wait_for $((10 * SLOW)) full_now > /dev/null && full=1
# One probe at each of the slow clients' next 6 ticks, while they trickle.
worst=0 answered=0 samples=
for k in 1 2 3 4 5 6; do
	t=$(loris_ticks)
	r=$(probe /healthz)
	samples="$samples ${r#* }"
	[ "${r%% *}" = 200 ] && answered=$((answered + 1))
	[ "${r%% *}" = 200 ] || r="000 99"
	below "$worst" "${r#* }" && worst=${r#* }
	full_now && full=1
	wait_for $((5 * SLOW)) ticked_past "$t" > /dev/null || not_ok "the slow clients go on ticking"
done
echo "# GET /healthz from 127.0.0.1 under 9 x 60 slow clients, seconds:$samples"
check "every GET /healthz from 127.0.0.1 is answered under 9 x 60 slow clients" 6 "$answered"
# Held behind them, it would wait for request_header_timeout (5 s).
if below "$worst" $((2 * SLOW)); then
	ok "GET /healthz takes under 2 s under 9 x 60 slow clients (worst ${worst} s)"
else
	not_ok "GET /healthz takes under 2 s under 9 x 60 slow clients: worst ${worst} s"
fi
check "meanwhile the slow clients held every one of the 512 connections" 1 "$full"
kill "$LORIS" 2>/dev/null; wait "$LORIS" 2>/dev/null
# The next check times a connection from its start: it must not wait in
# the listen queue for the 540 slow ones to be seen gone.
settle_connections 1

# One request line and header trickled a byte every half second: cut near
# request_header_timeout (5 s by default), well before connection_timeout
# (15 s), though the client never stops sending.
rm -f "$WORK/slow"
(
	trap '' PIPE
	exec 5<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
	start=$(now)
	msg=$'GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: '
	i=0
	while [ "$i" -lt 50 ]; do
		if [ "$i" -lt "${#msg}" ]; then c=${msg:$i:1}; else c=a; fi
		printf '%s' "$c" >&5 2>/dev/null || { echo "cut $(since "$start")" > "$WORK/slow"; exit 0; }
		read -r -t 0.5 -u 5 line; rc=$?
		[ "$rc" -eq 1 ] && { echo "cut $(since "$start")" > "$WORK/slow"; exit 0; }
		i=$((i + 1))
	done
	echo "open $(since "$start")" > "$WORK/slow"
)
read -r verdict t < "$WORK/slow" 2>/dev/null || verdict=missing
if [ "$verdict" = cut ] && below "$t" $((9 * SLOW)) && below 3 "$t"; then
	ok "headers trickled a byte at a time are cut near request_header_timeout = 5 s ($t s)"
else
	not_ok "headers trickled a byte at a time are cut near request_header_timeout = 5 s: ${verdict} after ${t:-?} s"
fi
check "the daemon still answers" 200 "$(code GET /healthz)"
stop_daemon

# ---- the reserve, small --------------------------------------------------
# max_connections = 4 held by an idle client from 127.0.0.2; two reserved.
# A connection refused because the daemon still counts one that closed
# (the last asking one) is made again, for at most 5 s.
hold() {
	rm -f "$WORK/held"
	perl -MIO::Socket::INET -e '
	    my ($port, $n, $flag) = @ARGV; my @s;
	    sub served {
	        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port,
	            LocalAddr => "127.0.0.2") or return undef;
	        print $s "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
	        my $buf = "";
	        while ($buf !~ /\r\n\r\nok\n/) { sysread($s, $buf, 4096, length $buf) or return undef }
	        return $s;
	    }
	    for (1 .. $n) {
	        my $s;
	        for my $try (1 .. 100) {
	            last if $s = served();
	            select(undef, undef, undef, 0.05);
	        }
	        $s or exit 1;
	        push @s, $s;
	    }
	    open(my $f, ">", $flag) or exit 1; close $f;
	    sleep 60;  # holds the connections until killed: waits for nothing
	    ' "$PORT" "$1" "$WORK/held" 3>&- 4>&- 5>&- 6>&- &
	HOLDER=$!
}
held() { [ -e "$WORK/held" ]; }
write_conf "max_connections = 4" "max_connections_per_ip = 4" "reserved_connections = 2" \
	"connection_timeout = 60" "request_header_timeout = 60"
start_daemon
alone() { [ "$(metric http_connections)" = 1 ]; }
wait_for $((5 * SLOW)) alone > /dev/null || not_ok "the readiness probes' connections are closed"
hold 4
wait_for $((10 * SLOW)) held > /dev/null || not_ok "4 connections from 127.0.0.2 are served"

r=$(probe /healthz)
check "with max_connections held, GET /healthz from 127.0.0.1 is served" 200 "${r%% *}"
check "HEAD /readyz too" 200 "$(probe /readyz -I | cut -d' ' -f1)"
n=$(curl -s --interface 127.0.0.1 --max-time 5 "$(url /metrics)" |
	awk '$1 == "lensemble_verifyd_http_connections" { print $2 }')
if [ -n "$n" ] && [ "$n" -ge 5 ]; then
	ok "GET /metrics too, counting the 4 held and this one ($n)"
else
	not_ok "GET /metrics too, counting the 4 held and this one: '$n'"
fi
curl -s --interface 127.0.0.1 --max-time 5 -D "$WORK/h" -o "$WORK/b" "$(url /chain)"
check "any other request on a reserved connection: 503" 503 "$(awk 'NR == 1 { print $2 }' "$WORK/h")"
check "the overloaded error" overloaded "$(jq -r .error.code "$WORK/b" 2>/dev/null)"
check "with Retry-After" "Retry-After: 5" "$(tr -d '\r' < "$WORK/h" | grep '^Retry-After:')"
# The requests above each took a reserved slot: with both still counted,
# a connection from another address would wait in the listen queue, not
# be refused at once. The 4 held, and the one asking.
settle_connections 5
t0=$(now)
check "another address gets no connection" 000 \
	"$(curl -s -o /dev/null --interface 127.0.0.3 --max-time $((5 * SLOW)) -w '%{http_code}' "$(url /healthz)")"
t=$(since "$t0")
if below "$t" "$SLOW"; then ok "and is refused at once ($t s)"; else not_ok "another address is refused at once: $t s"; fi

# Both reserved connections held by 127.0.0.1: a third is refused.
exec 3<>"/dev/tcp/127.0.0.1/$PORT" 4<>"/dev/tcp/127.0.0.1/$PORT"
printf 'GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n' >&3
printf 'GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n' >&4
read -r -t $((5 * SLOW)) -u 3 l3; read -r -t $((5 * SLOW)) -u 4 l4
check "two reserved connections held by 127.0.0.1 are served" "200 200" \
	"$(echo "$l3" | awk '{ print $2 }') $(echo "$l4" | awk '{ print $2 }')"
check "a third from 127.0.0.1 is not" 000 "$(probe /healthz --max-time $((3 * SLOW)) | cut -d' ' -f1)"
exec 3>&- 4>&-

kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
served() { [ "$(curl -s -o /dev/null --interface 127.0.0.3 --max-time 2 -w '%{http_code}' "$(url /chain)")" = 200 ]; }
if wait_for $((5 * SLOW)) served > /dev/null; then
	ok "once the slots free, other addresses and other routes are served again"
else
	not_ok "once the slots free, other addresses and other routes are served again"
fi
finish
