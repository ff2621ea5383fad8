#!/bin/sh
# The Debian packages: build them with dpkg-buildpackage from a scratch
# copy of the tree (the source tree is never written to), check them with
# lintian (no errors allowed), unpack them into a scratch root with dpkg -x
# and check what they install: the daemon checks its installed
# configuration, the conffile, the systemd unit and the system account it
# runs as (sysusers.d, created in the scratch root with systemd-sysusers),
# the manual pages, the library (built against with pkg-config's flags),
# the alerting rules' unit tests, and the Python client and the
# participant commands run from the unpacked root. The build runs with a
# python3 that is not Debian's first on PATH.
#
#   tests/package/it_deb.sh                 runs as any user (no fakeroot needed)
#   VD_PKG_KEEP=1 tests/package/it_deb.sh   keep the scratch directory
#
# Needs the packages of scripts/install-deps (debhelper, dh-python,
# pybuild-plugin-pyproject, lintian and the build dependencies).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)

PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $*"; }
not_ok() { FAILED=$((FAILED + 1)); echo "not ok - $*"; }
# check DESCRIPTION COMMAND...: ok when the command succeeds.
check() {
	d=$1; shift
	if "$@"; then ok "$d"; else not_ok "$d"; fi
}
finish() {
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
	exit $?
}

for tool in dpkg-buildpackage dpkg-deb dh lintian gcc; do
	command -v "$tool" >/dev/null 2>&1 ||
		{ not_ok "$tool is installed (run scripts/install-deps)"; finish; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vd-deb.XXXXXX")
if [ "${VD_PKG_KEEP:-0}" = 1 ]; then
	echo "# scratch directory: $tmp"
else
	trap 'rm -rf "$tmp"' EXIT
	trap 'exit 130' INT TERM
fi
src=$tmp/src
root=$tmp/root
mkdir -p "$src" "$root"

# --- the version --------------------------------------------------------------
version=$(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' "$top/configure.ac")
debversion=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$top/debian/changelog")
check "debian/changelog ($debversion) packages configure.ac's version ($version)" \
	test -n "$version" -a "${debversion%-*}" = "$version"
arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# --- build dependencies -------------------------------------------------------
# Every package of scripts/install-deps's BUILD list but gcc and make (part
# of build-essential) is a build dependency.
build_list=$(sed -n '/^BUILD="/,/"$/p' "$top/scripts/install-deps" | tr -d '"' | sed 's/^BUILD=//')
bdeps=$(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$top/debian/control" | grep -v '^#' |
	sed 's/^Build-Depends://' | tr ',' '\n' | sed 's/^[[:space:]]*//; s/[( ].*//' | grep .)
missing=
for p in $build_list; do
	case $p in gcc|make) continue ;; esac
	echo "$bdeps" | grep -qx "$p" || missing="$missing $p"
done
check "debian/control Build-Depends lists scripts/install-deps's BUILD packages${missing:+ (missing:$missing)}" \
	test -z "$missing"

# --- build --------------------------------------------------------------------
# The files a clone would have: tracked and not-ignored new files (a tree
# without git: everything but build directories).
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$top" && git ls-files -co --exclude-standard |
		while IFS= read -r f; do [ -e "$f" ] && printf '%s\n' "$f"; done |
		tar -cf - --verbatim-files-from -T -) | tar -xf - -C "$src"
else
	tar -C "$top" --exclude=./.git --exclude='./_build*' --exclude=./fuzz-work \
		-cf - . | tar -xf - -C "$src"
fi
# A repository of its own, as in a clone, to see what the build leaves
# behind that git would show.
have_git=0
if command -v git >/dev/null 2>&1 && git -C "$src" init -q 2>/dev/null; then
	have_git=1
	git -C "$src" ls-files -o --exclude-standard | sort >"$tmp/files.before"
fi
# A clean environment (Debian's default compiler flags, no compiler chosen
# by the caller) but for a python3 first on PATH that is not Debian's, as
# pyenv's shims are: it must not be the one the build runs.
foreign=$tmp/foreign-python
mkdir -p "$foreign"
for py in python python3 $(py3versions -s 2>/dev/null); do
	printf '#!/bin/sh\necho "%s: not the system python3, called with: $*" >&2\nexit 1\n' \
		"$py" >"$foreign/$py"
	chmod 755 "$foreign/$py"
