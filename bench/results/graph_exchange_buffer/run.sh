#!/usr/bin/env bash
# Graph mode on the 200k systems graph, GCN-32 hidden 100, 2 workers with one thread each,
# 4 epochs: the code before (a fresh layer input per exchange) and after (the exchanger's
# kept buffer), alternating, ROUNDS rounds. BEFORE / AFTER: checkouts of the two codes.
# Usage: BEFORE=/work/dev AFTER=/work/dev2 OUT=bench/results/graph_exchange_buffer [FIRST=3] ./run.sh 5
# (rounds FIRST..N; odd rounds run before first, even ones after first)
set -euo pipefail
first=${FIRST:-1}
rounds=${1:-2}
py=${PYTHON:-python}
out=$(realpath "$OUT")
for r in $(seq "$first" "$rounds"); do
  for arm in before after; do
    [ $(( r % 2 )) = 0 ] && arm=$([ "$arm" = before ] && echo after || echo before)
    dir=$([ "$arm" = before ] && echo "$BEFORE" || echo "$AFTER")
    echo "round $r $arm: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)"
    (cd "$dir" && OMP_NUM_THREADS=1 "$py" -m gnnpipe.train --dataset synthetic --model gcn --layers 32 --hidden 100 \
      --epochs 4 --eval-every 4 --log-level WARNING --json-out "$out/${arm}_$r.json" --mode graph --workers 2 \
      --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 \
      --data-option feature_signal=0.22 --data-option seed=0 | tail -1)
  done
done
echo "done: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)"
