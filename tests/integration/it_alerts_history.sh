#!/bin/sh
# GET /alerts: the alert history kept in the state database. An alert
# raised then cleared shows both times; ?active= filters; pages follow
# their cursor to the whole list; bad parameters are 400 with a sentence.
# An alert still raised across a restart keeps its episode, one that
# stopped while the daemon was down is closed, cleared alerts older than
# alert_retention are removed, and a schema-5 database's raised and
# cleared events are folded into episodes.
. "$top_srcdir/tests/integration/lib.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
W3="$STORE/round-00003/weights.safetensors"
cp "$W3" "$WORK/w3.orig"
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
tamper() { printf '\377' | dd of="$W3" bs=1 seek=300 conv=notrunc 2>/dev/null; }
restore() { cp "$WORK/w3.orig" "$W3"; }
# failed_episodes [QUERY]: the artifact_failed episodes, "id raised_at cleared_at" each.
failed_episodes() {
	get "/alerts${1:-}" | jq -r '.alerts[] | select(.kind == "artifact_failed") | "\(.id) \(.raised_at) \(.cleared_at)"'
}
raised() { [ "$(failed_episodes '?active=1' | wc -l)" = 1 ]; }
none_active() { [ "$(get '/alerts?active=1' | jq '.alerts | length')" = 0 ]; }
RFC3339='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$'

write_conf "rescan_interval = 3600"
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"
check "no alert yet: an empty history, no cursor" '[] null' "$(get /alerts | jq -c '.alerts, .next' | tr '\n' ' ' | sed 's/ $//')"

# --- raised, then cleared --------------------------------------------------------
tamper
wait_for $((5 * SLOW)) raised > /dev/null || not_ok "a tampered artifact raises artifact_failed"
get '/alerts?active=1' > "$WORK/active"
check "artifact_failed names the copy, still raised" "round-00003 null" \
	"$(jq -r '.alerts[] | select(.kind == "artifact_failed") | "\(.subject) \(.cleared_at)"' "$WORK/active")"
check "raised_at is RFC 3339" true \
	"$(jq --arg re "$RFC3339" '[.alerts[].raised_at | test($re)] | all' "$WORK/active")"
check "the detail says why" true \
	"$(jq '[.alerts[] | select(.kind == "artifact_failed") | .detail | contains("checkpoint_integrity")] == [true]' "$WORK/active")"
check "its descendant's chain_broken is raised too, about its hash" "$H4" \
	"$(jq -r '.alerts[] | select(.kind == "chain_broken") | .subject' "$WORK/active")"
check "newest first" true "$(jq '[.alerts[].id] as $i | $i == ($i | sort | reverse)' "$WORK/active")"
FIRST=$(failed_episodes | cut -d' ' -f1)
restore
wait_for $((5 * SLOW)) none_active > /dev/null || not_ok "restoring the file clears the alerts"
ep=$(failed_episodes | head -n 1)
check "the episode keeps its id and now has cleared_at" "$FIRST cleared" \
	"$(echo "$ep" | awk '{ print $1, ($3 == "null" ? "raised" : "cleared") }')"
check "cleared_at is RFC 3339, not before raised_at" true \
	"$(get /alerts | jq --arg re "$RFC3339" '[.alerts[] | (.cleared_at | test($re)) and .cleared_at >= .raised_at] | all')"
check "?active=1: nothing is raised" 0 "$(get '/alerts?active=1' | jq '.alerts | length')"
check "?active=0: the two cleared alerts" "artifact_failed chain_broken" \
	"$(get '/alerts?active=0' | jq -r '[.alerts[].kind] | sort | join(" ")')"

# --- a second episode, pages -------------------------------------------------------
tamper
wait_for $((5 * SLOW)) raised > /dev/null || not_ok "tampering again raises artifact_failed again"
check "a new episode, listed before the first" "raised cleared" \
	"$(failed_episodes | awk '{ print ($3 == "null" ? "raised" : "cleared") }' | tr '\n' ' ' | sed 's/ $//')"
