#!/bin/bash
# The trim as a cap on the resident set (commit of this script: trim after a chunk
# compute where the worker's resident set is above N MiB): pipeline C = 8 on the 200k
# systems graph, 6 epochs, N = 0 (off) against the caps given, alternating, ROUNDS
# rounds, each run under GNU time (.time: system time, minor page faults).
# Usage: [FIRST_ROUND=K] run_cap.sh ROUNDS CAP_MIB...   (from the repository root; records land here)
A=$(pwd); O=bench/results/memory_200k/trim; first=${FIRST_ROUND:-1}; rounds=$1; shift
for r in $(seq "$first" "$rounds"); do
  for cap in 0 "$@"; do
    echo "load $(cut -d' ' -f1-3 /proc/loadavg) round $r cap $cap"
    cd "$A" && OMP_NUM_THREADS=1 /usr/bin/time -v -o "$O/cap${cap}_$r.time" /work/main/.venv/bin/python -m gnnpipe.train \
      --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 \
      --data-option feature_signal=0.22 --data-option seed=0 --model gcn --layers 32 --hidden 100 --input-proj \
      --classifier --dropout 0.5 --lr 0.01 --epochs 6 --eval-every 6 --workers 2 --log-level WARNING \
      --mode pipeline --chunks 8 --snapshot-period 1 --host-heap-trim-mib $cap --json-out "$O/cap${cap}_$r.json" 2>&1 | tail -1
    /work/main/.venv/bin/python -c "
import json; r=json.load(open('$O/cap${cap}_$r.json')); t=open('$O/cap${cap}_$r.time').read()
g=lambda k: [l.split(': ')[1] for l in t.splitlines() if k in l][0]
print([round(p['bytes']/2**30,3) for p in r['peak_memory_bytes']], [round(e['epoch_time_s'],2) for e in r['epochs']],
      r['extra']['host_heap_trim'].get('trims'), 'sys', g('System time'), 'minflt', g('Minor'))"
  done
done
