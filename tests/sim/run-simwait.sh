#!/bin/sh
# The simulator's tier of make check for clients waiting for verdicts and
# the verification schedule: VD_SIM_SEEDS histories (10,000 by default),
# each checked after every step (tests/sim/vd-simwait.c).
: "${top_builddir:?run through make check}"
exec "$top_builddir/tests/sim/vd-simwait" --seeds "${VD_SIM_SEEDS:-10000}"
