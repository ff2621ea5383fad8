#!/bin/sh
# GET /events against the real daemon: a verdict is on the stream within a
# second of GET /artifact showing it, with head, commitment and alert
# events; ids increase; a client that reconnects with Last-Event-ID (or
# ?last_event_id=) gets exactly the events it missed, and one that asks
# for more than the history holds gets a "lost" event first; idle streams
# get keepalive comments; max_event_streams bounds them (503 beyond) while
# /healthz still answers; an alert is raised, then cleared, on the stream;
# a shutdown with streams open is prompt and ends each stream cleanly; a
# signed envelope dropped into commitments/ is a commitment event with its
# key; and an idle stream outlives connection_timeout, never silent longer
# than event_keepalive.
. "$top_srcdir/tests/integration/lib.sh"

H0=859245c72641256e051ead98898edc989faac09b4dcb35ec0fa3c346bf4f7645
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
TOKEN=0123456789abcdef0123456789abcdef
JSON='Content-Type: application/json'

# open_stream FILE [curl args...]: GET /events in the background, the body
# into FILE as it arrives; the curl process id in $SPID.
open_stream() {
	local f=$1
	shift
	: > "$f"
	curl -sN --max-time $((60 * SLOW)) -o "$f" "$@" "$(url /events)" &
	SPID=$!
}

# frames FILE [AFTER]: each event with an id above AFTER, as "id|event|data".
frames() {
	awk -v min="${2:-0}" '
		/^id: / { id = substr($0, 5) }
		/^event: / { ev = substr($0, 8) }
		/^data: / { data = substr($0, 7) }
		/^$/ { if (id != "" && id + 0 > min) print id "|" ev "|" data; id = ""; ev = ""; data = "" }' "$1"
}

last_id() { frames "$1" | tail -n 1 | cut -d'|' -f1; }

# consecutive FILE: the ids of FILE's events go up by one each time.
consecutive() {
	frames "$1" | awk -F'|' 'NR > 1 && $1 != prev + 1 { bad = 1 } { prev = $1 } END { exit bad || NR == 0 }'
}

has() { grep -qF -- "$2" "$1"; }

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
printf '%s\n' "$TOKEN" > "$WORK/token"
chmod 600 "$WORK/token"
[ -n "$RUN_AS" ] && chown "$RUN_AS" "$WORK/token"
write_conf "token_file = $WORK/token" "event_keepalive = 1" "max_event_streams = 3" \
	"rescan_interval = 3600"
