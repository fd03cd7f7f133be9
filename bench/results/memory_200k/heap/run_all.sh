#!/bin/bash
# glibc's defaults against a heap that serves host allocations up to 256 MiB and keeps
# what is freed (MALLOC_MMAP_THRESHOLD_=256 MiB, MALLOC_TRIM_THRESHOLD_=4 GiB, in the
# environment of the launcher and so of its workers), 200k systems graph, GCN-32, 5
# epochs, this checkout, alternating arms per layout. Usage: run_all.sh
A=$(pwd); R=bench/results/memory_200k
for layout in "graph:--mode graph" "c8:--mode pipeline --chunks 8 --snapshot-period 1"; do
  name=${layout%%:*}; args=${layout#*:}
  bash $R/run.sh "$A" "$A/$R/heap/default_$name.json" $args --epochs 5 --eval-every 5
  MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=4294967296 \
    bash $R/run.sh "$A" "$A/$R/heap/heap_$name.json" $args --epochs 5 --eval-every 5
done
