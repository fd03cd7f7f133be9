#!/bin/bash
# The 200k-vertex systems graph, GCN-32: single (one thread), pipeline (S = 2, C = 8) and
# graph mode (2 workers) at ed9b546 (before the CSR change, a worktree at /work/wt-base)
# and at 81c169f (after), one invocation after the other, in the order base, new, new, base
# (the session stopped it after base_1 and new_1: the pair showed no difference beyond the spread).
# Each invocation writes its JSON as it ends; a rerun skips what exists.
set -e
cd "$(dirname "$0")/../../.."
OPTS="--cases synthetic:gcn --epochs 4 --skip-epochs 1 --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 --data-option feature_signal=0.22 --data-option seed=0"
D=bench/results/kernel_ab_200k
for tag in base_1 new_1 new_2 base_2; do
  [ -f $D/$tag.json ] && continue
  case $tag in base_*) EXTRA="--checkout /work/wt-base";; *) EXTRA="";; esac
  python -m bench.compute_split $OPTS $EXTRA --out $D/$tag.json
done
