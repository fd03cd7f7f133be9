#!/bin/bash
# Peak memory per worker, 200k systems graph, GCN-32 (../run.sh, 3 epochs): graph
# mode and the pipeline at GCN-32's default C = 2 (R = 1) with the code before
# (commit 54e352c, checked out at $1: forward messages kept to the epoch's end, h0 rows
# copied per chunk, all five aggregation operators built) and with this checkout's,
# ROUNDS rounds. Each record is committed as it comes (the caller).
# Usage: run_all.sh BEFORE_CHECKOUT ROUNDS
B=$1; A=$(pwd); R=bench/results/memory_200k; O=$R/released_messages
for r in $(seq 1 "${2:-2}"); do
  echo "load before round $r: $(cat /proc/loadavg)"
  bash $R/run.sh "$B" "$A/$O/before_graph_$r.json" --mode graph
  bash $R/run.sh "$A" "$A/$O/after_graph_$r.json" --mode graph
  bash $R/run.sh "$B" "$A/$O/before_c2_$r.json" --mode pipeline --chunks 2 --snapshot-period 1
  bash $R/run.sh "$A" "$A/$O/after_c2_$r.json" --mode pipeline --chunks 2 --snapshot-period 1
done
