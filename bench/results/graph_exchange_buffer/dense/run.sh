#!/usr/bin/env bash
# Graph mode on the dense graphs before / after the kept buffer: GCNII-32 hidden 100,
# 8 epochs (evaluation at the last only), 2 workers with one thread each, alternating
# (odd rounds before first), rounds 1..N. BEFORE / AFTER: checkouts of the two codes.
# Usage: BEFORE=/work/dev2 AFTER=/work/dev ./run.sh 3 [DATASETS]
set -euo pipefail
O=$(realpath "$(dirname "$0")"); R=${1:-3}; DS=${2:-blogcatalog amazon_photo}
py=${PYTHON:-python}
for r in $(seq 1 "$R"); do
  for ds in $DS; do
    arms="before after"; [ $(( r % 2 )) = 0 ] && arms="after before"
    for arm in $arms; do
      dir=$([ "$arm" = before ] && echo "$BEFORE" || echo "$AFTER")
      echo "load $(cut -d' ' -f1-3 /proc/loadavg) $ds $arm round $r at $(date -u +%H:%M:%S)"
      (cd "$dir" && OMP_NUM_THREADS=1 "$py" -m gnnpipe.train --dataset "$ds" --data-root /work/shared/datasets \
        --model gcnii --layers 32 --hidden 100 --epochs 8 --eval-every 8 --mode graph --workers 2 \
        --log-level WARNING --json-out "$O/${ds}_${arm}_$r.json" 2>&1 | tail -1)
    done
  done
done
echo "done: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)"
