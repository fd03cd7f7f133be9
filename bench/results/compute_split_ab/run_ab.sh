# compute_split (BlogCatalog GCNII-32 and GCN-32, C = 8, chunk masks) of the code before
# this session's changes (BASE_DIR, a worktree at 4524fb2) and after (NEW_DIR), in
# alternating invocations, one after the other on the otherwise idle machine.
# Usage: run_ab.sh BASE_DIR NEW_DIR
base=$1; new=$2; here=$(cd $(dirname $0) && pwd); py=/work/main/.venv/bin/python
for i in 1 2; do
  (cd $base && $py -m bench.compute_split --cases blogcatalog:gcnii blogcatalog:gcn --data-root /work/shared/datasets --out $here/before_$i.json)
  (cd $new && $py -m bench.compute_split --cases blogcatalog:gcnii blogcatalog:gcn --data-root /work/shared/datasets --out $here/after_$i.json)
done