start_daemon
settled() { [ "$(metric 'artifacts{state="verified"}')" = 5 ] && [ "$(metric queue_depth)" = 0 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"
head4() { get /chain | jq -e --arg h "$H4" '.committed_head.content_hash == $h' > /dev/null; }
wait_for $((5 * SLOW)) head4 > /dev/null || not_ok "round 4 is the committed head"

# --- the answer itself ----------------------------------------------------------
curl -s -D "$WORK/h" -o /dev/null --max-time $((2 * SLOW)) "$(url /events)"
check "GET /events answers text/event-stream" "200 text/event-stream no-store" \
	"$(sed -n 's/^HTTP\/1.1 \([0-9]*\).*/\1/p' "$WORK/h" | tr -d '\r') $(sed -n 's/^Content-Type: //p' "$WORK/h" | tr -d '\r') $(sed -n 's/^Cache-Control: //p' "$WORK/h" | tr -d '\r')"
check "HEAD /events" "200" "$(curl -s -o /dev/null -I -w '%{http_code}' "$(url /events)")"
r=$(curl -s -w ' %{http_code}' -H 'Last-Event-ID: 12x' "$(url /events)")
check "a Last-Event-ID that is not a number: 400 bad_request" "bad_request 400" \
	"$(echo "${r% *}" | jq -r .error.code) ${r##* }"
check "a ?last_event_id= that is not a number: 400" 400 "$(code GET '/events?last_event_id=-1')"
check "DELETE /events: 405, Allow: GET, HEAD" "405 GET, HEAD" \
	"$(curl -s -D - -o /dev/null -X DELETE "$(url /events)" | tr -d '\r' | sed -n 's/^HTTP\/1.1 \([0-9]*\).*/\1/p; s/^Allow: //p' | tr '\n' ' ' | sed 's/ $//')"

# --- a verdict, within a second of GET /artifact ---------------------------------
open_stream "$WORK/w.out"          # the witness: open until shutdown
W=$SPID
# Open once its first keepalive is in (event_keepalive = 1): a count of
# connections could still hold the stream above, until the daemon sees it go.
w_open() { has "$WORK/w.out" ': keepalive'; }
wait_for $((5 * SLOW)) w_open > /dev/null || not_ok "the witness stream is open"
"$MKART" --round 5 --parent "$H4" --seed 5 "$STORE/round-00005" > "$WORK/h5"
H5=$(cat "$WORK/h5")
t0=$(now)
t_ev=
t_vis=
while :; do
	t=$(now)
	[ -z "$t_ev" ] && has "$WORK/w.out" '"path":"round-00005"' && t_ev=$t
	[ -z "$t_vis" ] && [ "$(state_of "$H5")" = verified ] && t_vis=$t
	[ -n "$t_ev" ] && [ -n "$t_vis" ] && break
	[ "$(since "$t0" | cut -d. -f1)" -ge $((10 * SLOW)) ] && break
	sleep 0.02
done
if [ -n "$t_ev" ] && [ -n "$t_vis" ]; then
	d=$(awk -v e="$t_ev" -v v="$t_vis" 'BEGIN { printf "%.2f", e - v }')
	if awk -v d="$d" -v s="$SLOW" 'BEGIN { exit !(d < s) }'; then
		ok "the verdict is on the stream within a second of GET /artifact showing it (${d} s)"
	else
		not_ok "the verdict is on the stream within a second of GET /artifact showing it: ${d} s"
	fi
else
	not_ok "a verdict event for round 5 (event: ${t_ev:-none}, verified: ${t_vis:-never})"
fi
check "the verdict event" "verdict $H5 round-00005 verified null" \
	"$(frames "$WORK/w.out" | grep '"path":"round-00005"' | head -n 1 |
		awk -F'|' '{ print $2 }') $(frames "$WORK/w.out" | grep '"path":"round-00005"' | head -n 1 |
		cut -d'|' -f3- | jq -r '"\(.content_hash) \(.path) \(.state) \(.code)"')"

# --- a commitment, and the new head it makes ---------------------------------------
rc5="{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":4,\"global_model_hash\":\"$H5\"}"
check "POST /roundclose for round 5" 201 "$(code POST /roundclose -H "Authorization: Bearer $TOKEN" -H "$JSON" -d "$rc5")"
head5() { has "$WORK/w.out" "\"round_index\":5,\"content_hash\":\"$H5\""; }
wait_for $((3 * SLOW)) head5 > /dev/null || not_ok "a head event for round 5"
check "the commitment event" ". 4 $H5 roundclose null" \
	"$(frames "$WORK/w.out" | awk -F'|' '$2 == "commitment"' | tail -n 1 | cut -d'|' -f3- |
		jq -r '"\(.run) \(.round_index) \(.content_hash) \(.source) \(.key_id)"')"
check "the head event" ". 5 $H5" \
	"$(frames "$WORK/w.out" | awk -F'|' '$2 == "head"' | tail -n 1 | cut -d'|' -f3- |
		jq -r '"\(.run) \(.round_index) \(.content_hash)"')"
check "the commitment comes before the head it makes" "commitment head" \
	"$(frames "$WORK/w.out" | awk -F'|' '$2 == "commitment" || $2 == "head" { print $2 }' | tail -n 2 | tr '\n' ' ' | sed 's/ $//')"

# --- reconnecting: exactly the events missed ----------------------------------------
open_stream "$WORK/a.out"
A=$SPID
seen_a() { [ -n "$(frames "$WORK/a.out")" ] || has "$WORK/a.out" keepalive; }
wait_for $((3 * SLOW)) seen_a > /dev/null
kill "$A" 2>/dev/null
wait "$A" 2>/dev/null
L=$(last_id "$WORK/w.out")
# Missed while away: round 6 verified, round 3 tampered (a failed verdict
# and the alerts it raises).
"$MKART" --round 6 --parent "$H5" --seed 6 "$STORE/round-00006" > "$WORK/h6"
H6=$(cat "$WORK/h6")
v6() { has "$WORK/w.out" '"path":"round-00006"'; }
wait_for $((5 * SLOW)) v6 > /dev/null || not_ok "a verdict event for round 6"
# The participant's example waits for the next trusted head (after round
# 5) over the stream, and gets round 6 once it is committed.
if command -v python3 > /dev/null 2>&1; then
	# -a 5: the round it waits to pass, whether it reads the run's head
	# before or after the commitment below.
	PYTHONDONTWRITEBYTECODE=1 python3 "$top_srcdir/docs/participant/wait_for_head.py" \
		-a 5 -t $((20 * SLOW)) "$(url "")" > "$WORK/wait.out" 2> "$WORK/wait.err" &
	WPID=$!
	waiter() { curl -s "$(url /metrics)" | grep -q '^lensemble_verifyd_http_connections [3-9]'; }
	wait_for $((5 * SLOW)) waiter > /dev/null
	rc6="{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":5,\"global_model_hash\":\"$H6\"}"
	code POST /roundclose -H "Authorization: Bearer $TOKEN" -H "$JSON" -d "$rc6" > /dev/null
	wait "$WPID"
	rc=$?
	check "wait_for_head.py returns the new head once it is committed" "0 . 6 $H6" \
		"$(echo $rc $(jq -r '"\(.run) \(.round_index) \(.content_hash)"' "$WORK/wait.out" 2>/dev/null) $(cat "$WORK/wait.err"))"
	# Its stream, waiting when it left, is closed at the next keepalive.
	left() { [ "$(metric http_connections)" = 2 ]; }
	if wait_for $((3 * SLOW)) left > /dev/null; then
		ok "the stream of a client that left is closed at the next keepalive"
	else
		not_ok "the stream of a client that left is closed at the next keepalive"
	fi
