#!/bin/bash
# Dense graphs, GCNII-32 hidden 100, 8 epochs (evaluation at the last only), 2 workers,
# one thread each: graph mode and the pipeline (S = 2, C = 8) with glibc's heap
# thresholds and with --host-heap-mib 256, alternating, ROUNDS rounds; records in this
# folder. Usage: run.sh ROUNDS [DATASETS]
O=$(dirname "$0"); R=${1:-3}; DS=${2:-blogcatalog amazon_photo}
for r in $(seq 1 "$R"); do
  for ds in $DS; do
    for mode in "graph:--mode graph" "pipeline:--mode pipeline --chunks 8"; do
      name=${mode%%:*}; args=${mode#*:}
      for heap in 0 256; do
        /work/main/.venv/bin/python -m gnnpipe.train --dataset $ds --data-root /work/shared/datasets \
          --model gcnii --layers 32 --hidden 100 --epochs 8 --eval-every 8 --workers 2 --log-level WARNING \
          --host-heap-mib $heap --json-out "$O/${ds}_${name}_heap${heap}_$r.json" $args 2>&1 | tail -1
        echo "load $(cut -d' ' -f1-3 /proc/loadavg) $ds $name heap=$heap round $r"
      done
    done
  done
done
