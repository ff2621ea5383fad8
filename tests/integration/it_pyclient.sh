#!/bin/sh
# The Python participant client (clients/python): its unittest suite under
# the system Python, which checks it against the golden cases, against the
# C verifier built here (lensemble-verify --json, case for case), against
# a stub daemon, against the daemon built here (its OMS bundles), with
# NumPy and PyTorch, and without any optional package. One "ok"/"not ok"
# line per test, then the counts.
: "${top_srcdir:?run through make check}"
: "${top_builddir:?run through make check}"

PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
	echo "SKIP: $PY is not installed"
	exit 77
fi

# The source tree may be read-only (make distcheck): no bytecode there.
PYTHONDONTWRITEBYTECODE=1
PYTHONPATH="$top_srcdir/clients/python"
LVC_DATA="$top_srcdir/tests/data"
LVC_CLI="$top_builddir/lensemble-verify"
LVC_DAEMON="$top_builddir/lensemble-verifyd"
# Here the C verifier and the daemon must be there: a missing one fails,
# not skips; and so must NumPy and PyTorch (python3-numpy, python3-torch:
# scripts/install-deps), whose paths the participants use. Their absence is tested in a child.
LVC_REQUIRE_CLI=1
LVC_REQUIRE_FRAMEWORKS=1
export PYTHONDONTWRITEBYTECODE PYTHONPATH LVC_DATA LVC_CLI LVC_DAEMON LVC_REQUIRE_CLI LVC_REQUIRE_FRAMEWORKS

out=$(mktemp "${TMPDIR:-/tmp}/it_pyclient.XXXXXX") || exit 99
trap 'rm -f "$out"' EXIT
"$PY" "$top_srcdir/clients/python/tests/run.py" > "$out" 2>&1
rc=$?
cat "$out"
# run.py ends with "N passed, N failed"; without that line it crashed.
if ! tail -n 1 "$out" | grep -Eq '^[0-9]+ passed, [0-9]+ failed$'; then
	echo "not ok - the test runner did not finish (exit $rc)"
	echo "0 passed, 1 failed"
	[ "$rc" = 0 ] && rc=1
fi
exit "$rc"
