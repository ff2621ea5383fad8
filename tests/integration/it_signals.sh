#!/bin/sh
# Configuration checks, SIGHUP reloads (good and bad), SIGTERM while
# hashing, port 0, and the root refusal; -t refuses what a start would,
# and a start that fails names the path, the account and the reason.
. "$top_srcdir/tests/integration/lib.sh"

cp -r "$DATA/store-basic/." "$STORE/"
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e

# -t: good and bad configurations.
write_conf
"$DAEMON" -t -c "$CONF" > "$WORK/t.out" 2>&1
check "-t accepts a good configuration" 0 "$?"
printf 'store = %s\nworkers = many\n' "$STORE" > "$WORK/bad.conf"
"$DAEMON" -t -c "$WORK/bad.conf" > "$WORK/t.out" 2>&1
check "-t refuses a bad configuration with status 1" 1 "$?"
check "and names the file and line" 1 "$(grep -c "bad.conf:2: workers must be a whole number" "$WORK/t.out")"
"$DAEMON" -t -c "$WORK/missing.conf" > "$WORK/t.out" 2>&1
check "-t refuses a missing file" 1 "$?"
"$DAEMON" -t -c "$CONF" --listen nowhere > "$WORK/t.out" 2>&1
check "a bad command-line override is refused" 1 "$?"
"$DAEMON" --bogus > /dev/null 2>&1
check "an unknown option is a usage error" 2 "$?"
if [ "$(id -u)" = 0 ]; then
	printf 'store = %s\nlisten = 127.0.0.1:0\nstate_dir = %s\n' "$STORE" "$STATE" > "$WORK/root.conf"
	"$DAEMON" -f -c "$WORK/root.conf" > "$WORK/t.out" 2>&1
	check "as root without a user to switch to, it refuses to start" 1 "$?"
	check "saying why" 1 "$(grep -c 'refusing to run as root' "$WORK/t.out")"
	"$DAEMON" -t -c "$WORK/root.conf" > "$WORK/t.out" 2>&1
	check "-t refuses it too" 1 "$?"
	check "saying why" 1 "$(grep -c 'refusing to run as root' "$WORK/t.out")"
	"$DAEMON" -t -c "$CONF" --user no-such-account-here > "$WORK/t.out" 2>&1
	check "-t refuses a user that does not exist" "1 1" "$? $(grep -c 'user "no-such-account-here" does not exist' "$WORK/t.out")"
fi

# A state directory the daemon's account cannot write (root's alone when
# the daemon switches to another account, read-only otherwise): -t says
# so, and a start fails saying the same facts.
ACCOUNT=${RUN_AS:-$(id -un)}
mkdir "$WORK/closed"
chmod 555 "$WORK/closed"
"$DAEMON" -t -c "$CONF" --state-dir "$WORK/closed" > "$WORK/t.out" 2>&1
check "-t refuses a state directory the daemon's account cannot write" 1 "$?"
check "naming the directory, the account and the reason" 1 \
	"$(grep -c "$WORK/closed: .* as user $ACCOUNT (uid [0-9]*): Permission denied (errno 13)" "$WORK/t.out")"
"$DAEMON" -t -c "$CONF" --state-dir "$WORK/closed/sub" > "$WORK/t.out" 2>&1
check "-t refuses a state directory that cannot be made" "1 1" \
	"$? $(grep -c "$WORK/closed/sub: the state directory does not exist and cannot be created as user $ACCOUNT" "$WORK/t.out")"
# The account's own directory, closed to it (and to others, so that the
# start does not stop earlier, at taking others' access away).
mkdir "$WORK/shut"
[ -n "$RUN_AS" ] && chown "$RUN_AS" "$WORK/shut"
chmod 500 "$WORK/shut"
"$DAEMON" -f -c "$CONF" --state-dir "$WORK/shut" > "$WORK/t.out" 2>&1
check "a start there fails" 1 "$?"
check "naming the database, the account and the reason" 1 \
	"$(grep -c "cannot open $WORK/shut/state.db: unable to open database file.*; $WORK/shut: cannot create files in the state directory as user $ACCOUNT (uid [0-9]*): Permission denied (errno 13)" "$WORK/t.out")"
"$DAEMON" -t -c "$CONF" > "$WORK/t.out" 2>&1
check "-t accepts the test's own state directory" "0 1" "$? $(grep -c "runs as user $ACCOUNT; state directory $STATE" "$WORK/t.out")"

start_daemon
check "port 0: the bound port is logged" 1 "$(grep -c 'listening on 127.0.0.1:[1-9]' "$LOG")"
wait_for $((10 * SLOW)) sh -c "[ \"\$(curl -s $(url /artifact/$H4) | jq -r .state)\" = verified ]" >/dev/null
[ -n "$RUN_AS" ] && check "it switched user after binding" 1 "$(grep -c "running as user $RUN_AS" "$LOG")"

# A bad configuration on SIGHUP: refused, old one kept, still serving.
cp "$CONF" "$WORK/good.conf"
echo "bogus_key = 1" >> "$CONF"
kill -HUP "$DPID"
refused() { grep -q 'reload refused' "$LOG"; }
wait_for $((2 * SLOW)) refused >/dev/null
check "a bad reload is refused, naming the line" 1 "$(grep -c 'reload refused.*verifyd.conf:[0-9]*: unknown key "bogus_key"' "$LOG")"
check "it keeps serving" 200 "$(code GET "/artifact/$H4")"
check "with the old configuration" verified "$(state_of "$H4")"
check "the refusal is counted" "0 1" \
	"$(metric 'config_reloads_total{result="success"}') $(metric 'config_reloads_total{result="failure"}')"
check "the configuration in force is the one loaded at start" "$(metric start_time_seconds)" \
	"$(metric config_last_reload_success_timestamp_seconds)"

# A good configuration on SIGHUP applies; of the keys read only at start,
# the warning names the one it changed.
cp "$WORK/good.conf" "$CONF"
sed -i 's/^log_level = debug/log_level = warning/' "$CONF"
echo "workers = 3" >> "$CONF"
kill -HUP "$DPID"
reloaded() { grep -q 'configuration reloaded' "$LOG"; }
wait_for $((2 * SLOW)) reloaded >/dev/null
check "a good reload is applied" 1 "$(grep -c 'configuration reloaded' "$LOG")"
check "the warning names the restart-only key it changed, and only it" \
	"warning: reload: workers changed; it takes effect only on restart, until then the running value holds" \
	"$(grep 'reload: ' "$LOG" | grep -v 'reload refused')"
check "the reload is counted" "1 1" \
	"$(metric 'config_reloads_total{result="success"}') $(metric 'config_reloads_total{result="failure"}')"
check "and timed" true "$(awk -v a="$(metric config_last_reload_success_timestamp_seconds)" \
	-v s="$(metric start_time_seconds)" 'BEGIN { print (a > s) ? "true" : "false" }')"
n=$(grep -c 'GET /healthz' "$LOG")
code GET /healthz > /dev/null
check "the new log level holds (no access log at warning)" "$n" "$(grep -c 'GET /healthz' "$LOG")"

# SIGTERM while a large artifact is being hashed: out within 5 s, status 0.
big_bytes=$((1024 * 1024 * 1024))
[ "$SLOW" -gt 1 ] && big_bytes=$((128 * 1024 * 1024))
"$MKART" --round 9 --sparse --bytes "$big_bytes" "$STORE/big" > /dev/null
readable "$STORE/big"
busy() { [ "$(metric workers_busy)" -ge 1 ]; }
wait_for $((5 * SLOW)) busy > /dev/null || true
stop_daemon

finish
