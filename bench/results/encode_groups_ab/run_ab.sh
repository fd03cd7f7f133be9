# compute_split (S = 2, C = 8, chunk masks, GCNII-32 and GCN-32 hidden 100 with the
# input projection) of the code before stage 0's encode went group by group (BASE_DIR,
# a worktree at 4ddcd43; equal split) and after (this checkout; the equal split, and on
# Amazon Photo also the planner's cost-balanced 15,17, which BlogCatalog's plan does not
# differ from), in alternating invocations, one after the other on the otherwise idle
# machine. Resumable: an invocation whose JSON exists is skipped.
# Usage: run_ab.sh BASE_DIR [ROUNDS]
base=$1; rounds=${2:-3}; here=$(cd $(dirname $0) && pwd); py=/work/main/.venv/bin/python
all="blogcatalog:gcnii blogcatalog:gcn amazon_photo:gcnii amazon_photo:gcn"
ap="amazon_photo:gcnii amazon_photo:gcn"
cd $here/../../..
for i in $(seq 1 $rounds); do
  [ -f $here/before_$i.json ] || $py -m bench.compute_split --checkout $base --cases $all --data-root /work/shared/datasets --out $here/before_$i.json
  [ -f $here/after_$i.json ] || $py -m bench.compute_split --cases $all --data-root /work/shared/datasets --out $here/after_$i.json
  [ -f $here/after_balanced_$i.json ] || $py -m bench.compute_split --stage-split 15,17 --cases $ap --data-root /work/shared/datasets --out $here/after_balanced_$i.json
done
