#!/bin/bash
# More same-run pairs at this checkout: graph mode, then the pipeline at GCN-32's
# default C = 2 (R = 1), ROUNDS times (../run.sh, 3 epochs). Usage: repeat.sh ROUNDS
A=$(pwd); R=bench/results/memory_200k
for r in $(seq 1 "${1:-2}"); do
  bash $R/run.sh "$A" "$A/$R/packed_masks/repeat_graph_$r.json" --mode graph
  bash $R/run.sh "$A" "$A/$R/packed_masks/repeat_c2_$r.json" --mode pipeline --chunks 2 --snapshot-period 1
done
