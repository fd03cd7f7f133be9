#!/bin/bash
# glibc's heap per process (bench/heap_trace.py) of the 200k GCN-32 pipeline at C = 8,
# R = 1, 2 epochs: the checkout at $1 (saved tensors of 1 MiB or more in the arena),
# then this checkout (4 KiB or more). Usage: run_trace.sh BEFORE_CHECKOUT
B=$1; A=$(pwd); O=$A/bench/results/memory_200k/arena_all
ARGS="--data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 --data-option feature_signal=0.22 --data-option seed=0 --model gcn --layers 32 --hidden 100 --input-proj --classifier --dropout 0.5 --lr 0.01 --epochs 2 --eval-every 2 --workers 2 --log-level WARNING --mode pipeline --chunks 8 --snapshot-period 1"
(cd "$B" && OMP_NUM_THREADS=1 /work/main/.venv/bin/python "$A/bench/heap_trace.py" --out "$O/heap_trace_before.json" -- $ARGS)
(cd "$A" && OMP_NUM_THREADS=1 /work/main/.venv/bin/python "$A/bench/heap_trace.py" --out "$O/heap_trace_after.json" -- $ARGS)
