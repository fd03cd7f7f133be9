#!/bin/bash
# Alternating A/B of bench.compute_split: 8-bit mask lanes (commit 81ac18b, checked out
# at $BEFORE) against 1-bit lanes (this checkout), S = 2, C = 8, the four default cases.
# Usage: bench/results/mask_bits_ab/run.sh BEFORE_CHECKOUT ROUNDS
set -e
BEFORE=$1; ROUNDS=${2:-2}
OUT=bench/results/mask_bits_ab
for r in $(seq 1 "$ROUNDS"); do
  python -m bench.compute_split --data-root "${GNNPIPE_DATASETS:-../shared/datasets}" --checkout "$BEFORE" --out $OUT/before_$r.json
  python -m bench.compute_split --data-root "${GNNPIPE_DATASETS:-../shared/datasets}" --out $OUT/after_$r.json
done
