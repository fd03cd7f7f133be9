#!/usr/bin/env bash
# The pipeline (S = 2, C = 8, the default R = 23, GCN-32 hidden 100) on the 200k
# synthetic graph with the code of BEFORE and AFTER, alternating, N rounds.
# Usage: BEFORE=<checkout> AFTER=<checkout> ./run.sh 2
set -euo pipefail
rounds=${1:-2}
py=${PYTHON:-/work/main/.venv/bin/python}
out=$(cd "$(dirname "$0")" && pwd)
for r in $(seq 1 "$rounds"); do
  arms="before after"; [ $(( r % 2 )) = 0 ] && arms="after before"
  for arm in $arms; do
    code=$BEFORE; [ "$arm" = after ] && code=$AFTER
    echo "round $r $arm: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)"
    (cd "$code" && OMP_NUM_THREADS=1 "$py" -m gnnpipe.train --dataset synthetic --model gcn --layers 32 --hidden 100 \
      --epochs 4 --eval-every 4 --log-level WARNING --json-out "$out/pipeline_${arm}_$r.json" --mode pipeline \
      --workers 2 --chunks 8 --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 \
      --data-option feature_signal=0.22 --data-option seed=0 | tail -1)
  done
done
echo "done: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)"
