#!/bin/bash
# Pipeline C = 8 on the 200k systems graph (GCN-32, default chunk masks, R = 1), 4
# epochs: the stage applying its layers' input dropout as a second tensor (commit
# b9382f5, checked out at $BEFORE) against in place in the gather (this checkout),
# alternating, ROUNDS rounds. Usage (from the repository root):
#   bench/results/memory_200k/in_place_dropout/run.sh BEFORE_CHECKOUT ROUNDS
BEFORE=$1; A=$(pwd); O=$A/bench/results/memory_200k/in_place_dropout
for r in $(seq 1 "${2:-2}"); do
  for arm in before:"$BEFORE" after:"$A"; do
    name=${arm%%:*}
    echo "load $(cut -d' ' -f1-3 /proc/loadavg) round $r $name"
    cd "${arm#*:}" && OMP_NUM_THREADS=1 /work/main/.venv/bin/python -m gnnpipe.train \
      --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 \
      --data-option feature_signal=0.22 --data-option seed=0 --model gcn --layers 32 --hidden 100 --input-proj \
      --classifier --dropout 0.5 --lr 0.01 --epochs 4 --eval-every 4 --workers 2 --log-level WARNING \
      --mode pipeline --chunks 8 --snapshot-period 1 --json-out "$O/c8_${name}_$r.json" 2>&1 | tail -1
    /work/main/.venv/bin/python -c "
import json; r=json.load(open('$O/c8_${name}_$r.json'))
print([round(p['bytes']/2**30,3) for p in r['peak_memory_bytes']], [round(e['epoch_time_s'],2) for e in r['epochs']],
      r['epochs'][-1].get('train_loss'))"
  done
done
