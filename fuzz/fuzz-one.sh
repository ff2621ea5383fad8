#!/bin/sh
# One fuzz target for a while, from a copy of its seeds; `make fuzz` runs
# as many at once as there are CPUs (libFuzzer uses one each). Prints the
# run's last line and stats, or the end of its log and where the inputs
# that failed are; exits non-zero when it found something.
#   fuzz-one.sh SRCDIR WORKDIR TARGET SECONDS INPUT_SECONDS [FLAGS...]
set -u
srcdir=$1 workdir=$2 t=$3 seconds=$4 input_seconds=$5
shift 5
# Largest input per target: see fuzz/Makefile.inc.
case $t in
fuzz_json|fuzz_safetensors) len=4096 ;;
fuzz_tar|fuzz_oms) len=16384 ;;
*) len=8192 ;;
esac
case $t in
fuzz_dsse) dict=$srcdir/fuzz/dsse.dict ;;
fuzz_tar) dict=$srcdir/fuzz/tar.dict ;;
fuzz_oms) dict=$srcdir/fuzz/oms.dict ;;
*) dict=$srcdir/fuzz/json.dict ;;
esac
work=$workdir/$t
rm -rf "$work" && mkdir -p "$work/corpus" "$work/crashes" || exit 1
cp "$srcdir/fuzz/corpus/$t/"* "$work/corpus/" || exit 1
chmod -R u+w "$work/corpus"
if ./fuzz/$t -max_total_time="$seconds" -timeout="$input_seconds" \
    -max_len=$len -dict="$dict" -artifact_prefix="$work/crashes/" -print_final_stats=1 \
    "$@" "$work/corpus" >"$work/log" 2>&1; then
	{
		echo "  FUZZ     $t for ${seconds}s (log: $work/log)"
		grep -E '^#[0-9]+.*DONE' "$work/log" | tail -n 1
		grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$work/log"
	} >"$work/summary"
	cat "$work/summary"
	exit 0
fi
{
	echo "  FUZZ     $t for ${seconds}s (log: $work/log)"
	tail -n 40 "$work/log"
	echo "  FAIL     $t: inputs in $work/crashes/"
} >"$work/summary"
cat "$work/summary"
exit 1
