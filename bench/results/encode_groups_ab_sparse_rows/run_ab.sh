# The A/B of ../encode_groups_ab on BlogCatalog (sparse features, 8,189 columns at
# 0.87 %) after sparse features went back to one encode group (the whole encode at the
# epoch's ends): compute_split (S = 2, C = 8, chunk masks, GCNII-32 and GCN-32 hidden 100
# with the input projection, equal split) of BASE_DIR (a worktree at 4ddcd43, before
# the group-by-group encode) and of this checkout, alternating, one after the other on
# the otherwise idle machine. Resumable. Usage: run_ab.sh BASE_DIR [ROUNDS]
base=$1; rounds=${2:-3}; here=$(cd $(dirname $0) && pwd); py=/work/main/.venv/bin/python
cases="blogcatalog:gcnii blogcatalog:gcn"
cd $here/../../..
for i in $(seq 1 $rounds); do
  [ -f $here/before_$i.json ] || $py -m bench.compute_split --checkout $base --cases $cases --data-root /work/shared/datasets --out $here/before_$i.json
  [ -f $here/after_$i.json ] || $py -m bench.compute_split --cases $cases --data-root /work/shared/datasets --out $here/after_$i.json
done
