#!/bin/sh
# log_format = json: every line the daemon writes to stderr is one JSON
# object with ts (RFC 3339), level and msg, and the fields of what it is
# about: a verdict its content_hash, path, code and run; an alert its
# kind; a commitment its run and hash; a refused statement its reason.
# Paths holding quotes, controls or bytes that are not UTF-8 do not break
# a line. log_format = text (the default) is unchanged.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/trust.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
H3=0a180a891c6e40afe74b71a0f047a2f08ff387a88554a40a2460f72d55fea8b7
HX=5f2a6c1e0b9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f   # no artifact claims it
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
HA=$(printf a | sha256sum | cut -d' ' -f1)
TOKEN=logjson-operator-token-0123456789
printf '%s\n' "$TOKEN" > "$WORK/token"
chmod 600 "$WORK/token"
[ -n "$RUN_AS" ] && chown "$RUN_AS" "$WORK/token"
keygen stranger
# A directory whose name holds a quote, a backslash, a tab and a byte
# that is not UTF-8, with a header that is not JSON: it is found, and
# fails, in lines that name it.
ODD="$STORE/$(printf 'odd"dir\\\t\377x')"
mkdir "$ODD"
echo '{"schema_version": 2,' > "$ODD/header.json"
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
# lines JQ_FILTER: the log's JSON lines the filter keeps, compact
lines() { jq -c "select($1)" "$LOG" 2> /dev/null; }

write_conf "log_format = json" "token_file = $WORK/token" "rescan_interval = 3600"
# A JOURNAL_STREAM that is not this stderr (as a service manager's left
# to a child would be) keeps the lines on stderr.
JOURNAL_STREAM=1:1
export JOURNAL_STREAM
start_daemon
unset JOURNAL_STREAM
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"
# Something of each kind: a failed verdict and its alerts, a commitment
# accepted and one refused, a signed statement refused.
printf '\377' | dd of="$STORE/round-00003/weights.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
failed3() { [ "$(state_of "$H3")" = failed ]; }
wait_for $((5 * SLOW)) failed3 > /dev/null || not_ok "the tampered round 3 failed"
post /roundclose "{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":4,\"global_model_hash\":\"$HA\"}" \
	-H "Authorization: Bearer $TOKEN" > /dev/null
post /roundclose "{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":4,\"global_model_hash\":\"$HX\"}" \
	-H "Authorization: Bearer $TOKEN" > /dev/null
post /roundclose "$(envelope "$PT_RC" "$(rc_stmt . 6 "$HA")" stranger)" > /dev/null
stop_daemon

# --- every line ------------------------------------------------------------------------
total=$(wc -l < "$LOG")
check "the daemon wrote lines" true "$([ "$total" -gt 20 ] && echo true || echo false)"
bad=$(jq -Rr 'try (fromjson | if type == "object" and (.ts | type) == "string" and
	(.level | IN("error", "warning", "info", "debug")) and (.msg | type) == "string"
	then empty else "not the shape: \(.)" end) catch "not JSON: \(.)"' "$LOG")
check "every line is one JSON object with ts, level and msg" "" "$bad"
check "ts is RFC 3339 with milliseconds, UTC" 0 \
	"$(jq -r '.ts' "$LOG" | grep -cvE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$')"
check "members are only the known ones" "" \
	"$(jq -r 'keys[] | select(IN("ts", "level", "msg", "content_hash", "path", "code", "run", "kind") | not)' "$LOG" | sort -u)"

# --- the fields -------------------------------------------------------------------------
check "a verdict line carries content_hash, path, code and run" \
	"{\"content_hash\":\"$H4\",\"path\":\"round-00004\",\"code\":\"ok\",\"run\":\".\"}" \
	"$(lines ".path == \"round-00004\" and (.msg | startswith(\"verified \"))" | head -n 1 |
		jq -c '{content_hash, path, code, run}')"
check "a failed verdict: the hash the header claims, the code" \
	"$H3 round-00003 checkpoint_integrity info" \
	"$(lines '.code == "checkpoint_integrity"' | head -n 1 | jq -r '"\(.content_hash) \(.path) \(.code) \(.level)"')"
check "an alert raised about a copy: its kind and path" "warning artifact_failed round-00003" \
	"$(lines '.kind == "artifact_failed" and .path == "round-00003"' | head -n 1 | jq -r '"\(.level) \(.kind) \(.path)"')"
