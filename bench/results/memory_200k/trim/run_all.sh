#!/bin/bash
# The host heap trimmed after each chunk compute (train.host_heap_trim, the default)
# against not (--no-host-heap-trim), same checkout, alternating, ROUNDS rounds:
# - the 200k systems graph, GCN-32 (../run.sh, 3 epochs): graph mode (round 1 only;
#   the trim does not apply to it), pipeline C = 8 and C = 2 (GCN-32's default), hybrid
#   at its default (W = 2, S = 1, C = 2), off then on;
# - the dense graphs, GCNII-32 hidden 100, pipeline S = 2, C = 8, 8 epochs, off then on.
# Usage: run_all.sh ROUNDS   (from the repository root; records land in this folder)
A=$(pwd); R=bench/results/memory_200k; O=$R/trim
for r in $(seq 1 "${1:-2}"); do
  echo "load $(cut -d' ' -f1-3 /proc/loadavg) round $r"
  [ "$r" = 1 ] && bash $R/run.sh "$A" "$A/$O/graph_$r.json" --mode graph
  for lay in "c8:--mode pipeline --chunks 8" "c2:--mode pipeline --chunks 2" "hybrid:--mode hybrid --ways 2"; do
    name=${lay%%:*}; args=${lay#*:}
    bash $R/run.sh "$A" "$A/$O/${name}_off_$r.json" $args --no-host-heap-trim
    bash $R/run.sh "$A" "$A/$O/${name}_on_$r.json" $args
  done
  for ds in blogcatalog amazon_photo; do
    for arm in off:--no-host-heap-trim on:--host-heap-trim; do
      (OMP_NUM_THREADS=1 /work/main/.venv/bin/python -m gnnpipe.train --dataset $ds \
        --data-root /work/shared/datasets --model gcnii --layers 32 --hidden 100 --epochs 8 --eval-every 8 \
        --workers 2 --mode pipeline --chunks 8 --log-level WARNING ${arm#*:} \
        --json-out "$A/$O/${ds}_${arm%%:*}_$r.json" 2>&1 | tail -1)
    done
  done
  echo "load $(cut -d' ' -f1-3 /proc/loadavg) end of round $r"
done
