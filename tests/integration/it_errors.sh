#!/bin/sh
# Structured errors and legacy labels: the facts behind a failure in the
# copy entries of GET /artifact and POST /verify, kept over a restart and
# over the upgrade of a database from before them, and in the --json of
# lensemble-verify; an artifact of an older schema_version labelled
# legacy, and never trusted under legacy_policy = untrusted.
. "$top_srcdir/tests/integration/lib.sh"

CASES="$DATA/golden-cases"
CLI="$top_builddir/lensemble-verify"
H0=4d7ed7dee40f9a70cd8c3601c869bcfbbce35ff92723da1ddd4937b6d8fcc753
HTAMPER=0ec7edcd9ade216a8598e20fe6f0b52602168a453ea59775d182baedd584cd85
HHEAD=98fdd6ff490e28ba3a2688419b6b60ffabea44d51bb47f7e2d2efe36c77e73e9
HV1=ca3f30c0139baa76d2dd636a844cf3bdb31cdd6fcc4661894f25ea29f1f4b63a
REDOWNLOAD="re-download round-00000 from the coordinator; do not load it"
UPGRADE="upgrade the verifier: this artifact uses schema version 999, newer than the 2 it reads"

# round-00000, and copies that claim its hash but fail; an action head;
# a header too new to read; round 0 written at schema_version 1.
for c in round-00000 tamper-weight-byte pickle-payload action-head schema-too-new schema-v1; do
	cp -r "$CASES/$c" "$STORE/"
done
# The schema-1 artifact is the run's pinned round 0: committed.
write_conf "genesis_hash = $HV1" "rescan_interval = 3600"
start_daemon
settled() {
	[ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ] &&
		[ "$(state_of "$HV1")" = verified ] && [ "$(state_of "$H0")" = failed ] &&
		[ "$(state_of "$HHEAD")" = failed ]
}
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store is verified"

copy() {   # copy HASH PATH: that copy's entry in GET /artifact/HASH
	get "/artifact/$1" | jq -c --arg p "$2" '.copies[] | select(.path == $p)'
}

# --- the facts in GET /artifact ------------------------------------------------------------
c=$(copy "$H0" tamper-weight-byte)
check "integrity: the hash expected and the one recomputed" "$H0 $HTAMPER" \
	"$(echo "$c" | jq -r '"\(.expected_hash) \(.recomputed_hash)"')"
check "integrity: what to do" "$REDOWNLOAD" "$(echo "$c" | jq -r .remediation)"
check "integrity: facts that do not apply are absent" "false false false false" \
	"$(echo "$c" | jq -c '[has("tensor"), has("file"), has("file_schema_version"), has("reader_max_version")] | map(tostring) | join(" ")' -r)"
c=$(copy "$H0" pickle-payload)
check "a weight file that is not safetensors: which file" "checkpoint_integrity weights.safetensors" \
	"$(echo "$c" | jq -r '"\(.code) \(.file)"')"
check "and no hashes it did not reach" "false" "$(echo "$c" | jq 'has("expected_hash")')"
c=$(copy "$H0" round-00000)
check "a verified copy carries no facts" "verified false false" \
	"$(echo "$c" | jq -r '"\(.state) \(has("remediation")) \(has("expected_hash"))"')"
c=$(copy "$HHEAD" action-head)
check "residency: which tensor in which file" "residency_violation action_head.so101.weight weights.safetensors" \
	"$(echo "$c" | jq -r '"\(.code) \(.tensor) \(.file)"')"
check "residency: what to do" 1 "$(echo "$c" | jq '[.remediation | select(test("^do not load or share it: round-00000 "))] | length')"
check "a failed hash says why it is not trusted" "false failed" \
	"$(get "/artifact/$HHEAD" | jq -r '"\(.trusted) \(.untrusted_reason)"')"

