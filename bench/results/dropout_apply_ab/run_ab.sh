# compute_split (BlogCatalog and Amazon Photo, GCNII-32 and GCN-32, S = 2, C = 8, chunk
# masks) of the code before the dropout-apply change (BASE_DIR, a worktree at eb13255)
# and after (NEW_DIR, a worktree at the change), in alternating invocations, one after
# the other on the otherwise idle machine. Usage: run_ab.sh BASE_DIR NEW_DIR
base=$1; new=$2; here=$(cd $(dirname $0) && pwd); py=/work/main/.venv/bin/python
cases="blogcatalog:gcnii blogcatalog:gcn amazon_photo:gcnii amazon_photo:gcn"
for i in 1 2; do
  [ -f $here/before_$i.json ] || (cd $base && $py -m bench.compute_split --cases $cases --data-root /work/shared/datasets --out $here/before_$i.json)
  [ -f $here/after_$i.json ] || (cd $new && $py -m bench.compute_split --cases $cases --data-root /work/shared/datasets --out $here/after_$i.json)
done
