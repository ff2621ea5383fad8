#!/bin/sh
# The status page: GET /, /status.css, /status.js and /summary over HTTP
# (types, the Content-Security-Policy, no inline script or style), then the
# page itself in headless Chromium against a demo-like store: the runs and
# heads of /chain, a tampered round failed with its reason, a run committed
# by OMS bundles with its source named, names from the store that look like
# HTML shown as text, an alert that comes live when a
# ledger is rewritten, the keyboard, a quiet console; a screenshot is kept
# under the build directory. Skips only when Chromium, its driver or
# Python's selenium is missing (scripts/install-deps installs them).
. "$top_srcdir/tests/integration/lib.sh"

PY=
for p in python3 /usr/bin/python3; do
	if command -v "$p" > /dev/null 2>&1 && "$p" -c 'import selenium' 2> /dev/null; then PY=$p; break; fi
done
DRIVER=$(command -v chromedriver || { [ -x /usr/lib/chromium/chromedriver ] && echo /usr/lib/chromium/chromedriver; })
if [ -z "$PY" ] || [ -z "$DRIVER" ] || ! command -v chromium > /dev/null 2>&1; then
	echo "SKIP: chromium, chromium-driver and python3-selenium are needed (scripts/install-deps)"
	exit 77
fi

# --- a demo-like store ---------------------------------------------------------
# Rounds 0-4 of the root run committed by a ledger the coordinator signs;
# a tampered round 5 in a directory named like an HTML element; a second
# run, signed too, whose name holds quotes and "</script>" (a directory
# "x\"q'<" holding "script>").
V="$top_builddir/lensemble-verify"
HOSTILE_COPY='<img src=x onerror=alert(1)>'
HOSTILE_RUN="x\"q'</script>"
"$V" keygen "$WORK/coordinator" > /dev/null
mkdir -p "$WORK/keys" "$STORE/$HOSTILE_RUN"
cp "$WORK/coordinator.pub" "$WORK/keys/"
chmod -R a+rX "$WORK/keys"
parent=
for r in 0 1 2 3 4; do
	if [ "$r" = 0 ]; then
		h=$("$MKART" --round 0 --seed 1 "$STORE/round-00000"); H0=$h
	else
		h=$("$MKART" --round "$r" --parent "$parent" --seed "$((r + 1))" \
			--ledger "$STORE/ledger.jsonl" "$STORE/round-$(printf %05d "$r")")
	fi
	parent=$h
done
"$V" sign-ledger --key "$WORK/coordinator.key" "$STORE/ledger.jsonl" > /dev/null
H5=$("$MKART" --round 5 --parent "$parent" --seed 6 "$STORE/$HOSTILE_COPY")
printf '\377' | dd of="$STORE/$HOSTILE_COPY/weights.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
"$MKART" --chain 3 --seed 100 "$STORE/$HOSTILE_RUN" > /dev/null
"$V" sign-ledger --key "$WORK/coordinator.key" --run "$HOSTILE_RUN" "$STORE/$HOSTILE_RUN/ledger.jsonl" > /dev/null
# A run committed by OpenSSF Model Signing bundles alone (its ledger is not
# signed): its rounds 0 and 1 signed with sign-oms by the key run_oms_keys
# gives it.
"$V" keygen --type ec-p256 "$WORK/oms" > /dev/null
mkdir -p "$WORK/omskeys"
cp "$WORK/oms.pub" "$WORK/omskeys/"
chmod -R a+rX "$WORK/omskeys"
"$MKART" --chain 2 --seed 200 "$STORE/oms-run" > /dev/null
for d in "$STORE"/oms-run/round-*; do "$V" sign-oms --key "$WORK/oms.key" "$d" > /dev/null; done
write_conf "rescan_interval = 3600" "genesis_hash = .:$H0" "trusted_keys = $WORK/keys" \
	"commitment_policy = signed" "run_oms_keys = oms-run:$WORK/omskeys"
