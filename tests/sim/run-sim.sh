#!/bin/sh
# The simulator's tier of make check: VD_SIM_SEEDS histories (10,000 by
# default) of the commitments and lineage core, each checked after every
# step (tests/sim/vd-sim.c).
: "${top_builddir:?run through make check}"
exec "$top_builddir/tests/sim/vd-sim" --seeds "${VD_SIM_SEEDS:-10000}" --steps "${VD_SIM_STEPS:-60}"
