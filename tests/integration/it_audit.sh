#!/bin/sh
# GET /commitments: every commitment accepted, recorded once, with who
# made it (which token, never the token itself, or which key), from where
# (the client's address for a post, the file's path for a ledger record
# or a signed statement) and when it was first seen. Refused commitments
# are not recorded; restarts and a ledger learned again record nothing
# twice; a schema-5 database starts its audit from what it holds.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/trust.sh"

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
mkdir -p "$STORE/other"
TOKEN=audit-operator-token-0123456789
RTOKEN=audit-run-token-other-9876543210
printf '%s\n' "$TOKEN" > "$WORK/token"
printf '%s\n' "$RTOKEN" > "$WORK/other.token"
chmod 600 "$WORK/token" "$WORK/other.token"
[ -n "$RUN_AS" ] && chown "$RUN_AS" "$WORK/token" "$WORK/other.token"
keygen coord
keygen stranger
mkdir -p "$WORK/keys"
cp "$WORK/coord.pub" "$WORK/keys/"
chmod -R a+rX "$WORK/keys"
COORD=$(keyid "$WORK/coord.pub")
HA=$(printf a | sha256sum | cut -d' ' -f1)
HB=$(printf b | sha256sum | cut -d' ' -f1)
HC=$(printf c | sha256sum | cut -d' ' -f1)
RFC3339='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$'
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
rc_body() { printf '{"schema_version":2,"kind":"round_close","round_index":%s,"global_model_hash":"%s"}' "$1" "$2"; }
# roundclose QUERY BODY [curl args]: the status; the answer in $WORK/rc.out
roundclose() {
	local q=$1 b=$2; shift 2
	curl -s -o "$WORK/rc.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		"$@" --data-binary "$b" "$(url "/roundclose$q")"
}
count() { get "/commitments${1:-}" | jq '.commitments | length'; }
# newest [QUERY]: the newest audit row, its fields in one line
newest() {
	get "/commitments${1:-}" | jq -r '.commitments[0] | [.run, .kind, .round_index, .global_model_hash,
		.records, .head_record_hash, .source, .by, .key_id, .via, .from, .line] | map(tostring) | join(" ")'
}

write_conf "token_file = $WORK/token" "run_token_file = other:$WORK/other.token" \
	"trusted_keys = $WORK/keys" "commitment_policy = ledger" "rescan_interval = 3600"
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"

# --- ledger records --------------------------------------------------------------------
get '/commitments?run=.' > "$WORK/c"
check "the four records of ledger.jsonl, newest first, each with its line" "3:4 2:3 1:2 0:1" \
	"$(jq -r '[.commitments[] | "\(.round_index):\(.line)"] | join(" ")' "$WORK/c")"
check "read from the file, made by whoever wrote it" "ledger unsigned null file ledger.jsonl" \
	"$(jq -r '[.commitments[] | "\(.source) \(.by) \(.key_id) \(.via) \(.from)"] | unique | join(",")' "$WORK/c")"
check "first seen, RFC 3339" true \
	"$(jq --arg re "$RFC3339" '[.commitments[].first_seen | test($re)] | all' "$WORK/c")"
check "no cursor on the one page" null "$(jq .next "$WORK/c")"

# --- posts with a token -------------------------------------------------------------------
check "the operator token commits round 4" 201 "$(roundclose '' "$(rc_body 4 "$HA")" -H "Authorization: Bearer $TOKEN")"
check "recorded as the operator's, from the client's address" \
	". round_close 4 $HA null null roundclose operator null post 127.0.0.1 null" "$(newest)"
check "first_seen is when it was posted" true \
	"$(get /commitments | jq --arg re "$RFC3339" '.commitments[0].first_seen | test($re)')"
n=$(count)
check "the same post again: 200" 200 "$(roundclose '?run=.' "$(rc_body 4 "$HA")" -H "Authorization: Bearer $TOKEN")"
check "is not recorded twice" "$n" "$(count)"
check "the run's own token commits for its run" 201 \
	"$(roundclose '?run=other' "$(rc_body 1 "$HB")" -H "Authorization: Bearer $RTOKEN")"
check "recorded as the run token's" "other round_close 1 $HB null null roundclose run_token null post 127.0.0.1 null" "$(newest)"
check "the operator token commits for that run too" 201 \
	"$(roundclose '?run=other' "$(rc_body 2 "$HC")" -H "Authorization: Bearer $TOKEN")"
