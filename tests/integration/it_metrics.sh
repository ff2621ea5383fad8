#!/bin/sh
# /metrics: every series of the interface, valid Prometheus text.
. "$top_srcdir/tests/integration/lib.sh"

cp -r "$DATA/store-basic/." "$STORE/"
start_daemon
done_() { [ "$(metric 'artifacts{state="verified"}')" = 5 ]; }
wait_for $((10 * SLOW)) done_ > /dev/null || not_ok "store-basic verified"
code GET /healthz > /dev/null
counted() { [ -n "$(metric 'http_requests_total{route="/healthz",code="200"}')" ]; }
wait_for $((5 * SLOW)) counted > /dev/null || not_ok "GET /healthz is counted"
get /metrics > "$WORK/metrics"

if command -v promtool > /dev/null 2>&1; then
	if promtool check metrics < "$WORK/metrics" > "$WORK/promtool.out" 2>&1; then
		ok "promtool accepts the exposition"
	else
		not_ok "promtool accepts the exposition"; cat "$WORK/promtool.out"
	fi
else
	echo "SKIP: promtool is not installed"; exit 77
fi
check "Content-Type is the 0.0.4 text format" "text/plain; version=0.0.4; charset=utf-8" \
	"$(curl -s -D - -o /dev/null "$(url /metrics)" | tr -d '\r' | sed -n 's/^Content-Type: //p')"

for series in 'artifacts{state="pending"}' 'artifacts{state="verifying"}' \
	'artifacts{state="verified"}' 'artifacts{state="failed"}' verifications_total \
	'verification_failures_total{code="checkpoint_integrity"}' \
	'integrity_alerts{kind="artifact_failed"}' 'integrity_alerts{kind="commitment_mismatch"}' \
	'integrity_alerts{kind="ledger_broken"}' 'integrity_alerts{kind="fork"}' \
	'integrity_alerts{kind="equivocation"}' 'integrity_alerts{kind="chain_broken"}' \
	bytes_hashed_total verify_duration_seconds_count 'verify_duration_seconds_bucket{le="+Inf"}' \
	queue_depth workers_busy committed_head_round last_scan_timestamp_seconds \
	hashing_bytes_total hashing_yields_total \
	'store_scans_total{scope="whole"}' 'store_scans_total{scope="changes"}' \
	last_scrub_timestamp_seconds 'http_requests_total{route="/healthz",code="200"}' \
	'config_reloads_total{result="success"}' 'config_reloads_total{result="failure"}' \
	config_last_reload_success_timestamp_seconds \
	http_request_duration_seconds_count 'build_info{version="'"$(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")"'"}'; do
	v=$(awk -v n="lensemble_verifyd_$series" '$1 == n { print $2 }' "$WORK/metrics")
	if [ -n "$v" ]; then ok "series $series = $v"; else not_ok "series $series is exported"; fi
done
check "no reload yet: the configuration in force is the start's" \
	"0 0 $(awk '$1 == "lensemble_verifyd_start_time_seconds" { print $2 }' "$WORK/metrics")" \
	"$(awk '$1 == "lensemble_verifyd_config_reloads_total{result=\"success\"}" { s = $2 }
		$1 == "lensemble_verifyd_config_reloads_total{result=\"failure\"}" { f = $2 }
		$1 == "lensemble_verifyd_config_last_reload_success_timestamp_seconds" { t = $2 }
		END { print s, f, t }' "$WORK/metrics")"
check "verified count" 5 "$(metric 'artifacts{state="verified"}')"
check "bytes hashed: five artifacts of 352 tensor bytes" 1760 "$(metric bytes_hashed_total)"
check "... counted by slices too" 1760 "$(metric hashing_bytes_total)"
check "no hash or path in any label" 0 "$(grep -cE '[0-9a-f]{64}|round-0' "$WORK/metrics")"
finish
