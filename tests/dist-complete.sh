#!/bin/sh
# Every file the repository tracks is in the release tarball, but for those
# that only serve the repository itself: the Debian packaging, benchmarks,
# the scripts that install, build and test a checkout, CI's entry point and
# dot files. Run by "make distcheck" on the unpacked tarball; a tree that is
# not a git checkout (a tarball's own distcheck) has nothing to compare.
#   dist-complete.sh SRCDIR DISTDIR
set -eu
src=$1
dist=$2
if ! command -v git >/dev/null 2>&1 || ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	echo "dist-complete: $src is not a git checkout: nothing to compare"
	exit 0
fi
missing=$(git -C "$src" ls-files | grep -Ev '^(debian/|bench/|scripts/|tests/package/|\.ci/)|(^|/)\.[^/]*$' |
	while IFS= read -r f; do [ -e "$dist/$f" ] || echo "$f"; done)
if [ -n "$missing" ]; then
	echo "dist-complete: tracked files missing from the tarball (add them to EXTRA_DIST):" >&2
	echo "$missing" | sed 's/^/  /' >&2
	exit 1
fi
echo "dist-complete: every tracked file is in the tarball"