check "recorded as the operator's" "other operator" "$(get /commitments | jq -r '.commitments[0] | "\(.run) \(.by)"')"

# --- refused commitments are not recorded --------------------------------------------------
n=$(count)
check "another hash for a committed round: 409" 409 "$(roundclose '' "$(rc_body 4 "$HB")" -H "Authorization: Bearer $TOKEN")"
check "a wrong token: 401" 401 "$(roundclose '' "$(rc_body 6 "$HB")" -H "Authorization: Bearer ${TOKEN}x")"
check "a run token for another run: 401" 401 "$(roundclose '' "$(rc_body 6 "$HB")" -H "Authorization: Bearer $RTOKEN")"
check "an envelope signed by a key not trusted: 403" 403 \
	"$(roundclose '' "$(envelope "$PT_RC" "$(rc_stmt . 6 "$HB")" stranger)")"
check "none of them is recorded" "$n" "$(count)"

# --- signed posts -------------------------------------------------------------------------------
check "a signed RoundClose, no token" 201 "$(roundclose '' "$(envelope "$PT_RC" "$(rc_stmt . 5 "$HB")" coord)")"
check "recorded as the key's" ". round_close 5 $HB null null signed key $COORD post 127.0.0.1 null" "$(newest)"
HEAD4=$(head_of "$STORE/ledger.jsonl")
check "a signed ledger checkpoint" 201 "$(roundclose '' "$(envelope "$PT_CP" "$(cp_stmt . 4 "$HEAD4")" coord)")"
check "recorded as a checkpoint of 4 records by the key" \
	". ledger_checkpoint null null 4 $HEAD4 signed key $COORD post 127.0.0.1 null" "$(newest)"
n=$(count)
check "the same checkpoint again: 200" 200 "$(roundclose '' "$(envelope "$PT_CP" "$(cp_stmt . 4 "$HEAD4")" coord)")"
check "is not recorded twice" "$n" "$(count)"

# --- files: a signed statement, another run's ledger ------------------------------------------------
mkdir -p "$STORE/other/commitments"
envelope "$PT_RC" "$(rc_stmt other 7 "$HA")" coord > "$STORE/other/commitments/roundclose-7.json"
readable "$STORE"
stmt_seen() { get '/commitments?run=other' | jq -e '.commitments[] | select(.via == "file")' > /dev/null; }
wait_for $((5 * SLOW)) stmt_seen > /dev/null || not_ok "the statement file is read"
check "a statement file: its path and its key" \
	"other round_close 7 $HA null null signed key $COORD file other/commitments/roundclose-7.json null" \
	"$(newest '?run=other')"
jq -cn --arg h "$HC" '{schema_version: 1, round_index: 0, participants: ["site-a"], dataset_roots: {}, global_model_hash: $h, prev_record_hash: null}' \
	> "$STORE/other/ledger.jsonl"
readable "$STORE"
ledger_seen() { get '/commitments?run=other' | jq -e '.commitments[] | select(.source == "ledger")' > /dev/null; }
wait_for $((5 * SLOW)) ledger_seen > /dev/null || not_ok "the other run's ledger is read"
check "a ledger record of another run: its path and line" \
	"other round_close 0 $HC null null ledger unsigned null file other/ledger.jsonl 1" "$(newest '?run=other')"

# --- one run, pages, bad parameters ---------------------------------------------------------------
check "?run=other: its four commitments alone" "4 other" \
	"$(get '/commitments?run=other' | jq -r '"\(.commitments | length) \([.commitments[].run] | unique | join(","))"')"
check "?run=. and ?run= name the root" "$(get '/commitments?run=.')" "$(get '/commitments?run=')"
check "?run= a run holding nothing: an empty list" '[] null' \
	"$(get '/commitments?run=nowhere' | jq -c '.commitments, .next' | tr '\n' ' ' | sed 's/ $//')"
all=$(get /commitments | jq -c '[.commitments[].id]')
check "every commitment, newest first" true "$(echo "$all" | jq '. == (sort | reverse) and length == 11')"
paged=$(
	after=
	while :; do
		page=$(get "/commitments?limit=5${after:+&after=$after}")
		echo "$page" | jq -c '.commitments[].id'
		after=$(echo "$page" | jq -r '.next // empty')
		[ -n "$after" ] || break
	done | jq -cs .)
