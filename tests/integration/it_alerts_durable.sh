#!/bin/sh
# The alert history follows the alerts raised: while the state database
# refuses to record an alert (a trigger aborts the insert, as a full disk
# would), /metrics and GET /summary count it from memory, GET /alerts
# shows only what is recorded, and once the database takes writes again
# the alert is recorded without a restart, so that GET /alerts and
# /metrics agree again.
. "$top_srcdir/tests/integration/lib.sh"
need sqlite3

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
W3="$STORE/round-00003/weights.safetensors"
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
tamper() { printf '\377' | dd of="$W3" bs=1 seek=300 conv=notrunc 2>/dev/null; }
db() { printf '.timeout %s\n%s\n' $((10000 * SLOW)) "$1" | sqlite3 "$STATE/state.db"; }
counted() { [ "$(metric 'integrity_alerts{kind="artifact_failed"}')" = 1 ]; }
failing() { [ "$(metric state_write_failures_total)" -ge 1 ]; }
# active: the kinds raised in GET /alerts, sorted, one line.
active() { get '/alerts?active=1' | jq -r '[.alerts[] | "\(.kind) \(.subject)"] | sort | join(",")'; }
# in_memory: the same from GET /summary, which lists the alerts /metrics counts.
in_memory() { get /summary | jq -r '[.alerts[] | "\(.kind) \(.subject)"] | sort | join(",")'; }
recorded() { [ "$(active)" = "$(in_memory)" ]; }
state_ok() { [ "$(metric state_database_ok)" = 1 ]; }

write_conf "rescan_interval = 3600"
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"
check "nothing raised yet" "" "$(active)"

db "CREATE TRIGGER full BEFORE INSERT ON alerts BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;"
tamper
wait_for $((5 * SLOW)) counted > /dev/null || not_ok "a tampered artifact raises artifact_failed (/metrics)"
wait_for $((5 * SLOW)) failing > /dev/null || not_ok "the refused write is counted in state_write_failures_total"
check "the alerts raised are counted in memory" "artifact_failed round-00003,chain_broken $H4" \
	"$(in_memory)"
check "GET /alerts shows what is recorded: nothing yet" "" "$(active)"
check "the refused write is logged" true \
	"$([ "$(grep -c 'state database: recording an alert' "$LOG")" -ge 1 ] && echo true || echo false)"

db "DROP TRIGGER full;"
wait_for $((10 * SLOW)) recorded > /dev/null ||
	not_ok "once the database takes writes, the alerts are recorded without a restart"
check "GET /alerts now lists the alerts raised" "artifact_failed round-00003,chain_broken $H4" "$(active)"
check "each once" 2 "$(get '/alerts' | jq '.alerts | length')"
wait_for $((5 * SLOW)) state_ok > /dev/null || not_ok "state_database_ok is 1 again"
stop_daemon

finish