check "the first episode is unchanged" "$ep" "$(failed_episodes | tail -n 1)"
all=$(get /alerts | jq -c '[.alerts[].id]')
check "four episodes in all" 4 "$(echo "$all" | jq length)"
get '/alerts?limit=1' > "$WORK/p1"
check "limit=1: one alert and a cursor, its id" true "$(jq '(.alerts | length) == 1 and .next == .alerts[0].id' "$WORK/p1")"
paged=$(
	after=
	while :; do
		page=$(get "/alerts?limit=3${after:+&after=$after}")
		echo "$page" | jq -c '.alerts[].id'
		after=$(echo "$page" | jq -r '.next // empty')
		[ -n "$after" ] || break
	done | jq -cs .)
check "following next gives the whole list" "$all" "$paged"
last=$(echo "$all" | jq '.[-1]')
check "the page after the last alert is empty, without a cursor" '[] null' \
	"$(get "/alerts?after=$last" | jq -c '.alerts, .next' | tr '\n' ' ' | sed 's/ $//')"
check "limit and active combine" 1 "$(get '/alerts?active=1&limit=1' | jq '.alerts | length')"
check "?active=true is ?active=1" "$(get '/alerts?active=1' | jq -c .)" "$(get '/alerts?active=true' | jq -c .)"
check "?active=false is ?active=0" "$(get '/alerts?active=0' | jq -c .)" "$(get '/alerts?active=false' | jq -c .)"

# --- bad parameters -------------------------------------------------------------------
for q in limit=0 limit=10001 limit=x limit=-1 after=0 after=x after=-5 after=1.5 active=2 active=yes active=TRUE active=; do
	r=$(curl -s -w '\n%{http_code}' "$(url "/alerts?$q")")
	check "?$q: 400 bad_request with a sentence" "400 bad_request true" \
		"$(echo "$r" | tail -n 1) $(echo "$r" | sed '$d' | jq -r '"\(.error.code) \(.error.detail | length > 20)"')"
done
curl -s -D "$WORK/h" -o /dev/null -X DELETE "$(url /alerts)"
check "DELETE /alerts: 405 with Allow" "405 GET, HEAD" \
	"$(sed -n 's/^HTTP[^ ]* \([0-9]*\).*/\1/p' "$WORK/h") $(tr -d '\r' < "$WORK/h" | sed -n 's/^Allow: //p')"
check "HEAD /alerts" 200 "$(curl -s -o /dev/null -I -w '%{http_code}' "$(url /alerts)")"
check "counted under its route" 1 "$(metric 'http_requests_total{route="/alerts",code="405"}')"

# --- restarts ----------------------------------------------------------------------------
open_ep=$(failed_episodes '?active=1')
stop_daemon
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "verified again after a restart"
wait_for $((5 * SLOW)) raised > /dev/null || not_ok "the failed copy is failed after a restart"
check "an alert raised across a restart keeps its episode" "$open_ep" "$(failed_episodes '?active=1')"
check "and no new one is opened" 4 "$(get /alerts | jq '.alerts | length')"
# Removed while the daemon was down: nothing raises it again (round 3 was
# verified and committed before it failed, so round 4's chain passes
# through it as a pruned link), so both episodes are closed once the
# first scan has been looked at.
stop_daemon
mv "$STORE/round-00003" "$WORK/round-00003"
start_daemon
wait_for $((5 * SLOW)) none_active > /dev/null || not_ok "alerts that stopped while the daemon was down are closed"
check "the episode is closed at start, keeping its id and raised_at" "$(echo "$open_ep" | cut -d' ' -f1-2) cleared" \
	"$(failed_episodes | head -n 1 | awk '{ print $1, $2, ($3 == "null" ? "raised" : "cleared") }')"
check "the restart's closing is logged" 1 "$(grep -c '2 alert(s) raised before the restart and not raised since are cleared' "$LOG")"
check "no episode is opened" 4 "$(get /alerts | jq '.alerts | length')"