start_daemon
settled() { [ "$(metric 'artifacts{state="pending"}')" = 0 ] && [ "$(metric 'artifacts{state="verifying"}')" = 0 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "the store is verified"
check "the tampered round failed" failed "$(state_of "$H5")"
check "the OMS run's round 1 is committed by its bundle (its unsigned ledger does not count)" "oms 0 true" \
	"$(get /chain | jq -r '.commitments[] | select(.run == "oms-run" and .round_index != null and .counts) | "\(.source) \(.round_index) \(.signed)"')"

# --- the page and its assets over HTTP -------------------------------------------
# headers PATH: the answer's headers, CR removed, in $WORK/h; body in $WORK/body.
headers() { curl -s -D - -o "$WORK/body" "$(url "$1")" | tr -d '\r' > "$WORK/h"; }
hdr() { sed -n "s/^$1: //Ip" "$WORK/h"; }
for a in "/ text/html index.html" "/status.css text/css status.css" "/status.js text/javascript status.js" \
	"/status.svg image/svg+xml status.svg"; do
	set -- $a
	p=$1
	headers "$p"
	check "GET $p: 200 $2" "200 $2; charset=utf-8" \
		"$(sed -n 's/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' "$WORK/h") $(hdr Content-Type)"
	case $(hdr Content-Security-Policy) in
	"default-src 'self';"*) ok "GET $p: Content-Security-Policy: default-src 'self'" ;;
	*) not_ok "GET $p: Content-Security-Policy: default-src 'self' (got '$(hdr Content-Security-Policy)')" ;;
	esac
	check "GET $p: nosniff" nosniff "$(hdr X-Content-Type-Options)"
	check "GET $p: src/daemon/page/$3 as built in" "$(cksum < "$top_srcdir/src/daemon/page/$3")" "$(cksum < "$WORK/body")"
done
get / > "$WORK/index.html"
check "the page has no inline script, style or handler" 0 \
	"$(grep -ciE '<script>|<script [^>]*>[^<]|<style|[[:space:]](style|on[a-z]+)=' "$WORK/index.html")"
check "and loads nothing from elsewhere" 0 "$(grep -ciE '(src|href)="(https?:)?//' "$WORK/index.html")"
check "HEAD / answers the headers" 200 "$(code HEAD / -I)"
check "POST / is 405" 405 "$(code POST / -d x)"
check "GET /summary: version, policy, keys, readiness" "$("$DAEMON" -V | cut -d' ' -f2) signed 1 true" \
	"$(get /summary | jq -r '"\(.version) \(.commitment_policy) \(.trusted_keys | length) \(.ready)"')"
check "GET /summary lists the raised alerts" "artifact_failed $HOSTILE_COPY" \
	"$(get /summary | jq -r '.alerts[] | select(.kind == "artifact_failed") | "\(.kind) \(.subject)"')"

# --- in the browser ------------------------------------------------------------------
SHOT="$top_builddir/tests/integration/it_page-screenshot.png"
mkdir -p "$(dirname "$SHOT")"
rm -f "$SHOT"
VD_BASE=$(url '') VD_STORE=$STORE VD_SHOT=$SHOT VD_HOSTILE_COPY=$HOSTILE_COPY \
	VD_HOSTILE_RUN=$HOSTILE_RUN VD_TAMPERED=$H5 VD_DRIVER=$DRIVER VD_SLOW=$SLOW \
	VD_SIGN="$V sign-roundclose --key $WORK/coordinator.key" \
	"$PY" "$top_srcdir/tests/integration/page_browser.py" > "$WORK/browser.out" 2>&1
rc=$?
while IFS= read -r line; do
	case $line in
	"ok - "*) ok "${line#ok - }" ;;
	"not ok - "*) not_ok "${line#not ok - }" ;;
	*) echo "$line" ;;
	esac
done < "$WORK/browser.out"
check "the browser check ran to its end" 0 "$rc"
if [ -s "$SHOT" ]; then ok "a screenshot is kept: $SHOT"; else not_ok "a screenshot is kept: $SHOT"; fi

finish
