#!/bin/sh
# Proof that the simulators bite: each patch in tests/sim/mutations/ puts a
# deliberate bug of a few lines into src/, and the simulator its first line
# names ("sim: vd-simwait"; vd-sim when it names none) must report it.
#   tests/sim/mutate.sh [--check] [SEEDS [NAME...]]
# --check only checks that every patch still applies to src/ (make check
# runs that); without it, each patch is applied in a scratch copy of the
# tree, built there, and its simulator --seeds SEEDS (default 2000) must fail
# within a minute. NAMEs (a patch's file name without .patch) run those
# patches only. Exits non-zero when a patch does not apply or a bug goes
# unnoticed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
check=0
[ "${1:-}" = --check ] && { check=1; shift; }
seeds=${1:-2000}
[ $# -gt 0 ] && shift
failed=0
patches=
for name in "$@"; do
	[ -f "$top/tests/sim/mutations/$name.patch" ] || { echo "no such patch: $name"; exit 2; }
	patches="$patches $top/tests/sim/mutations/$name.patch"
done
[ -n "$patches" ] || patches=$(ls "$top"/tests/sim/mutations/*.patch)

if [ "$check" = 1 ]; then
	for p in "$top"/tests/sim/mutations/*.patch; do
		if patch -s -p1 --dry-run -d "$top" < "$p" > /dev/null 2>&1; then
			echo "ok - $(basename "$p") applies"
		else
			echo "not ok - $(basename "$p") no longer applies to src/: make it again"
			failed=$((failed + 1))
		fi
	done
	n=$(ls "$top"/tests/sim/mutations/*.patch | wc -l)
	echo "$((n - failed)) passed, $failed failed"
	[ "$failed" = 0 ]
	exit
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/vd-mutate.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# The tree as it is (its working copy), built once; each bug rebuilds little.
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
	xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$scratch"
"$scratch/scripts/build" "$scratch/_build" > "$scratch/build.log" 2>&1 ||
	{ echo "the scratch tree does not build:"; tail -20 "$scratch/build.log"; exit 2; }
for p in $patches; do
	name=$(basename "$p" .patch)
	sim=$(sed -n '1s/^sim: *\([a-z-]*\).*/\1/p' "$p")
	sim=${sim:-vd-sim}
	patch -s -p1 -d "$scratch" < "$p" || { echo "not ok - $name does not apply"; failed=$((failed + 1)); continue; }
	if ! make -C "$scratch/_build" "tests/sim/$sim" > "$scratch/make.log" 2>&1; then
		echo "not ok - $name does not build"; tail -5 "$scratch/make.log"; failed=$((failed + 1))
	elif timeout 60 "$scratch/_build/tests/sim/$sim" --seeds "$seeds" > "$scratch/sim.out" 2>&1; then
		echo "not ok - $name: $sim --seeds $seeds saw nothing wrong"; failed=$((failed + 1))
	else
		echo "ok - $name: $(grep -m1 'invariant violated' "$scratch/sim.out" | cut -c1-160)"
	fi
	patch -s -R -p1 -d "$scratch" < "$p"
done
echo "$(( $(echo $patches | wc -w) - failed )) passed, $failed failed"
[ "$failed" = 0 ]
