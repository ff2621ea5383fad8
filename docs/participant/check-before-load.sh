#!/bin/sh
# check-before-load.sh: ask lensemble-verifyd whether a model may be loaded.
#
#   check-before-load.sh [-w SECONDS] [-C CAFILE] URL HASH [ROUND]
#   check-before-load.sh -h | --help
#
#   URL    the daemon, e.g. https://verifyd.example.org:8420
#   HASH   the content hash you were told (a RoundClose's global_model_hash)
#   ROUND  that RoundClose's round_index, when you have the message: the
#          daemon then also checks that HASH is the artifact of round ROUND+1
#   -w     seconds the daemon may take to re-verify (0-300, default 120)
#   -C     CA certificate file to check the daemon's HTTPS certificate with
#
# The daemon re-hashes the artifact now (POST /verify), so the answer is
# about the bytes in its store at this moment, not a cached verdict. The
# model is fit to load only when the verdict is "ok" (the bytes are right)
# AND "trusted" is true (verified, lineage intact, committed by the run).
# Load the copy the daemon verified, or compare your copy's hash with it:
# this says nothing about bytes elsewhere. A refusal prints the daemon's
# untrusted_reason as it gives it, and says NOT TRUSTED only when the
# daemon's "trusted" is false; a trusted artifact that fails this check
# (a RoundClose naming another round) is DO NOT LOAD.
#
# Exit status:
#   0  trusted: load it
#   1  not fit to load: the artifact is known but failed verification, is
#      not committed, contradicts the RoundClose, or its lineage is broken
#   2  usage error
#   3  unknown: no artifact in the daemon's store claims HASH
#   4  no answer: the daemon is unreachable, answered an error, or did not
#      finish within -w seconds (try again, perhaps with a larger -w)
# Anything but 0 means: do not load.
#
# Needs curl and jq. POSIX sh.
set -u

# usage STATUS: the usage lines on standard error; --help (STATUS 0):
# the whole description above on standard output.
usage() {
	if [ "$1" = 0 ]; then
		sed -n '4,/^[^#]/{/^#/s/^# \{0,1\}//p;}' "$0"
	else
		sed -n '4,12s/^# \{0,1\}//p' "$0" >&2
	fi
	exit "$1"
}

[ "${1:-}" = --help ] && usage 0
wait=120
cafile=
while getopts w:C:h opt; do
	case $opt in
	w) wait=$OPTARG ;;
	C) cafile=$OPTARG ;;
	h) usage 0 ;;
	*) usage 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || [ $# -eq 3 ] || usage 2
url=${1%/}
hash=$2
round=${3:-}

case $wait in '' | *[!0-9]*) echo "check-before-load: -w takes 0 to 300 seconds" >&2; exit 2 ;; esac
[ "$wait" -le 300 ] || { echo "check-before-load: -w takes 0 to 300 seconds" >&2; exit 2; }
case $hash in *[!0-9a-f]* | '') hash_ok=no ;; *) hash_ok=yes ;; esac
if [ "$hash_ok" != yes ] || [ ${#hash} -ne 64 ]; then
	echo "check-before-load: HASH must be 64 lowercase hex characters" >&2
	exit 2
fi
if [ -n "$round" ]; then
	case $round in *[!0-9]*) echo "check-before-load: ROUND must be a whole number" >&2; exit 2 ;; esac
	body="{\"schema_version\":2,\"kind\":\"round_close\",\"round_index\":$round,\"global_model_hash\":\"$hash\"}"
else
	body="{\"content_hash\":\"$hash\"}"
fi
for tool in curl jq; do
	command -v "$tool" > /dev/null 2>&1 || { echo "check-before-load: $tool is not installed" >&2; exit 4; }
done

out=$(mktemp "${TMPDIR:-/tmp}/check-before-load.XXXXXX") || exit 4
trap 'rm -f "$out"' EXIT
trap 'exit 4' INT TERM

set -- -sS -o "$out" -w '%{http_code}' --connect-timeout 10 --max-time $((wait + 30)) \
	-X POST -H 'Content-Type: application/json' --data-binary "$body"
[ -n "$cafile" ] && set -- "$@" --cacert "$cafile"
if ! status=$(curl "$@" "$url/verify?wait=$wait"); then
	echo "NO ANSWER: cannot reach $url" >&2
	exit 4
fi

error_detail() {
	jq -r '"\(.error.code // "?"): \(.error.detail // "")"' "$out" 2> /dev/null || head -c 200 "$out"
}

case $status in
200) ;;
202)
	echo "NO ANSWER: the verification of $hash did not finish within $wait s; try again" >&2
	exit 4 ;;
404)
	echo "UNKNOWN: no artifact in the daemon's store claims $hash ($(error_detail))" >&2
	exit 3 ;;
*)
	echo "NO ANSWER: the daemon answered $status ($(error_detail))" >&2
	exit 4 ;;
esac

if ! jq -e --arg h "$hash" '.verdict == "ok" and .trusted == true and .content_hash == $h' \
	"$out" > /dev/null 2>&1; then
	jq -r --arg h "$hash" '
		if .content_hash != $h then
			"DO NOT LOAD: \($h): the daemon answered for \(.content_hash)"
		else
			(if .trusted != true then "NOT TRUSTED: \($h)"
			 else "DO NOT LOAD: \($h): the daemon trusts this artifact, but its verdict on this check is \(.verdict)"
			 end),
			(if .trusted != true and .untrusted_reason != null then
				"  untrusted_reason: \(.untrusted_reason)" else empty end),
			(if .verdict != "ok" then "  verdict: \(.verdict)" else empty end),
			(.reasons[]? | "  reason: \(.)"),
			(if .state != "verified" then
				"  state: \(.state)" + (if .code then " (\(.code): \(.detail))" else "" end)
			 else empty end),
			(if .chain.status != "intact" then
				"  lineage: \(.chain.status)",
				(.chain.breaks[]? | "    breaks at \(.content_hash) (round \(.round_index)): \(.reason)")
			 else empty end),
			(.commitment as $c |
			 "  commitment: \($c.source) (\($c.where))" as $by |
			 if $c == null and .header.round_index == 0 then
				"  commitment: none; no round commits round 0: the operator must pin it (genesis_hash)"
			 elif $c == null then
				"  commitment: none; no trusted commitment names a hash for round \(.header.round_index - 1)"
			 elif $c.matches == true then empty
			 elif $c.global_model_hash != $h then
				"\($by) commits \($c.global_model_hash) for round \($c.round_index), not this artifact"
			 elif $c.equivocation == true then
				"\($by) names this artifact for round \($c.round_index), but the round is an equivocation: another commitment names another hash"
			 else
				"\($by) names this artifact for round \($c.round_index), but does not count under the daemon'"'"'s commitment_policy"
			 end),
			"  trusted: \(.trusted)"
		end' "$out" >&2 2> /dev/null ||
		echo "NOT TRUSTED: $hash (the answer could not be read)" >&2
	exit 1
fi
jq -r '"TRUSTED: \(.content_hash) (round \(.header.round_index), committed by \(.commitment.source) \(.commitment.where), lineage of \(.chain.length) from \(.chain.root))"' "$out"
exit 0
