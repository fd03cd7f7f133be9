# Peak memory of pipeline mode before (a worktree at 4524fb2: G_l over all N rows) and
# after (G_l slots assigned per epoch from the chunk order), alternating, with graph
# mode, on the 200k systems graph GCN-32 (../run.sh). Usage: run_all.sh BASE_DIR NEW_DIR
base=$1; new=$2; here=$(cd $(dirname $0) && pwd); run=$here/../run.sh
one() { echo "load before $(cut -d' ' -f1-3 /proc/loadavg)"; bash $run "$@"; echo "load after $(cut -d' ' -f1-3 /proc/loadavg)"; }
one $new $here/graph.json --mode graph
one $base $here/before/before_c2.json --mode pipeline --chunks 2 --snapshot-period 1
one $new $here/after_c2.json --mode pipeline --chunks 2 --snapshot-period 1
one $base $here/before/before_c8.json --mode pipeline --chunks 8 --snapshot-period 1
one $new $here/after_c8.json --mode pipeline --chunks 8 --snapshot-period 1