else
	echo "# SKIP: python3 is not installed; wait_for_head.py not run"
fi
W3=$STORE/round-00003/weights.safetensors
cp "$W3" "$WORK/w3.orig"
printf '\377' | dd of="$W3" bs=1 seek=300 conv=notrunc 2>/dev/null
failed3() { has "$WORK/w.out" '"kind":"artifact_failed","state":"raised","subject":"round-00003"'; }
if wait_for $((5 * SLOW)) failed3 > /dev/null; then
	ok "an alert event when round 3 fails"
else
	not_ok "an alert event when round 3 fails"
fi
check "its verdict event says failed, with the code" "failed checkpoint_integrity" \
	"$(frames "$WORK/w.out" | grep '"path":"round-00003"' | tail -n 1 | cut -d'|' -f3- | jq -r '"\(.state) \(.code)"')"
# All that round 3's failure makes is on the stream: with its verdict and
# artifact_failed, chain_broken for each of its 3 verified descendants
# (rounds 4 to 6) and the head falling back to round 2, the last.
tamper_done() {
	frames "$WORK/w.out" "$L" > "$WORK/since"
	[ "$(grep -c '|alert|{"kind":"chain_broken","state":"raised"' "$WORK/since")" = 3 ] &&
		grep -q '|head|{"run":".","round_index":2,' "$WORK/since"
}
wait_for $((5 * SLOW)) tamper_done > /dev/null || not_ok "round 3's failure is on the stream in full"
M=$(last_id "$WORK/w.out")
frames "$WORK/w.out" "$L" > "$WORK/missed"
check "events were missed" yes "$([ "$M" -gt "$L" ] && echo yes)"
open_stream "$WORK/b.out" -H "Last-Event-ID: $L"
B=$SPID
open_stream "$WORK/c.out"
C=$SPID
# B and C with W make three streams: the limit.
full() { [ "$(frames "$WORK/b.out" | tail -n 1 | cut -d'|' -f1)" = "$M" ]; }
wait_for $((3 * SLOW)) full > /dev/null
if frames "$WORK/b.out" | cmp -s - "$WORK/missed"; then
	ok "Last-Event-ID: $L gets exactly the $((M - L)) events missed, as the open stream had them"
else
	not_ok "Last-Event-ID: $L gets exactly the events missed: $(frames "$WORK/b.out" | cut -d'|' -f1 | tr '\n' ' ') instead of $(cut -d'|' -f1 "$WORK/missed" | tr '\n' ' ')"
fi
if consecutive "$WORK/w.out" && consecutive "$WORK/b.out"; then
	ok "event ids go up by one"
else
	not_ok "event ids go up by one: $(frames "$WORK/w.out" | cut -d'|' -f1 | tr '\n' ' ')"
fi

# --- the limit, and the health check beside it ---------------------------------------
# C is open once it has had a keepalive: only then is a fourth stream over the limit.
keepalive() { has "$WORK/c.out" ': keepalive'; }
if wait_for $((3 * SLOW)) keepalive > /dev/null; then
	ok "an idle stream gets a keepalive comment (event_keepalive = 1)"
else
	not_ok "an idle stream gets a keepalive comment (event_keepalive = 1)"