check "following next gives the whole list" "$all" "$paged"
check "limit and run combine" "2 true" \
	"$(get '/commitments?run=other&limit=2' | jq -r '"\(.commitments | length) \(.next == .commitments[1].id)"')"
for q in limit=0 limit=10001 after=0 after=x run=../x run=.hidden; do
	r=$(curl -s -w '\n%{http_code}' "$(url "/commitments?$q")")
	check "?$q: 400 bad_request with a sentence" "400 bad_request true" \
		"$(echo "$r" | tail -n 1) $(echo "$r" | sed '$d' | jq -r '"\(.error.code) \(.error.detail | length > 20)"')"
done
check "POST /commitments: 405" 405 "$(code POST /commitments)"

# --- tokens are never shown -------------------------------------------------------------------------
get /commitments > "$WORK/all"
check "no token in the audit" 0 "$(grep -c -e "$TOKEN" -e "$RTOKEN" "$WORK/all")"
check "no token in the log" 0 "$(grep -c -e "$TOKEN" -e "$RTOKEN" "$LOG")"

# --- nothing twice: a restart, a ledger learned again --------------------------------------------------
before=$(get /commitments | jq -c '[.commitments[] | [.id, .first_seen]]')
stop_daemon
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "verified again after a restart"
check "a restart, which reads every file again, records nothing twice" "$before" \
	"$(get /commitments | jq -c '[.commitments[] | [.id, .first_seen]]')"
check "DELETE /ledger" 200 "$(code DELETE '/ledger?path=ledger.jsonl' -H "Authorization: Bearer $TOKEN")"
relearned() { [ "$(get /chain | jq -r '[.ledgers[] | select(.path == "ledger.jsonl")][0].remembered_records')" = 4 ]; }
wait_for $((5 * SLOW)) relearned > /dev/null || not_ok "the ledger is learned again"
check "a ledger learned again keeps its records' first sightings" "$before" \
	"$(get /commitments | jq -c '[.commitments[] | [.id, .first_seen]]')"

# --- a schema-5 database: the audit starts from what it holds -------------------------------------------
if command -v sqlite3 > /dev/null 2>&1; then
	stop_daemon
	rm -rf "$STATE"
	mkdir -p "$STATE"
	{ cat "$top_srcdir/tests/integration/state-v5.sql"
	  echo "INSERT INTO commitments VALUES ('other', 9, '$HA', 2, 1500, '', NULL);
		INSERT INTO checkpoints VALUES ('', 4, '$HEAD4', '$COORD', X'00', 2500);
		INSERT INTO ledger_memory VALUES ('gone/ledger.jsonl', 0, 0, '$HB', '$HC', 1);"
	} | sqlite3 "$STATE/state.db"
	[ -n "$RUN_AS" ] && chown -R "$RUN_AS" "$STATE"
	start_daemon
	check "the database is migrated from schema 5, in one line" "1 1" "$(grep -c 'state database migrated' "$LOG") $(grep -c 'state database migrated from schema 5 to [0-9]' "$LOG")"
	get /commitments > "$WORK/c"
	check "a token post from before the audit: which token and which client are unknown" \
		"other 9 roundclose token null 1970-01-01T00:25:00.000Z" \
		"$(jq -r '.commitments[] | select(.round_index == 9) | "\(.run) \(.round_index) \(.source) \(.by) \(.from) \(.first_seen)"' "$WORK/c")"
	check "a posted checkpoint: its key" "4 key $COORD post 1970-01-01T00:41:40.000Z" \
		"$(jq -r '.commitments[] | select(.kind == "ledger_checkpoint") | "\(.records) \(.by) \(.key_id) \(.via) \(.first_seen)"' "$WORK/c")"
	check "a remembered ledger record: its file, run and line, seen at the upgrade" "gone 0 file gone/ledger.jsonl 1 true" \
		"$(jq -r --arg re "$RFC3339" '.commitments[] | select(.from == "gone/ledger.jsonl") | "\(.run) \(.round_index) \(.via) \(.from) \(.line) \(.first_seen > "2000")"' "$WORK/c")"
else
	echo "# SKIP: no sqlite3; the migration from schema 5 is not checked"
fi

finish
