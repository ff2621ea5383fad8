#!/bin/sh
# make check: every deliberate bug of tests/sim/mutations/ still applies to
# src/ (make sim-mutations shows that the simulators catch each).
: "${top_srcdir:?run through make check}"
exec sh "$top_srcdir/tests/sim/mutate.sh" --check