fi
r=$(curl -s -D "$WORK/h" --max-time 2 "$(url /events)")
check "a fourth stream over max_event_streams = 3: 503 overloaded, Retry-After" "503 overloaded 5" \
	"$(sed -n 's/^HTTP\/1.1 \([0-9]*\).*/\1/p' "$WORK/h" | tr -d '\r') $(echo "$r" | jq -r .error.code) $(sed -n 's/^Retry-After: //p' "$WORK/h" | tr -d '\r')"
check "GET /healthz answers with the streams open" 200 "$(curl -s -o /dev/null --max-time 2 -w '%{http_code}' "$(url /healthz)")"
check "and GET /artifact" 200 "$(curl -s -o /dev/null --max-time 2 -w '%{http_code}' "$(url "/artifact/$H0")")"
# A stream whose client left frees its slot: the daemon sees it at the
# next keepalive.
kill "$C" 2>/dev/null
wait "$C" 2>/dev/null
# Asked again until let in, within a bound of its own: each answer is
# awaited (a refusal, or the events missed since $L), never a fixed time.
answered() { has "$WORK/d.out" '"overloaded"' || [ -n "$(frames "$WORK/d.out")" ]; }
let_in() {
	open_stream "$WORK/d.out" --get --data-urlencode "last_event_id=$L"
	D=$SPID
	wait_for $((5 * SLOW)) answered > /dev/null
	has "$WORK/d.out" '"overloaded"' || return 0
	wait "$D"
	tries=$((tries + 1))
	return 1
}
tries=0
wait_for $((10 * SLOW)) let_in > /dev/null
if has "$WORK/d.out" '"overloaded"'; then
	not_ok "a stream whose client left frees its slot"
else
	ok "a stream whose client left frees its slot ($tries refusals before)"
fi
fulld() { [ "$(frames "$WORK/d.out" | tail -n 1 | cut -d'|' -f1)" = "$M" ]; }
wait_for $((3 * SLOW)) fulld > /dev/null
if frames "$WORK/d.out" "$L" | cmp -s - "$WORK/missed"; then
	ok "?last_event_id=$L resumes the same way"
else
	not_ok "?last_event_id=$L resumes the same way: $(frames "$WORK/d.out" | cut -d'|' -f1 | tr '\n' ' ')"
fi

# --- the alert cleared ----------------------------------------------------------------
# failed3_states: the states of round 3's artifact_failed alert events, in order.
failed3_states() {
	frames "$WORK/w.out" | awk -F'|' '$2 == "alert"' | cut -d'|' -f3- |
		jq -r 'select(.kind == "artifact_failed" and .subject == "round-00003") | .state' | tr '\n' ' ' | sed 's/ $//'
}
cp "$WORK/w3.orig" "$W3"
cleared3() { [ "$(failed3_states)" = "raised cleared" ]; }
wait_for $((5 * SLOW)) cleared3 > /dev/null
check "round 3 restored: its alert is raised, then cleared, on the stream" "raised cleared" "$(failed3_states)"

# --- shutdown with streams open ---------------------------------------------------------
t0=$(now)
stop_daemon
took=$(since "$t0")
if awk -v t="$took" -v s="$SLOW" 'BEGIN { exit !(t < 2 * s) }'; then
	ok "SIGTERM with three streams open: out in $took s"
else
	not_ok "SIGTERM with three streams open: out in $took s"
fi
for p in "$W" "$B" "$D"; do
	wait "$p"
	rc=$?
	[ "$rc" = 0 ] || break
done
check "each stream ended cleanly (curl exits 0: the last chunk was sent)" 0 "$rc"

# --- a restart: ids go on; a resume from further back than the history -------------------
write_conf "token_file = $WORK/token" "event_history = 2" "rescan_interval = 3600"
start_daemon
open_stream "$WORK/e.out" -H "Last-Event-ID: 1"
E=$SPID
lost() { has "$WORK/e.out" 'event: lost' && [ "$(frames "$WORK/e.out" | wc -l)" -ge 2 ]; }
wait_for $((3 * SLOW)) lost > /dev/null
first=$(awk '/^data: .*first_available_id/ { sub(/^data: /, ""); print; exit }' "$WORK/e.out" | jq -r .first_available_id)
check "asked for more than event_history = 2 holds: a lost event first" "event: lost" "$(head -n 1 "$WORK/e.out")"
check "it names the id asked after and the first one sent" "1 $first" \
	"$(awk '/^data: / { sub(/^data: /, ""); print; exit }' "$WORK/e.out" | jq -r '"\(.last_event_id) \(.first_available_id)"')"
