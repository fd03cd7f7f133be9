#!/bin/bash
# A/B of two checkouts on the CPU: GCNII-32 hidden 100, pipeline S = 2, C = 8, 8 epochs,
# one thread per worker, alternating before/after, N rounds. BEFORE/AFTER: checkouts of
# the two commits (gnnpipe.data and gnnpipe.partition are the installed ones); OUT: where
# the records go (default: this folder). Here: affdb4b against 820da04 (halo_blocks is an
# addition the old code does not call); ../stage_start_ab/ ran it with OUT set.
set -u
N=${1:-3}
BEFORE=${BEFORE:-/work/dev}; AFTER=${AFTER:-/work/dev2}
PY=${PY:-/work/main/.venv/bin/python}
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
export OMP_NUM_THREADS=1
for r in $(seq 1 "$N"); do
  for ds in blogcatalog amazon_photo; do
    for arm in before after; do
      dir=$BEFORE; [ $arm = after ] && dir=$AFTER
      echo "$(date -u +%H:%M:%S) round $r $ds $arm load $(cut -d' ' -f1-3 /proc/loadavg)"
      (cd "$dir" && $PY -m gnnpipe.train --dataset $ds --data-root /work/shared/datasets --model gcnii \
        --layers 32 --hidden 100 --input-proj --classifier --dropout 0.5 --lr 0.001 --epochs 8 \
        --eval-every 8 --seed 0 --mode pipeline --workers 2 --chunks 8 --log-level WARNING \
        --json-out "$OUT/${ds}_${arm}_$r.json")
    done
  done
done
