#!/usr/bin/env bash
# The pipeline (S = 2, C = 8, GCN-32's default R = 1) beside graph mode with the kept buffer,
# same graph and model as run.sh, alternating, rounds FIRST..N, one checkout (CODE).
# Usage: CODE=/work/dev2 OUT=bench/results/graph_exchange_buffer ./run_modes.sh 2
set -euo pipefail
first=${FIRST:-1}
rounds=${1:-2}
py=${PYTHON:-python}
out=$(realpath "$OUT")
for r in $(seq "$first" "$rounds"); do
  modes="pipeline graph"; [ $(( r % 2 )) = 0 ] && modes="graph pipeline"
  for mode in $modes; do
    extra=(); [ "$mode" = pipeline ] && extra=(--chunks 8)
    echo "round $r $mode: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)"
    (cd "$CODE" && OMP_NUM_THREADS=1 "$py" -m gnnpipe.train --dataset synthetic --model gcn --layers 32 --hidden 100 \
      --epochs 4 --eval-every 4 --log-level WARNING --json-out "$out/modes_${mode}_$r.json" --mode "$mode" --workers 2 \
      "${extra[@]}" --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 \
      --data-option feature_signal=0.22 --data-option seed=0 | tail -1)
  done
done
echo "done: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)"