check "then what remains, from that id on" "$first" "$(frames "$WORK/e.out" | head -n 1 | cut -d'|' -f1)"
check "the ids go on from before the restart" yes "$([ "$(last_id "$WORK/e.out")" -gt "$M" ] && echo yes)"
kill "$E" 2>/dev/null
wait "$E" 2>/dev/null

# --- a signed commitment from a file; an idle stream kept alive -------------------------
# Under the default connection_timeout (15 s), with event_keepalive = 2.
stop_daemon
KA=2
KEYS=
if command -v openssl > /dev/null 2>&1; then
	. "$top_srcdir/tests/integration/trust.sh"
	keygen coord
	mkdir -p "$WORK/keys"
	cp "$WORK/coord.pub" "$WORK/keys/"
	chmod -R a+rX "$WORK/keys"
	KEYS="trusted_keys = $WORK/keys"
fi
write_conf "token_file = $WORK/token" "event_keepalive = $KA" "rescan_interval = 3600" ${KEYS:+"$KEYS"}
start_daemon
# The idle stream: each line as it arrives, after the time it arrived.
IDLE_FOR=18
t_idle=$(now)
{ curl -sN --max-time "$IDLE_FOR" "$(url /events)"; echo "$?" > "$WORK/idle.rc"; } |
	while IFS= read -r line; do printf '%s %s\n' "$(now)" "$line"; done > "$WORK/idle.out" &
IPID=$!
if [ -n "$KEYS" ]; then
	open_stream "$WORK/f.out"
	F=$SPID
	opened() { [ "$(metric http_connections)" -ge 3 ]; }
	wait_for $((5 * SLOW)) opened > /dev/null
	COORD=$(keyid "$WORK/coord.pub")
	mkdir -p "$STORE/commitments"
	envelope "$PT_CP" "$(cp_stmt . 4 "$(head_of "$STORE/ledger.jsonl")")" coord > "$STORE/commitments/ledger-4.json"
	H7=$(printf 'round 7' | sha256sum | cut -d' ' -f1)
	envelope "$PT_RC" "$(rc_stmt . 6 "$H7")" coord > "$STORE/commitments/round-6.json"
	readable "$STORE"
	signed_events() {
		frames "$WORK/f.out" | awk -F'|' '$2 == "commitment"' | cut -d'|' -f3- |
			jq -r '"\(.run) \(.round_index) \(.content_hash) \(.source) \(.key_id)"'
	}
	both() { signed_events | grep -q ' signed ' && [ "$(signed_events | grep -c ' ledger ')" -ge 4 ]; }
	wait_for $((5 * SLOW)) both > /dev/null
	check "a signed checkpoint in commitments/: a commitment event per record it covers, with its key" \
		"4 . 3 $H4 ledger $COORD" \
		"$(signed_events | grep -c ' ledger ') $(signed_events | grep ' ledger ' | tail -n 1)"
	check "a signed RoundClose in commitments/: a commitment event with its key" \
		". 6 $H7 signed $COORD" "$(signed_events | grep ' signed ')"
	kill "$F" 2>/dev/null
	wait "$F" 2>/dev/null
else
	echo "# SKIP: openssl is not installed; no signed commitment from a file"
fi
wait "$IPID"
# The largest silence, from the stream's start to its last line; when that
# was; how many keepalive comments came.
read -r gap last_at comments <<EOF2
$(awk -v t0="$t_idle" 'BEGIN { prev = t0 } $2 == ":" { n++ }
	{ if ($1 - prev > max) max = $1 - prev; prev = $1 }
	END { printf "%.2f %.2f %d\n", max, prev - t0, n }' "$WORK/idle.out")
EOF2
check "an idle stream is still open after connection_timeout = 15 s (curl gave up at $IDLE_FOR s)" 28 \
	"$(cat "$WORK/idle.rc")"
if awk -v l="$last_at" 'BEGIN { exit !(l > 15.5) }' && [ "$comments" -ge $((IDLE_FOR / KA - 2)) ]; then
	ok "it gets keepalive comments all along ($comments, the last at $last_at s)"
else
	not_ok "it gets keepalive comments all along: $comments, the last at $last_at s"
fi
if awk -v g="$gap" -v k="$KA" -v s="$SLOW" 'BEGIN { exit !(g <= k + 0.5 + 0.5 * s) }'; then
	ok "never silent longer than event_keepalive = $KA s and a little (at most $gap s)"
else
	not_ok "never silent longer than event_keepalive = $KA s and a little: $gap s"
fi

finish