# --- POST /verify: the same facts, and a header too new to read --------------------------------
r=$(post /verify "{\"content_hash\":\"$H0\"}")
check "POST /verify (hash): fail" fail "$(echo "$r" | jq -r .verdict)"
check "its copies carry the facts" "$H0 $HTAMPER $REDOWNLOAD" \
	"$(echo "$r" | jq -r '.copies[] | select(.path == "tamper-weight-byte") | "\(.expected_hash) \(.recomputed_hash) \(.remediation)"')"
r=$(post /verify '{"path":"schema-too-new"}')
check "schema: the file's version and the newest the reader reads" "schema_version_mismatch 999 2" \
	"$(echo "$r" | jq -r '.copies[0] | "\(.code) \(.file_schema_version) \(.reader_max_version)"')"
check "schema: what to do" "$UPGRADE" "$(echo "$r" | jq -r '.copies[0].remediation')"
check "a directory that claims no hash: not legacy, not trusted, failed" "false false failed" \
	"$(echo "$r" | jq -r '"\(.legacy) \(.trusted) \(.untrusted_reason)"')"

# --- legacy ----------------------------------------------------------------------------------
s=$(get "/artifact/$HV1")
check "schema_version 1 verifies through the migration" "verified 1" \
	"$(echo "$s" | jq -r '"\(.state) \(.header.schema_version)"')"
check "and is labelled legacy, migrated from 1" "true 1" "$(echo "$s" | jq -r '"\(.legacy) \(.migrated_from)"')"
check "under legacy_policy = accept it is trusted, with no reason against" "true false true" \
	"$(echo "$s" | jq -r '"\(.trusted) \(has("untrusted_reason")) \(.copies[0].trusted)"')"
check "a current artifact is not legacy" "false false" \
	"$(get "/artifact/$H0" | jq -r '"\(.legacy) \(has("migrated_from"))"')"

# --- kept over a restart: from the state database, not hashed again ----------------------------
for h in "$H0" "$HHEAD"; do get "/artifact/$h" | jq -S -c .copies; done > "$WORK/before"
stop_daemon
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store is known again after a restart"
for h in "$H0" "$HHEAD"; do get "/artifact/$h" | jq -S -c .copies; done > "$WORK/after"
check "after a restart every copy entry is the same, facts included" "" "$(cmp "$WORK/before" "$WORK/after" 2>&1)"
check "nothing was hashed again" 0 "$(metric verifications_total)"
check "the remediation survived" "$REDOWNLOAD" "$(copy "$H0" tamper-weight-byte | jq -r .remediation)"

# --- legacy_policy = untrusted ---------------------------------------------------------------
stop_daemon
write_conf "genesis_hash = $HV1" "rescan_interval = 3600" "legacy_policy = untrusted"
start_daemon
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store is known again"
s=$(get "/artifact/$HV1")
check "untrusted: a legacy committed artifact is verified, committed, intact" "verified true intact" \
	"$(echo "$s" | jq -r '"\(.state) \(.commitment.matches) \(.chain.status)"')"
check "but not trusted, and says why" "false legacy false" \
	"$(echo "$s" | jq -r '"\(.trusted) \(.untrusted_reason) \(.copies[0].trusted)"')"
check "still labelled legacy" "true 1" "$(echo "$s" | jq -r '"\(.legacy) \(.migrated_from)"')"
check "its verification stays ok" ok "$(post /verify "{\"content_hash\":\"$HV1\"}" | jq -r .verdict)"
check "the attested verdict is not trusted either" false \
	"$(get "/artifact/$HV1/attestation" | jq -r .payload | base64 -d | jq .predicate.trusted)"
# A reload back to accept trusts it again.
write_conf "genesis_hash = $HV1" "rescan_interval = 3600" "legacy_policy = accept"
kill -HUP "$DPID"
trusted_again() { [ "$(get "/artifact/$HV1" | jq -r .trusted)" = true ]; }
wait_for $((5 * SLOW)) trusted_again > /dev/null || not_ok "a reload to legacy_policy = accept trusts it again"
check "and the reason is gone" false "$(get "/artifact/$HV1" | jq 'has("untrusted_reason")')"

