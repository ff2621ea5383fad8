#!/bin/sh
# The participant's check before loading a model (docs/participant/): exit 0
# only for a verified, committed artifact with an intact lineage; every
# other answer, and no answer, must stop the load with its own status; and
# what it prints agrees with the daemon's status object: its untrusted_reason
# verbatim, NOT TRUSTED only when "trusted" is false.
. "$top_srcdir/tests/integration/lib.sh"

SH_CHECK="$top_srcdir/docs/participant/check-before-load.sh"
PY_DIR="$top_srcdir/docs/participant"
# Importing the module must leave the source tree as it was.
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
H0=859245c72641256e051ead98898edc989faac09b4dcb35ec0fa3c346bf4f7645
H1=24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b368744915
H2=c3eaa23b9433b29ff174122f7aafdeff518f944e32c6123f2d83340ebb81d1c5
H3=0a180a891c6e40afe74b71a0f047a2f08ff387a88554a40a2460f72d55fea8b7
H4=31ceb436627afcffadc9adaa9ebaf7b86029955c1fc49236999a28ab33cb235e
NOHASH=1111111111111111111111111111111111111111111111111111111111111111

cp -r "$DATA/store-basic/." "$STORE/"
rm -f "$STORE/expected.json"
start_daemon
settled() { [ "$(metric 'artifacts{state="verified"}')" = 5 ]; }
wait_for $((10 * SLOW)) settled > /dev/null || not_ok "store-basic verified"
U=$(url "")
# Port 1 on loopback: nothing listens there on a test machine.
DEAD=http://127.0.0.1:1

# exits DESC WANT COMMAND...: COMMAND's exit status is WANT.
exits() {
	local desc=$1 want=$2 rc
	shift 2
	"$@" > "$WORK/out" 2> "$WORK/err"
	rc=$?
	check "$desc" "$want" "$rc"
	[ "$rc" = "$want" ] || { sed 's/^/#   /' "$WORK/out" "$WORK/err"; }
}
says() {
	if grep -q -- "$2" "$WORK/out" "$WORK/err"; then ok "$1"; else not_ok "$1: no '$2' in: $(cat "$WORK/out" "$WORK/err")"; fi
}
lacks() {
	if grep -q -- "$2" "$WORK/out" "$WORK/err"; then not_ok "$1: '$2' in: $(cat "$WORK/out" "$WORK/err")"; else ok "$1"; fi
}
field() { get "/artifact/$1" | jq -r "$2"; }

# agrees KIND HASH: what the last refusal printed agrees with the daemon's
# status object for HASH: NOT TRUSTED only when its "trusted" is false, a
# "trusted:" line that says what it says, and its untrusted_reason verbatim
# (none when it gives none).
agrees() {
	local kind=$1 h=$2 trusted reason
	trusted=$(field "$h" .trusted)
	reason=$(field "$h" '.untrusted_reason // empty')
	if [ "$trusted" = true ]; then
		lacks "$kind: no NOT TRUSTED about an artifact the daemon trusts" "NOT TRUSTED"
	else
		check "$kind: NOT TRUSTED, as the daemon says" "NOT TRUSTED: $h" "$(head -n 1 "$WORK/err")"
	fi
	check "$kind: the trusted line is the daemon's" "  trusted: $trusted" \
		"$(grep '^  trusted: ' "$WORK/err")"
	check "$kind: the daemon's untrusted_reason, verbatim" "${reason:+  untrusted_reason: $reason}" \
		"$(grep '^  untrusted_reason: ' "$WORK/err")"
}

run_checks() {
	local kind=$1
	shift
	exits "$kind: a committed round with an intact lineage: 0" 0 "$@" "$U" "$H4"
	says "$kind: it says so" "TRUSTED: $H4 (round 4, committed by ledger ledger.jsonl"
	exits "$kind: the RoundClose that committed it: 0" 0 "$@" "$U" "$H4" 3
	exits "$kind: round 1 by its RoundClose for round 0: 0" 0 "$@" "$U" "$H1" 0
	exits "$kind: round 0, verified but committed by nothing: 1" 1 "$@" "$U" "$H0"
	says "$kind: it says why" "the operator must pin it"
	agrees "$kind: round 0" "$H0"
	exits "$kind: a RoundClose naming another round: 1" 1 "$@" "$U" "$H4" 2
	says "$kind: it gives the daemon's reason" "RoundClose for round 2 commits the artifact of round 3"
	says "$kind: it says the daemon trusts the artifact, not the RoundClose" \
		"DO NOT LOAD: $H4: the daemon trusts this artifact, but its verdict on this check is fail"
	agrees "$kind: a RoundClose naming another round" "$H4"
	exits "$kind: a hash no artifact claims: 3" 3 "$@" "$U" "$NOHASH"
	exits "$kind: no verdict within the wait: 4" 4 "$@" -w 0 "$U" "$H4"
	exits "$kind: a daemon that cannot be reached: 4" 4 "$@" "$DEAD" "$H4"
	exits "$kind: a malformed hash: 2" 2 "$@" "$U" "$(echo "$H4" | tr a-f A-F)"
	exits "$kind: no hash: 2" 2 "$@" "$U"
}

# After a byte of round 2 changes on disk: round 2 fails, and the rounds
# after it lose their lineage, though their own bytes are intact.
tampered_checks() {
	local kind=$1
	shift
	exits "$kind: a tampered artifact: 1" 1 "$@" "$U" "$H2"
	says "$kind: it names the failure" "checkpoint_integrity"
	agrees "$kind: a tampered artifact" "$H2"
	exits "$kind: a descendant of a tampered artifact: 1" 1 "$@" "$U" "$H4"
	says "$kind: it names the break" "parent_failed"
	agrees "$kind: a descendant of a tampered artifact" "$H4"
}

