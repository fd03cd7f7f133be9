#!/bin/bash
# Issue 14's compute target on the 200k-vertex systems graph (GCN-32, hidden 100):
# single mode with one thread, pipeline S = 2 (C = 8, then C = 2, GCN-32's default) and
# graph mode P = 2, one after the other; two rounds. Each invocation writes its JSON
# as it finishes; a rerun skips the files already there (resumable).
cd "$(dirname "$0")/../../.."
OPTS="--cases synthetic:gcn --epochs 4 --skip-epochs 1 --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 --data-option feature_signal=0.22 --data-option seed=0"
for round in 1 2; do
  for c in 8 2; do
    out=bench/results/compute_split_200k/c${c}_${round}.json
    [ -e "$out" ] && continue
    echo "$(date -u +%FT%TZ) round $round C=$c load $(cut -d' ' -f1-3 /proc/loadavg)"
    python -m bench.compute_split $OPTS --chunks $c --out "$out" || exit 1
  done
done
# Longer runs at C = 8: 6 epochs, the first 3 left out (a stage's resident set still
# grows in the second epoch, and sometimes the third: page faults in its last forwards).
for round in 1 2; do
  out=bench/results/compute_split_200k/c8_e6_${round}.json
  [ -e "$out" ] && continue
  echo "$(date -u +%FT%TZ) 6 epochs, round $round C=8 load $(cut -d' ' -f1-3 /proc/loadavg)"
  python -m bench.compute_split ${OPTS/--epochs 4 --skip-epochs 1/--epochs 6 --skip-epochs 3} --chunks 8 --out "$out" || exit 1
done
