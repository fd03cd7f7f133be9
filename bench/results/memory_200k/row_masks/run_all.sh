# Peak memory of pipeline mode with one dropout mask per row and layer (--dropout-masks
# row) against per-chunk masks (the default), at C = 8 and C = 2, R = 1, on the 200k
# systems graph GCN-32 (../run.sh). Usage: run_all.sh CODE_DIR
code=$1; here=$(cd $(dirname $0) && pwd); run=$here/../run.sh
one() { echo "load before $(cut -d' ' -f1-3 /proc/loadavg)"; bash $run "$@"; echo "load after $(cut -d' ' -f1-3 /proc/loadavg)"; }
one $code $here/chunk_c8.json --mode pipeline --chunks 8 --snapshot-period 1
one $code $here/row_c8.json --mode pipeline --chunks 8 --snapshot-period 1 --dropout-masks row
one $code $here/chunk_c2.json --mode pipeline --chunks 2 --snapshot-period 1
one $code $here/row_c2.json --mode pipeline --chunks 2 --snapshot-period 1 --dropout-masks row