# equivocation_checks KIND COMMAND...: round 1 (committing round 2) named
# twice, the artifact named by the commitment the status object shows.
equivocation_checks() {
	local kind=$1
	shift
	exits "$kind: an artifact of a round under equivocation: 1" 1 "$@" "$U" "$H2"
	says "$kind: it names the equivocation" \
		"commitment: ledger (ledger.jsonl) names this artifact for round 1, but the round is an equivocation"
	lacks "$kind: it never says the commitment names another artifact" "commits $H2"
	agrees "$kind: a round under equivocation" "$H2"
}

# policy_checks KIND COMMAND...: under commitment_policy = signed, the
# unsigned ledger names round 1's artifact and does not count.
policy_checks() {
	local kind=$1
	shift
	exits "$kind: named by a commitment that does not count: 1" 1 "$@" "$U" "$H1"
	says "$kind: it says the commitment does not count" \
		"commitment: ledger (ledger.jsonl) names this artifact for round 0, but does not count under the daemon's commitment_policy"
	lacks "$kind: it never says the commitment names another artifact" "commits $H1"
	agrees "$kind: a commitment that does not count" "$H1"
}

# --help, for each: the usage and exit statuses on standard output, exit 0.
helps() {
	local kind=$1 want=$2
	shift 2
	exits "$kind --help: 0" 0 "$@" --help
	if grep -q -- "$want" "$WORK/out" && grep -qi "exit status" "$WORK/out" &&
		[ ! -s "$WORK/err" ]; then
		ok "$kind --help: the usage and the exit statuses on standard output"
	else
		not_ok "$kind --help: no usage and exit statuses on standard output: $(cat "$WORK/out" "$WORK/err")"
	fi
}

HAVE_PY=
command -v python3 > /dev/null 2>&1 && HAVE_PY=1
helps check-before-load.sh "check-before-load.sh \[-w SECONDS\] \[-C CAFILE\] URL HASH \[ROUND\]" \
	sh "$SH_CHECK"
if [ -n "$HAVE_PY" ]; then
	helps check_before_load.py "usage: check_before_load.py" python3 "$PY_DIR/check_before_load.py"
	helps wait_for_head.py "usage: wait_for_head.py" python3 "$PY_DIR/wait_for_head.py"
fi
run_checks sh sh "$SH_CHECK"

if [ -n "$HAVE_PY" ]; then
	run_checks python python3 "$PY_DIR/check_before_load.py"
	exits "python module: assert_trusted returns the status of a trusted artifact" 0 \
		python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import check_before_load as c
s = c.assert_trusted(sys.argv[2], sys.argv[3], round=3)
sys.exit(0 if s["trusted"] is True and s["verdict"] == "ok" else 9)' "$PY_DIR" "$U" "$H4"
	for case in "NotTrusted $H0" "UnknownArtifact $NOHASH"; do
		exits "python module: ${case% *} is raised" 0 \
			python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import check_before_load as c
try:
    c.assert_trusted(sys.argv[2], sys.argv[3])
except getattr(c, sys.argv[4]) as e:
    sys.exit(0 if isinstance(e, c.CheckError) else 8)
sys.exit(9)' "$PY_DIR" "$U" "${case#* }" "${case% *}"
	done
	exits "python module: a bad hash is a ValueError" 0 \
		python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import check_before_load as c
try:
    c.assert_trusted("http://127.0.0.1:1", "abc")
except ValueError:
    sys.exit(0)
sys.exit(9)' "$PY_DIR"
else
	echo "# SKIP: python3 is not installed; check_before_load.py not run"
fi

# A rewritten ledger record names round 3's artifact for round 1: round 1
# is named twice, an equivocation; the restored ledger ends it.
cp "$STORE/ledger.jsonl" "$WORK/ledger.good"
sed -i "2s/$H2/$H3/" "$STORE/ledger.jsonl"
equivocation() { [ "$(field "$H2" '.commitment.equivocation')" = true ]; }
wait_for $((5 * SLOW)) equivocation > /dev/null || not_ok "round 1 is under equivocation"
equivocation_checks sh sh "$SH_CHECK"
[ -n "$HAVE_PY" ] && equivocation_checks python python3 "$PY_DIR/check_before_load.py"
cp "$WORK/ledger.good" "$STORE/ledger.jsonl"
trusted2() { [ "$(field "$H2" .trusted)" = true ]; }
wait_for $((5 * SLOW)) trusted2 > /dev/null || not_ok "the restored ledger commits round 2 again"

printf '\377' | dd of="$STORE/round-00002/weights.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
failed2() { [ "$(state_of "$H2")" = failed ]; }
wait_for $((5 * SLOW)) failed2 > /dev/null || not_ok "the tampered round 2 failed"
tampered_checks sh sh "$SH_CHECK"
[ -n "$HAVE_PY" ] && tampered_checks python python3 "$PY_DIR/check_before_load.py"

# Under commitment_policy = signed, with no key, the ledger commits nothing.
stop_daemon
write_conf "commitment_policy = signed"
start_daemon
U=$(url "")
uncommitted1() { [ "$(field "$H1" '"\(.state) \(.commitment.matches) \(.untrusted_reason)"')" = "verified false uncommitted" ]; }
wait_for $((10 * SLOW)) uncommitted1 > /dev/null || not_ok "round 1 verified, its ledger record not counting"
policy_checks sh sh "$SH_CHECK"
[ -n "$HAVE_PY" ] && policy_checks python python3 "$PY_DIR/check_before_load.py"

finish
