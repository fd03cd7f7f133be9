#!/bin/bash
# Peak memory per worker, 200k systems graph, GCN-32 (../run.sh, 3 epochs): graph
# mode, then the pipeline at GCN-32's default C = 2 (R = 1) with G_l in buffers of
# its own (commit 45b5e8f, checked out at $1) and with G_l in lent slots (this
# checkout), ROUNDS rounds. Each record is committed as it comes (the caller).
# Usage: run_all.sh BEFORE_CHECKOUT ROUNDS
B=$1; A=$(pwd); R=bench/results/memory_200k; O=$R/lent_grads
for r in $(seq 1 "${2:-2}"); do
  bash $R/run.sh "$A" "$A/$O/graph_$r.json" --mode graph
  bash $R/run.sh "$B" "$A/$O/before_c2_$r.json" --mode pipeline --chunks 2 --snapshot-period 1
  bash $R/run.sh "$A" "$A/$O/after_c2_$r.json" --mode pipeline --chunks 2 --snapshot-period 1
done
