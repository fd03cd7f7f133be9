#!/bin/bash
# --host-heap-mib 32 (glibc's mmap threshold fixed at 32 MiB, the largest its own
# adjustment reaches, and up to 2 GiB of freed heap top kept) against glibc's defaults,
# with this checkout, one after the other, alternating which goes first:
# the 200k systems graph, GCN-32 (../run.sh, 5 epochs): pipeline C = 8 and C = 2 (R = 1),
# graph mode; the dense graphs, GCNII-32 hidden 100, pipeline S = 2, C = 8, 8 epochs.
# Usage: run_all.sh   (records land in this folder)
A=$(pwd); R=bench/results/memory_200k; O=$R/heap32
echo "load $(cut -d' ' -f1-3 /proc/loadavg) start"
for lay in "c8:--mode pipeline --chunks 8 --snapshot-period 1" "c2:--mode pipeline --chunks 2 --snapshot-period 1" "graph:--mode graph"; do
  name=${lay%%:*}; args=${lay#*:}
  arms="default heap32"; [ "$name" = c2 ] && arms="heap32 default"
  for arm in $arms; do
    extra=""; [ $arm = heap32 ] && extra="--host-heap-mib 32"
    bash $R/run.sh "$A" "$A/$O/${name}_${arm}.json" $args --epochs 5 --eval-every 5 $extra
  done
done
for ds in blogcatalog amazon_photo; do
  for arm in default heap32 default heap32; do
    extra=""; [ $arm = heap32 ] && extra="--host-heap-mib 32"
    n=1; [ -f "$A/$O/${ds}_${arm}_1.json" ] && n=2
    OMP_NUM_THREADS=1 /work/main/.venv/bin/python -m gnnpipe.train --dataset $ds --data-root /work/shared/datasets \
      --model gcnii --layers 32 --hidden 100 --epochs 8 --eval-every 8 --workers 2 --mode pipeline --chunks 8 \
      --log-level WARNING $extra --json-out "$A/$O/${ds}_${arm}_$n.json" 2>&1 | tail -1
  done
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg) end"