check "an alert raised about an artifact: its kind and hash" "chain_broken $H4" \
	"$(lines '.kind == "chain_broken"' | head -n 1 | jq -r '"\(.kind) \(.content_hash)"')"
check "a commitment accepted: its run and hash" ". $HA" \
	"$(lines '(.msg | startswith("commitment recorded"))' | jq -r '"\(.run) \(.content_hash)"')"
check "a commitment refused: the conflict" "warning commitment_conflict $HX" \
	"$(lines '.code == "commitment_conflict"' | jq -r '"\(.level) \(.code) \(.content_hash)"')"
check "a signed statement refused: the reason" "warning unknown_key" \
	"$(lines '(.msg | startswith("signed statement refused"))' | jq -r '"\(.level) \(.code)"')"
check "the odd directory's lines name it, the byte replaced" 'odd"dir\	?x' \
	"$(lines '.code == "artifact_invalid"' | head -n 1 | jq -r .path)"
check "lines without fields have none" '["level","msg","ts"]' \
	"$(lines '(.msg | startswith("listening on"))' | jq -c 'keys')"
check "the token never appears" 0 "$(grep -c "$TOKEN" "$LOG")"

# --- text, the default, as before ---------------------------------------------------------
# A new state directory: every artifact is verified again, and logged.
rm -rf "$STATE"
mkdir -p "$STATE"
[ -n "$RUN_AS" ] && chown "$RUN_AS" "$STATE"
write_conf "rescan_interval = 3600"
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "verified again"
stop_daemon
check "log_format = text: every line is 'level: message'" 0 \
	"$(grep -cvE '^(error|warning|info|debug): ' "$LOG")"
check "a verdict line as before" 1 \
	"$(grep -c "^info: verified round-00004: $H4 (3 tensors, 352 bytes, [0-9.]* s)\$" "$LOG")"

# --- a reload switches the format ------------------------------------------------------------
start_daemon
write_conf "log_format = json" "rescan_interval = 3600"
kill -HUP "$DPID"
reloaded() { tail -n 1 "$LOG" | jq -e . > /dev/null 2>&1; }
wait_for $((5 * SLOW)) reloaded > /dev/null || not_ok "SIGHUP switches to JSON lines"
check "the reload's own line is text, those after it JSON" "info: configuration reloaded" \
	"$(grep -o '^info: configuration reloaded' "$LOG")"
# The access line is written as the answer is sent: curl may have it first.
accessed() { jq -Rr 'fromjson? | .msg' "$LOG" | grep -qF "$1"; }
get /chain > /dev/null
code GET /nope > /dev/null
wait_for $((5 * SLOW)) accessed 'GET /nope 404 ' > /dev/null
check "a request answered after the reload is logged in JSON" 1 \
	"$(jq -Rr 'fromjson? | .msg | select(test("^GET [^ ]+ 404 "))' "$LOG" | wc -l)"

# The access line names the path asked, not only its route: escaped (a
# client cannot end a line or send a terminal's control sequences) and
# cut to a bound.
code GET '/nope/x%20y%25' > /dev/null
wait_for $((5 * SLOW)) accessed 'GET /nope/x%20y%25 404 ' > /dev/null
check "an unknown path is logged with its path" 1 \
	"$(jq -Rr 'fromjson? | .msg' "$LOG" | grep -cF 'GET /nope/x%20y%25 404 ')"
code GET '/nope/%1b%5b31m%0a' > /dev/null
wait_for $((5 * SLOW)) accessed 'GET /nope/%1B[31m%0A 400 ' > /dev/null
check "control characters in it are escaped" 1 \
	"$(jq -Rr 'fromjson? | .msg' "$LOG" | grep -cF 'GET /nope/%1B[31m%0A 400 ')"
long=$(printf '%0600d' 0)
code GET "/nope/$long" > /dev/null
wait_for $((5 * SLOW)) accessed 'GET /nope/000' > /dev/null
check "a long path is cut, saying so" "256 ... 404" \
	"$(jq -Rr 'fromjson? | .msg' "$LOG" | awk '$2 ~ /^\/nope\/000/ { print length($2), substr($2, length($2) - 2), $3 }')"
code GET "/artifact/$HX" > /dev/null
wait_for $((5 * SLOW)) accessed "GET /artifact/$HX 404 " > /dev/null
check "a known route is logged with the path asked" 1 \
	"$(jq -Rr 'fromjson? | .msg' "$LOG" | grep -cF "GET /artifact/$HX 404 ")"

finish
