#!/bin/sh
# Participants who ask for verifications while the daemon starts on a store
# of more rounds than a lineage pass's slice (its first scan and first pass
# under way) are told of no break that is not there: before the store has
# been scanned whole, a parent not found yet leaves a chain pending, never
# broken, and raises no alert. After a restart, every verdict remembered,
# such answers wait for the scan and the pass and read their rounds
# trusted, their chains intact (never chain_pending for want of the pass's
# turn).
. "$top_srcdir/tests/integration/lib.sh"

CLI="$top_builddir/lensemble-verify"
ROUNDS="04499 02000 00001"
"$MKART" --chain 4500 --tensors 1 --bytes 64 "$STORE" > "$WORK/head"
HEAD=$(cat "$WORK/head")
"$CLI" keygen "$WORK/coord" > /dev/null
mkdir -p "$WORK/keys"
cp "$WORK/coord.pub" "$WORK/keys/"
chmod -R a+rX "$WORK/keys"
"$CLI" sign-ledger --key "$WORK/coord.key" "$STORE/ledger.jsonl" > /dev/null
write_conf "trusted_keys = $WORK/keys" "rescan_interval = 3600"

# ask_all: the rounds asked for at once, POST /verify?wait=300, path form;
# each answer into $WORK/answer-ROUND.
ask_all() {
	local r pids=
	for r in $ROUNDS; do
		post '/verify?wait=300' "{\"path\":\"round-$r\"}" > "$WORK/answer-$r" &
		pids="$pids $!"
	done
	for r in $pids; do wait "$r"; done
}

# read_of ROUND: "verdict trusted chain-status" of its answer
read_of() { jq -r '"\(.verdict) \(.trusted) \(.chain.status)"' "$WORK/answer-$1"; }

launch_daemon
ask_all
for r in $ROUNDS; do
	case $(read_of "$r") in
	"ok true intact" | "ok false pending") ok "round $r on a first start: verified, its chain intact or pending" ;;
	*) not_ok "round $r on a first start: verified, its chain intact or pending (got '$(read_of "$r")')" ;;
	esac
done
head_trusted() { [ "$(get "/artifact/$HEAD" | jq -r .trusted)" = true ]; }
wait_for $((60 * SLOW)) head_trusted > /dev/null || not_ok "the head is trusted once all is verified"
check "no chain_broken alert was ever raised" "0 0" \
	"$(metric 'integrity_alerts{kind="chain_broken"}') $(get '/alerts?limit=100' | jq '[.alerts[] | select(.kind == "chain_broken")] | length')"
stop_daemon

launch_daemon
ask_all
for r in $ROUNDS; do
	check "round $r after a restart: verified, trusted, its chain intact" "ok true intact" "$(read_of "$r")"
done
check "the head is round 4499" "4499 $HEAD" \
	"$(get /chain | jq -r '"\(.committed_head.round_index) \(.committed_head.content_hash)"')"
stop_daemon
finish
