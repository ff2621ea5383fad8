#!/bin/sh
# The layers of src/ as their quoted includes say them: the library
# (src/lib) sees only itself and include/; the core (src/core) nothing of
# the shell (src/daemon) or the programs (src/bin); and no two modules (a
# .c with its .h) include each other, directly or round a circle.
#   tests/layering.sh [TOP]
# Prints every violation and every circle of modules; exits 1 if any.
set -u
top=${1:-${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}}
cd "$top" || exit 2
failed=0

# Where a quoted include of a file in dir resolves, as the compiler looks:
# the file's own folder, then the -I folders in Makefile.am's order.
resolve() {
	for d in "$1" include src/lib src/core src/daemon src/bin; do
		if [ -f "$d/$2" ]; then
			echo "$d/$2"
			return
		fi
	done
	echo "?/$2"
}

# "file included" for every quoted include of src/ (config.h is configure's).
edges=$(mktemp) || exit 2
trap 'rm -f "$edges"' EXIT
for f in src/*/*.c src/*/*.h; do
	[ -f "$f" ] || continue
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
	while read -r h; do
		[ "$h" = config.h ] && continue
		echo "$f $(resolve "$(dirname "$f")" "$h")"
	done
done > "$edges"

while read -r f h; do
	case "$f:$h" in
	src/lib/*:src/lib/* | src/lib/*:include/*) ;;
	src/lib/*:*)
		echo "not ok - $f includes $h: the library sees only src/lib and include/"
		failed=1 ;;
	src/core/*:src/daemon/* | src/core/*:src/bin/*)
		echo "not ok - $f includes $h: the core includes nothing of the shell or the programs"
		failed=1 ;;
	esac
done < "$edges"

# The module graph (vd_NAME.c and vd_NAME.h are the module vd_NAME), its
# circles found as strongly connected components (Tarjan).
cycles=$(awk '
function mod(p) { sub(/.*\//, "", p); sub(/\.[ch]$/, "", p); return p }
function visit(v,    i, w) {
	index_of[v] = low[v] = ++counter
	stack[++sp] = v
	on[v] = 1
	for (i = 1; i <= nout[v]; i++) {
		w = out[v, i]
		if (!(w in index_of)) {
			visit(w)
			if (low[w] < low[v])
				low[v] = low[w]
		} else if (on[w] && index_of[w] < low[v]) {
			low[v] = index_of[w]
		}
	}
	if (low[v] == index_of[v]) {
		comp = ""
		n = 0
		do {
			w = stack[sp--]
			on[w] = 0
			comp = w (n++ ? " " : "") comp
		} while (w != v)
		if (n > 1)
			print comp
	}
}
{
	a = mod($1); b = mod($2)
	if (a !~ /^vd_/ || b !~ /^vd_/ || a == b || seen[a, b]++)
		next
	out[a, ++nout[a]] = b
	node[a] = node[b] = 1
}
END {
	for (v in node)
		if (!(v in index_of))
			visit(v)
}' "$edges")
if [ -n "$cycles" ]; then
	echo "$cycles" | while read -r c; do
		echo "not ok - modules that include each other round a circle: $c"
	done
	failed=1
fi

# The README's layout table names every file of src/ (a module by its .c),
# so that a newcomer finds each one.
layout=$(sed -n '/^## Layout/,$p' "$top/README.md")
for f in $(cd "$top/src" && find . -type f \( -name '*.c' -o -name '*.h' \) | sort); do
	name=${f##*/}
	case $layout in
	*"\`$name\`"* | *"\`${name%.h}.c\`"*) ;;   # a header goes with its .c
	*) echo "not ok - README.md's Layout table does not name src/${f#./}"; failed=1 ;;
	esac
done

[ "$failed" = 0 ] && echo "ok - src/ keeps its layers, no modules include each other, and the README names every file"
exit "$failed"