# --- a database from before the facts: upgraded, its verdicts kept ------------------------------
if command -v sqlite3 > /dev/null 2>&1; then
	stop_daemon
	sqlite3 "$STATE/state.db" "ALTER TABLE verdicts DROP COLUMN expected_hash;
		ALTER TABLE verdicts DROP COLUMN recomputed_hash;
		ALTER TABLE verdicts DROP COLUMN file_schema_version;
		ALTER TABLE verdicts DROP COLUMN reader_max_version;
		ALTER TABLE verdicts DROP COLUMN tensor; ALTER TABLE verdicts DROP COLUMN file;
		ALTER TABLE verdicts DROP COLUMN remediation;
		DROP TABLE statements; DROP TABLE withdrawals;
		ALTER TABLE verdicts DROP COLUMN oms_code; ALTER TABLE verdicts DROP COLUMN oms_verified;
		ALTER TABLE verdicts DROP COLUMN oms_differ; ALTER TABLE verdicts DROP COLUMN oms_method;
		ALTER TABLE verdicts DROP COLUMN oms_key_id; ALTER TABLE verdicts DROP COLUMN oms_detail;
		ALTER TABLE verdicts DROP COLUMN oms_trust; PRAGMA user_version = 6;"
	[ -n "$RUN_AS" ] && chown -R "$RUN_AS" "$STATE"
	start_daemon
	wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store is known after the upgrade"
	check "a schema-6 database is migrated, in one line" 1 "$(grep -c 'state database migrated from schema 6 to [0-9]' "$LOG")"
	check "its verdicts are kept, not hashed again" "0 failed checkpoint_integrity" \
		"$(metric verifications_total) $(copy "$H0" tamper-weight-byte | jq -r '"\(.state) \(.code)"')"
	check "a verdict stored before the facts has none" false \
		"$(copy "$H0" tamper-weight-byte | jq 'has("remediation")')"
	post /verify '{"path":"tamper-weight-byte"}' > /dev/null
	check "verified again, it has them" "$H0 $REDOWNLOAD" \
		"$(copy "$H0" tamper-weight-byte | jq -r '"\(.expected_hash) \(.remediation)"')"
else
	echo "# SKIP: no sqlite3; the upgrade of a schema-6 database is not checked"
fi

# --- lensemble-verify --json --------------------------------------------------------------------
cli() { "$CLI" --json "$CASES/$1"; }
check "CLI: integrity facts" "$H0 $HTAMPER $REDOWNLOAD" \
	"$(cli tamper-weight-byte | jq -r '"\(.expected_hash) \(.recomputed_hash) \(.remediation)"')"
check "CLI: schema facts" "999 2 $UPGRADE" \
	"$(cli schema-too-new | jq -r '"\(.file_schema_version) \(.reader_max_version) \(.remediation)"')"
check "CLI: residency facts" "action_head.so101.weight weights.safetensors" \
	"$(cli action-head | jq -r '"\(.tensor) \(.file)"')"
check "CLI: facts that do not apply are absent" '["claimed_hash","code","detail","file","legacy","ok","path","remediation"]' \
	"$(cli pickle-payload | jq -c 'keys')"
check "CLI: legacy" "true true 1" "$(cli schema-v1 | jq -r '"\(.ok) \(.legacy) \(.migrated_from)"')"
check "CLI: not legacy" "true false false" "$(cli round-00000 | jq -r '"\(.ok) \(.legacy) \(has("migrated_from"))"')"
check "CLI text: the remediation follows the detail" 1 \
	"$("$CLI" "$CASES/tamper-weight-byte" | grep -c "FAILED checkpoint_integrity: .*; $REDOWNLOAD\$")"

finish