done
start=$(date +%s)
if (cd "$src" && env -i HOME="$tmp" PATH="$foreign:/usr/sbin:/usr/bin:/sbin:/bin" LC_ALL=C.UTF-8 \
	DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
	dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1; then
	ok "dpkg-buildpackage -us -uc -b ($(( $(date +%s) - start )) s)"
else
	not_ok "dpkg-buildpackage -us -uc -b; the end of its log:"
	tail -n 60 "$tmp/build.log" | sed 's/^/# /'
	finish
fi
if [ "$have_git" = 1 ]; then
	left=$(git -C "$src" ls-files -o --exclude-standard | sort | comm -13 "$tmp/files.before" -)
	check "the build leaves no file that git would show${left:+:$(echo $left)}" test -z "$left"
fi

deb_d=$tmp/lensemble-verifyd_${debversion}_${arch}.deb
deb_l=$tmp/liblensemble-verify0_${debversion}_${arch}.deb
deb_dev=$tmp/liblensemble-verify-dev_${debversion}_${arch}.deb
deb_py=$tmp/python3-lensemble-verify-client_${debversion}_all.deb
nodeb=0
for f in "$deb_d" "$deb_l" "$deb_dev" "$deb_py"; do
	if [ -f "$f" ]; then ok "built $(basename "$f")"; else not_ok "built $(basename "$f")"; nodeb=1; fi
done
[ "$nodeb" = 0 ] || { ls "$tmp" | sed 's/^/# /'; finish; }

# --- lintian ------------------------------------------------------------------
changes=$tmp/lensemble-verifyd_${debversion}_${arch}.changes
env -i HOME="$tmp" PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
	lintian --tag-display-limit 0 "$changes" >"$tmp/lintian.out" 2>"$tmp/lintian.err"
lrc=$?
sed 's/^/# /' "$tmp/lintian.out"
nerr=$(grep -c '^E: ' "$tmp/lintian.out")
nwarn=$(grep -c '^W: ' "$tmp/lintian.out")
if [ "$lrc" -eq 0 ] && [ "$nerr" -eq 0 ]; then
	ok "lintian: no errors ($nwarn warnings)"
else
	not_ok "lintian: $nerr errors, exit status $lrc"
	sed 's/^/# /' "$tmp/lintian.err"
fi

# --- the daemon package -------------------------------------------------------
for f in "$deb_d" "$deb_l" "$deb_dev" "$deb_py"; do
	dpkg-deb -x "$f" "$root" || not_ok "dpkg-deb -x $(basename "$f")"
done
conf=/etc/lensemble-verifyd/lensemble-verifyd.conf
daemon=$root/usr/sbin/lensemble-verifyd
cli=$root/usr/bin/lensemble-verify
export LD_LIBRARY_PATH="$root/usr/lib/$ma"

check "the daemon is /usr/sbin/lensemble-verifyd" test -x "$daemon"
check "the command-line tool is /usr/bin/lensemble-verify" test -x "$cli"
check "the configuration is $conf" test -f "$root$conf"
# -t looks at the state directory as the daemon's account would: a
# scratch one stands in for the installed one, and as root the account
# is nobody (--user is ignored otherwise).
state=$(mktemp -d "${TMPDIR:-/tmp}/vd-deb-state.XXXXXX")
[ "$(id -u)" = 0 ] && chown nobody "$state"
out=$("$daemon" -t -c "$root$conf" --state-dir "$state" --user nobody 2>&1)
rc=$?
rm -rf "$state"
check "lensemble-verifyd -t accepts the installed configuration" \
	sh -c 'test "$1" -eq 0 && echo "$2" | grep -q "configuration OK"' - "$rc" "$out"
check "the daemon's default configuration is $conf" \
	sh -c '"$1" -h 2>&1 | grep -qF "(default $2)"' - "$daemon" "$conf"

dpkg-deb -e "$deb_d" "$tmp/control-d"
check "$conf is a conffile" grep -qx "$conf" "$tmp/control-d/conffiles"

unit=$root/lib/systemd/system/lensemble-verifyd.service
check "the unit is /lib/systemd/system/lensemble-verifyd.service" test -f "$unit"
check "the unit starts /usr/sbin/lensemble-verifyd with $conf" \
	grep -qx "ExecStart=/usr/sbin/lensemble-verifyd -f -c $conf" "$unit"
check "the unit has no unsubstituted @placeholder@" sh -c '! grep -q "@[a-z_]*@" "$1"' - "$unit"
check "the unit keeps its state in StateDirectory=lensemble-verifyd" \
	grep -qx 'StateDirectory=lensemble-verifyd' "$unit"
check "postinst enables and starts the unit (dh_installsystemd)" \
	sh -c 'grep -q "deb-systemd-helper enable .lensemble-verifyd.service" "$1" &&
		grep -q "deb-systemd-invoke" "$1"' - "$tmp/control-d/postinst"

# --- the system account -------------------------------------------------------
# A static account from sysusers.d, not DynamicUser=: the operator gives it
# secrets (root:lensemble-verifyd 0640) and the store's group, and the state
# directory keeps one owner.
sysusers=usr/lib/sysusers.d/lensemble-verifyd.conf
check "the unit runs as User=lensemble-verifyd, Group=lensemble-verifyd" \
	sh -c 'grep -qx "User=lensemble-verifyd" "$1" && grep -qx "Group=lensemble-verifyd" "$1"' - "$unit"
check "the unit sets no DynamicUser=" sh -c '! grep -q "^DynamicUser=" "$1"' - "$unit"
dpkg-deb -c "$deb_d" >"$tmp/contents-d"
check "the package ships /$sysusers" grep -q " \./$sysusers\$" "$tmp/contents-d"
check "/$sysusers is systemd/lensemble-verifyd.sysusers, the package's only sysusers.d file" \
	sh -c 'cmp -s "$1/systemd/lensemble-verifyd.sysusers" "$2/$3" &&
		test "$(grep -c "/sysusers\.d/." "$4")" -eq 1' - "$top" "$root" "$sysusers" "$tmp/contents-d"
pi=$tmp/control-d/postinst
check "postinst runs systemd-sysusers for lensemble-verifyd.conf (dh_installsysusers)" \
	grep -q '^ *systemd-sysusers .*lensemble-verifyd\.conf$' "$pi"
# The account must exist before the unit is enabled and started.
n_sysusers=$(grep -n 'systemd-sysusers ' "$pi" | head -n 1 | cut -d: -f1)
n_unit=$(grep -n 'deb-systemd-' "$pi" | head -n 1 | cut -d: -f1)
check "postinst creates the account before it enables and starts the unit" \
	test "${n_sysusers:-0}" -gt 0 -a "${n_unit:-0}" -gt "${n_sysusers:-0}"
check "the package depends on a systemd-sysusers provider" \
	sh -c 'dpkg-deb -f "$1" Depends | grep -q "systemd-sysusers"' - "$deb_d"
if command -v systemd-sysusers >/dev/null 2>&1; then
	# In the unpacked root: first with the file's path, then as the
	# postinst calls it (--root and the file's name, looked up in the
	# root's sysusers.d), which must find the account and add nothing.
	for f in passwd group shadow gshadow; do : >"$root/etc/$f"; done
	out=$(systemd-sysusers --root="$root" "$root/$sysusers" 2>&1)
	rc=$?
	pw=$(grep '^lensemble-verifyd:' "$root/etc/passwd")
	uid=$(echo "$pw" | cut -d: -f3)
	gid=$(echo "$pw" | cut -d: -f4)
	[ "$rc" -eq 0 ] || echo "$out" | sed 's/^/# /'
	check "systemd-sysusers creates the account in the scratch root's /etc/passwd (status $rc)" \
		sh -c 'test "$1" -eq 0 && echo "$2" |
			grep -qx "lensemble-verifyd:x:[0-9]*:[0-9]*:Lensemble model-artifact verifier:/var/lib/lensemble-verifyd:/usr/sbin/nologin"' \
			- "$rc" "$pw"
	check "the account has a system UID (${uid:-none})" test "${uid:-1000}" -lt 1000 -a "${uid:-0}" -gt 0
	check "the account's group lensemble-verifyd is in the scratch root's /etc/group (GID ${gid:-none})" \
		grep -q "^lensemble-verifyd:x:${gid:-none}:" "$root/etc/group"
	check "the account has no password in the scratch root's /etc/shadow" \
		grep -q '^lensemble-verifyd:!' "$root/etc/shadow"
	systemd-sysusers --root="$root" lensemble-verifyd.conf >/dev/null 2>&1
	rc=$?
	check "running the postinst's systemd-sysusers again succeeds and adds nothing (status $rc)" \
		test "$rc" -eq 0 -a "$(grep -c '^lensemble-verifyd:' "$root/etc/passwd")" -eq 1 -a \
			"$(grep -c '^lensemble-verifyd:' "$root/etc/group")" -eq 1
else
	not_ok "systemd-sysusers is installed (Debian package: systemd)"
fi

for m in man1/lensemble-verify.1 man5/lensemble-verifyd.conf.5 man8/lensemble-verifyd.8; do
	check "manual page /usr/share/man/$m.gz" test -f "$root/usr/share/man/$m.gz"
done
check "the manual pages name the configuration at $conf" \
	sh -c '! zgrep -q "/etc/lensemble\\\\-verifyd\\.conf" "$1"/usr/share/man/man5/*.gz "$1"/usr/share/man/man8/*.gz' - "$root"

doc=$root/usr/share/doc/lensemble-verifyd
missing=
for f in "$top"/README.md "$top"/docs/*.md; do
	b=$(basename "$f")
	[ -f "$doc/$b" ] || [ -f "$doc/$b.gz" ] || missing="$missing $b"
done
check "README.md and docs/*.md are in /usr/share/doc/lensemble-verifyd${missing:+ (missing:$missing)}" \
	test -z "$missing"

# The alerting rules' unit tests, beside the rules they test, uncompressed.
check "alerts.yml and alerts-test.yml are in $doc, uncompressed" \
	test -f "$doc/alerts.yml" -a -f "$doc/alerts-test.yml"
if command -v promtool >/dev/null 2>&1; then
	out=$(cd "$tmp" && promtool test rules "$doc/alerts-test.yml" 2>&1)
	rc=$?
	[ "$rc" -eq 0 ] || echo "$out" | tail -n 20 | sed 's/^/# /'
	check "promtool test rules passes on the installed alerts-test.yml" test "$rc" -eq 0
else
	echo "# promtool is not installed (Debian package: prometheus): the installed rules are not run"
fi

# The installed tool on the reference cases: one verifies, one is tampered.
good=$top/tests/data/golden-cases/round-00001
bad=$top/tests/data/golden-cases/tamper-weight-byte
check "lensemble-verify -V says $version" sh -c '"$1" -V | grep -qx "lensemble-verify $2"' - "$cli" "$version"
hash=$("$cli" --json "$good" | sed -n 's/.*"content_hash":"\([0-9a-f]*\)".*/\1/p')
check "the installed lensemble-verify verifies a reference artifact" test -n "$hash"
check "the installed lensemble-verify rejects a tampered artifact" \
	sh -c '"$1" -q "$2"; test $? -eq 1' - "$cli" "$bad"

# --- the library --------------------------------------------------------------
lib=$root/usr/lib/$ma/liblensemble-verify.so.0
check "liblensemble-verify0 ships the SONAME liblensemble-verify.so.0" \
	sh -c 'objdump -p "$1" | grep -q "SONAME *liblensemble-verify.so.0$"' - "$lib"
cat >"$tmp/uselib.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <lensemble/verify.h>
int main(int argc, char **argv)
{
	vd_verdict v;
	(void)argc;
	vd_verify_artifact(argv[1], NULL, &v);
	printf("%s %s\n", vd_code_name(v.code), v.content_hash);
	return v.code == VD_OK ? 0 : 1;
}
EOF
# pkg-config names the flags: as installed (prefix /usr), then with the
# prefix moved to the scratch root to build with them.
pc=$root/usr/lib/$ma/pkgconfig/lensemble-verify.pc
check "liblensemble-verify-dev ships /usr/lib/$ma/pkgconfig/lensemble-verify.pc" test -f "$pc"
pcflags=$(PKG_CONFIG_PATH="$root/usr/lib/$ma/pkgconfig" pkg-config --cflags --libs lensemble-verify 2>&1)
rc=$?
check "pkg-config --cflags --libs lensemble-verify: $pcflags" \
	sh -c 'test "$1" -eq 0 && echo "$2" | grep -q -- "-llensemble-verify"' - "$rc" "$pcflags"
check "pkg-config --modversion lensemble-verify says $version" \
	test "$(PKG_CONFIG_PATH="$root/usr/lib/$ma/pkgconfig" pkg-config --modversion lensemble-verify)" = "$version"
pcflags=$(PKG_CONFIG_PATH="$root/usr/lib/$ma/pkgconfig" \
	pkg-config --define-variable=prefix="$root/usr" --cflags --libs lensemble-verify)
if gcc -std=c11 -o "$tmp/uselib" "$tmp/uselib.c" $pcflags 2>"$tmp/uselib.err"; then
	check "a program built against liblensemble-verify-dev gets the same hash" \
		sh -c 'test "$("$1" "$2")" = "ok $3"' - "$tmp/uselib" "$good" "$hash"
else
	not_ok "a program builds against liblensemble-verify-dev with pkg-config's flags ($pcflags)"
	sed 's/^/# /' "$tmp/uselib.err"
fi

# --- the Python client --------------------------------------------------------
site=$root/usr/lib/python3/dist-packages
py() { (cd "$tmp" && env -i PATH=/usr/bin:/bin PYTHONPATH="$site" /usr/bin/python3 "$@"); }
check "python3 imports lensemble_verify_client from the package" \
	py -c 'import sys, lensemble_verify_client as c; sys.exit(not c.__file__.startswith(sys.argv[1]))' "$site"
check "its metadata says version $version" \
	py -c 'import sys, importlib.metadata as m; sys.exit(m.version("lensemble-verify-client") != sys.argv[1])' "$version"
check "the installed client hashes a reference artifact as the C tool does" \
	py -c 'import sys, lensemble_verify_client as c
sys.exit(c.load_verified(sys.argv[1], framework=None).content_hash != sys.argv[2])' "$good" "$hash"

# --- the participant commands --------------------------------------------------
# The scripts of docs/participant, as commands of the client's package.
dpkg-deb -c "$deb_py" >"$tmp/contents-py"
for c in lensemble-check lensemble-wait-for-head; do
	check "python3-lensemble-verify-client ships /usr/bin/$c" grep -q " \./usr/bin/$c\$" "$tmp/contents-py"
	check "$c runs the system python3" \
		sh -c 'head -n 1 "$1" | grep -Eq "^#! ?/usr/bin/python3$"' - "$root/usr/bin/$c"
	out=$(cd "$tmp" && env -i PATH=/usr/bin:/bin "$root/usr/bin/$c" --help 2>&1)
	rc=$?
	check "$c --help works (status $rc)" \
		sh -c 'test "$1" -eq 0 && echo "$2" | grep -q "^usage: $3 "' - "$rc" "$out" "$c"
	check "manual page /usr/share/man/man1/$c.1.gz" test -f "$root/usr/share/man/man1/$c.1.gz"
done
out=$(cd "$tmp" && env -i PATH=/usr/bin:/bin "$root/usr/bin/lensemble-check" \
	http://127.0.0.1:1 "$hash" 2>&1)
rc=$?
check "lensemble-check against no daemon: exit 4, no answer (status $rc)" \
	sh -c 'test "$1" -eq 4 && echo "$2" | grep -q "NO ANSWER"' - "$rc" "$out"

finish
