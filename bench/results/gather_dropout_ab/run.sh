#!/bin/bash
# Alternating A/B of bench.compute_split: a stage applying its layers' input dropout
# as a second tensor (commit b9382f5, checked out at $BEFORE) against applying it in
# place in the gather (this checkout), S = 2, C = 8, the four default cases.
# Usage: bench/results/gather_dropout_ab/run.sh BEFORE_CHECKOUT ROUNDS [FIRST_ROUND]
set -e
BEFORE=$1; ROUNDS=${2:-2}; FIRST=${3:-1}
OUT=bench/results/gather_dropout_ab
for r in $(seq "$FIRST" "$ROUNDS"); do
  python -m bench.compute_split --data-root "${GNNPIPE_DATASETS:-../shared/datasets}" --checkout "$BEFORE" --out $OUT/before_$r.json
  python -m bench.compute_split --data-root "${GNNPIPE_DATASETS:-../shared/datasets}" --out $OUT/after_$r.json
done
