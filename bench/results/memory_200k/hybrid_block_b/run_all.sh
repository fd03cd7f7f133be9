# Peak memory of hybrid mode at GCN-32's default (W = 2, S = 1, C = 2) before (BASE_DIR:
# B_l over the way's row space) and after (NEW_DIR: B_l over its block, the other ways'
# rows in one buffer shared by the layers), with graph mode, on the 200k systems graph GCN-32 (../run.sh).
# Usage: run_all.sh BASE_DIR NEW_DIR
base=$1; new=$2; here=$(cd $(dirname $0) && pwd); run=$here/../run.sh
one() { echo "load before $(cut -d' ' -f1-3 /proc/loadavg)"; bash $run "$@"; echo "load after $(cut -d' ' -f1-3 /proc/loadavg)"; }
one $new $here/graph.json --mode graph
one $base $here/before/hybrid_c2.json --mode hybrid --chunks 2 --snapshot-period 1
one $new $here/after_hybrid_c2.json --mode hybrid --chunks 2 --snapshot-period 1
