#!/bin/bash
# Pipeline C = 8 on the 200k systems graph, 6 epochs (the later epochs past the
# allocator's settling), without then with the trim (limit 0 then 256 MiB), ROUNDS rounds, each run under
# GNU time (its .time file: the run's system time and minor page faults, the spawned
# workers included, as they are waited for).
# Usage: run_epochs.sh ROUNDS   (from the repository root; records land in this folder)
A=$(pwd); O=bench/results/memory_200k/trim
for r in $(seq 1 "${1:-2}"); do
  for arm in off:"--host-heap-trim-mib 0" on:"--host-heap-trim-mib 256"; do
    name=${arm%%:*}
    echo "load $(cut -d' ' -f1-3 /proc/loadavg) round $r $name"
    cd "$A" && OMP_NUM_THREADS=1 /usr/bin/time -v -o "$O/c8e6_${name}_$r.time" /work/main/.venv/bin/python -m gnnpipe.train \
      --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 \
      --data-option feature_signal=0.22 --data-option seed=0 --model gcn --layers 32 --hidden 100 --input-proj \
      --classifier --dropout 0.5 --lr 0.01 --epochs 6 --eval-every 6 --workers 2 --log-level WARNING \
      --mode pipeline --chunks 8 --snapshot-period 1 ${arm#*:} --json-out "$O/c8e6_${name}_$r.json" 2>&1 | tail -1
    /work/main/.venv/bin/python -c "
import json; r=json.load(open('$O/c8e6_${name}_$r.json')); t=open('$O/c8e6_${name}_$r.time').read()
g=lambda k: [l.split(': ')[1] for l in t.splitlines() if k in l][0]
print([round(p['bytes']/2**30,3) for p in r['peak_memory_bytes']], [round(e['epoch_time_s'],2) for e in r['epochs']],
      'sys', g('System time'), 'user', g('User time'), 'minflt', g('Minor'))"
  done
done
