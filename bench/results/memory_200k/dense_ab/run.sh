d=$1; out=$2
cd $d && /work/main/.venv/bin/python -m gnnpipe.train --dataset blogcatalog --data-root /work/shared/datasets --model gcn --layers 32 --hidden 100 --input-proj --classifier --dropout 0.5 --lr 0.001 --epochs 10 --eval-every 10 --seed 0 --mode pipeline --workers 2 --chunks 8 --dropout-masks chunk --log-level ERROR --json-out $out >/dev/null 2>&1
/work/main/.venv/bin/python -c "
import json; r=json.load(open('$out')); e=r['epochs'][2:]; import statistics as s
print('$d', round(s.mean(x['epoch_time_s'] for x in e),3), round(s.mean(x['time']['compute_s'] for x in e),3))"
