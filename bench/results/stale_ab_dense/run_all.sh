#!/bin/bash
# Dense graphs (BlogCatalog, Amazon Photo; GCNII-32 and GCN-32, hidden 100): single (one
# thread), pipeline (S = 2, C = 8) and graph mode (2 workers) at 9713cd6 (before the
# transposed products left out the stale halo columns; a worktree at /work/wt-base) and
# at 3be3c15 (the change), one invocation after the other, in the order base, new, new, base.
# Each invocation writes its JSON as it ends; a rerun skips what exists.
set -e
cd "$(dirname "$0")/../../.."
D=bench/results/stale_ab_dense
for tag in base_1 new_1 new_2 base_2; do
  [ -f $D/$tag.json ] && continue
  case $tag in base_*) EXTRA="--checkout /work/wt-base";; *) EXTRA="";; esac
  python -m bench.compute_split --epochs 10 $EXTRA --out $D/$tag.json
done
