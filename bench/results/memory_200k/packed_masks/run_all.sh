#!/bin/bash
# Peak memory per worker, 200k systems graph, GCN-32: dropout masks saved as bool
# (commit 89f110c, checked out at $1) against their random words (this checkout),
# one run each, alternating arms per layout. Usage: run_all.sh BEFORE_CHECKOUT
B=$1; A=$(pwd); R=bench/results/memory_200k
for layout in "graph:--mode graph" "c8:--mode pipeline --chunks 8 --snapshot-period 1" "c2:--mode pipeline --chunks 2 --snapshot-period 1"; do
  name=${layout%%:*}; args=${layout#*:}
  bash $R/run.sh "$B" "$A/$R/packed_masks/before_$name.json" $args
  bash $R/run.sh "$A" "$A/$R/packed_masks/after_$name.json" $args
done
