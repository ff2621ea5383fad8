#!/bin/sh
# The participant's check before loading a model (docs/participant/): exit 0
# only for a verified, committed artifact with an intact lineage; every
# other answer, and no answer, must stop the load with its own status.
. "$top_srcdir/tests/integration/lib.sh"

SH_CHECK="$top_srcdir/docs/participant/check-before-load.sh"
PY_DIR="$top_srcdir/docs/participant"
# Importing the module must leave the source tree as it was.
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
H0=859245c72641256e051ead98898edc989faac09b4dcb35ec0fa3c346bf4f7645
H1=24a5fd1e9f42479a360fd5e561017e25a773df29262f1201407fb5b368744915
H2=c3eaa23b9433b29ff174122f7aafdeff518f944e32c6123f2d83340ebb81d1c5
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

run_checks() {
	local kind=$1
	shift
	exits "$kind: a committed round with an intact lineage: 0" 0 "$@" "$U" "$H4"
	says "$kind: it says so" "TRUSTED: $H4 (round 4, committed by ledger ledger.jsonl"
	exits "$kind: the RoundClose that committed it: 0" 0 "$@" "$U" "$H4" 3
	exits "$kind: round 1 by its RoundClose for round 0: 0" 0 "$@" "$U" "$H1" 0
	exits "$kind: round 0, verified but committed by nothing: 1" 1 "$@" "$U" "$H0"
	says "$kind: it says why" "the operator must pin it"
	exits "$kind: a RoundClose naming another round: 1" 1 "$@" "$U" "$H4" 2
	says "$kind: it gives the daemon's reason" "RoundClose for round 2 commits the artifact of round 3"
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
	exits "$kind: a descendant of a tampered artifact: 1" 1 "$@" "$U" "$H4"
	says "$kind: it names the break" "parent_failed"
}

HAVE_PY=
command -v python3 > /dev/null 2>&1 && HAVE_PY=1
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

printf '\377' | dd of="$STORE/round-00002/weights.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
failed2() { [ "$(state_of "$H2")" = failed ]; }
wait_for $((5 * SLOW)) failed2 > /dev/null || not_ok "the tampered round 2 failed"
tampered_checks sh sh "$SH_CHECK"
[ -n "$HAVE_PY" ] && tampered_checks python python3 "$PY_DIR/check_before_load.py"

finish
