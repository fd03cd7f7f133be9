#!/bin/bash
# The same five-epoch runs through the trainer's own option (--host-heap-mib 256:
# mallopt in each worker, trim threshold 2 GiB) instead of glibc's variables.
A=$(pwd); R=bench/results/memory_200k
bash $R/run.sh "$A" "$A/$R/heap/option_graph.json" --mode graph --epochs 5 --eval-every 5 --host-heap-mib 256
bash $R/run.sh "$A" "$A/$R/heap/option_c8.json" --mode pipeline --chunks 8 --snapshot-period 1 --epochs 5 --eval-every 5 --host-heap-mib 256
