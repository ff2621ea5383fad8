#!/bin/sh
# docs/alerts.yml: Prometheus must load it, and the rules must fire when
# (and only when) they should. No daemon: promtool replays series.
set -u
: "${top_srcdir:?run through make check}"

if ! command -v promtool > /dev/null 2>&1; then
	echo "SKIP: promtool is not installed"
	exit 77
fi
PASSED=0
FAILED=0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vd-alerts.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

run() {
	local desc=$1
	shift
	if "$@" > "$WORK/out" 2>&1; then
		PASSED=$((PASSED + 1)); echo "ok - $desc"
	else
		FAILED=$((FAILED + 1)); echo "not ok - $desc"; sed 's/^/#   /' "$WORK/out"
	fi
}

run "promtool check rules docs/alerts.yml" promtool check rules "$top_srcdir/docs/alerts.yml"
run "promtool test rules docs/alerts-test.yml" promtool test rules "$top_srcdir/docs/alerts-test.yml"

# Each kind the daemon exports has its rule, matching on the exact label.
for kind in artifact_failed commitment_mismatch ledger_broken fork equivocation chain_broken oms_mismatch; do
	if grep -q "lensemble_verifyd_integrity_alerts{kind=\"$kind\"} > 0" "$top_srcdir/docs/alerts.yml"; then
		PASSED=$((PASSED + 1)); echo "ok - a rule for integrity_alerts{kind=\"$kind\"}"
	else
		FAILED=$((FAILED + 1)); echo "not ok - a rule for integrity_alerts{kind=\"$kind\"}"
	fi
done

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
