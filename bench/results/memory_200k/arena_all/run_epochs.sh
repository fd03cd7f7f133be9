#!/bin/bash
# The 200k GCN-32 pipeline at C = 8, R = 1 over 5 epochs: the checkout at $1 (1 MiB
# threshold), this checkout (4 KiB), and this checkout with --host-heap-mib 32 (glibc's
# mmap threshold fixed at 32 MiB, the largest its own adjustment reaches, and the heap's
# free top kept up to 2 GiB), one after the other. Usage: run_epochs.sh BEFORE_CHECKOUT
B=$1; A=$(pwd); R=bench/results/memory_200k; O=$R/arena_all
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
bash $R/run.sh "$B" "$A/$O/before_c8_e5.json" --mode pipeline --chunks 8 --snapshot-period 1 --epochs 5 --eval-every 5
bash $R/run.sh "$A" "$A/$O/after_c8_e5.json" --mode pipeline --chunks 8 --snapshot-period 1 --epochs 5 --eval-every 5
bash $R/run.sh "$A" "$A/$O/after_heap32_c8_e5.json" --mode pipeline --chunks 8 --snapshot-period 1 --epochs 5 --eval-every 5 --host-heap-mib 32
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
