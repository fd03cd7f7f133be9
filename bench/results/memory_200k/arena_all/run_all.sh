#!/bin/bash
# Saved tensors of 4 KiB and more in the stage's arena (this checkout) against those of
# 1 MiB and more (the checkout at $1), one after the other, ROUNDS rounds:
# - the 200k systems graph, GCN-32 (../run.sh, 3 epochs): graph mode (round 1 only),
#   the pipeline at C = 8, R = 1, before and after;
# - the dense graphs, GCNII-32 hidden 100, pipeline S = 2, C = 8, 8 epochs, before and
#   after, alternating.
# Usage: run_all.sh BEFORE_CHECKOUT ROUNDS   (records land in this folder)
B=$1; A=$(pwd); R=bench/results/memory_200k; O=$R/arena_all
for r in $(seq 1 "${2:-2}"); do
  echo "load $(cut -d' ' -f1-3 /proc/loadavg) round $r"
  [ "$r" = 1 ] && bash $R/run.sh "$A" "$A/$O/graph_$r.json" --mode graph
  bash $R/run.sh "$B" "$A/$O/before_c8_$r.json" --mode pipeline --chunks 8 --snapshot-period 1
  bash $R/run.sh "$A" "$A/$O/after_c8_$r.json" --mode pipeline --chunks 8 --snapshot-period 1
  for ds in blogcatalog amazon_photo; do
    for arm in before:$B after:$A; do
      name=${arm%%:*}; dir=${arm#*:}
      (cd "$dir" && OMP_NUM_THREADS=1 /work/main/.venv/bin/python -m gnnpipe.train --dataset $ds \
        --data-root /work/shared/datasets --model gcnii --layers 32 --hidden 100 --epochs 8 --eval-every 8 \
        --workers 2 --mode pipeline --chunks 8 --log-level WARNING \
        --json-out "$A/$O/${ds}_${name}_$r.json" 2>&1 | tail -1)
    done
  done
  echo "load $(cut -d' ' -f1-3 /proc/loadavg) end of round $r"
done