# --- retention ---------------------------------------------------------------------------
# Put back whole: a scan between a move and a repair would raise and clear
# one more episode.
cp "$WORK/w3.orig" "$WORK/round-00003/weights.safetensors"
mv "$WORK/round-00003" "$STORE/round-00003"
readable "$STORE"
back3() { get /artifacts | jq -e '[.artifacts[] | select(any(.copies[]; .path | startswith("round-00003"))) | .state] == ["verified"]' > /dev/null; }
wait_for $((10 * SLOW)) back3 > /dev/null || not_ok "round 3 is back"
tamper
wait_for $((5 * SLOW)) raised > /dev/null || not_ok "tampered once more"
# The newest cleared_at, in seconds: alert_retention = 1s removes the
# cleared alerts at start once the clock is past it by more than 1 s.
last_cleared=$(get /alerts | jq '[.alerts[].cleared_at // empty | (.[0:19] + "Z" | fromdate) + (.[20:23] | tonumber) / 1000] | max')
stop_daemon
write_conf "rescan_interval = 3600" "alert_retention = 1s"
retention_past() { awk -v c="$last_cleared" -v n="$(date +%s.%N)" 'BEGIN { exit !(n > c + 1.01) }'; }
wait_for $((5 * SLOW)) retention_past > /dev/null || not_ok "the clock passes alert_retention"
start_daemon
wait_for $((5 * SLOW)) raised > /dev/null || not_ok "still failed after the restart"
check "cleared alerts older than alert_retention are removed at start; raised ones stay" \
	"artifact_failed null,chain_broken null" \
	"$(get /alerts | jq -r '[.alerts[] | "\(.kind) \(.cleared_at)"] | sort | join(",")')"
check "the removal is logged" 1 "$(grep -c '4 alert(s) cleared more than alert_retention (1 s) ago removed' "$LOG")"
check "-t accepts alert_retention = 1s" 0 "$("$DAEMON" -t -c "$CONF" > /dev/null; echo $?)"
stop_daemon
restore

# --- a schema-5 database: its events folded into episodes -----------------------------------
if command -v sqlite3 > /dev/null 2>&1; then
	rm -rf "$STATE"
	mkdir -p "$STATE"
	# kind A raised at 1000 s, raised again at a restart (2000), cleared at
	# 3000, raised again at 4000 and cleared at 5000; kind B raised at 6000
	# and never cleared, by a daemon that no longer raises it.
	{ cat "$top_srcdir/tests/integration/state-v5.sql"
	  echo "INSERT INTO alerts (kind, subject, detail, event, at) VALUES
		('ledger_broken', 'a/ledger.jsonl', 'first', 'raised', 1000),
		('ledger_broken', 'a/ledger.jsonl', 'again', 'raised', 2000),
		('ledger_broken', 'a/ledger.jsonl', 'fixed', 'cleared', 3000),
		('ledger_broken', 'a/ledger.jsonl', 'second', 'raised', 4000),
		('fork', '$H4', 'two children', 'raised', 6000),
		('ledger_broken', 'a/ledger.jsonl', 'fixed again', 'cleared', 5000);"
	} | sqlite3 "$STATE/state.db"
	[ -n "$RUN_AS" ] && chown -R "$RUN_AS" "$STATE"
	write_conf "rescan_interval = 3600" "alert_retention = 0"
	start_daemon
	check "the database is migrated from schema 5, in one line" "1 1" "$(grep -c 'state database migrated' "$LOG") $(grep -c 'state database migrated from schema 5 to [0-9]' "$LOG")"
	check "a repeated raise continues its episode: three episodes, newest first" \
		"fork 1970-01-01T01:40:00.000Z|ledger_broken 1970-01-01T01:06:40.000Z 1970-01-01T01:23:20.000Z second|ledger_broken 1970-01-01T00:16:40.000Z 1970-01-01T00:50:00.000Z first" \
		"$(get /alerts | jq -r '[.alerts[] | "\(.kind) \(.raised_at)\(if .kind == "fork" then "" else " \(.cleared_at) \(.detail)" end)"] | join("|")')"
	check "the episode left open by the old daemon is closed at start" false \
		"$(get /alerts | jq '.alerts[0].cleared_at == null')"
else
	echo "# SKIP: no sqlite3; the migration from schema 5 is not checked"
fi

finish
