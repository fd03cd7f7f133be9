# $1 code dir, $2 out json, rest: extra args
d=$1; out=$2; shift 2
cd $d && OMP_NUM_THREADS=1 /work/main/.venv/bin/python -m gnnpipe.train --data-option num_nodes=200000 --data-option avg_degree=10.0 --data-option homophily=0.6 --data-option feature_signal=0.22 --data-option seed=0 --model gcn --layers 32 --hidden 100 --input-proj --classifier --dropout 0.5 --lr 0.01 --epochs 3 --eval-every 3 --workers 2 --log-level WARNING --json-out $out "$@" 2>&1 | grep -v WARNING
/work/main/.venv/bin/python -c "
import json,sys; r=json.load(open('$out')); print('$out', [round(p['bytes']/2**30,3) for p in r['peak_memory_bytes']], [round(e.get('epoch_time_s',0),2) for e in r['epochs']], r['epochs'][-1].get('train_loss', r['epochs'][-1].get('loss')))"
