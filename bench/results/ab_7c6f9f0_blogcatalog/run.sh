#!/bin/bash
# A/B: code before (54e352c, /work/wt-base) and after (this checkout), BlogCatalog GCNII-32, alternating
for r in 1 2; do
for side in before after; do
  d=/work/main; [ $side = before ] && d=/work/wt-base
  for m in "single" "pipeline --workers 2 --chunks 8 --stage-split 15,17"; do
    tag=$(echo $m | cut -d' ' -f1)
    (cd $d && OMP_NUM_THREADS=1 /work/main/.venv/bin/python -m gnnpipe.train --dataset blogcatalog --data-root /work/shared/datasets --model gcnii --layers 32 --hidden 100 --input-proj --classifier --dropout 0.5 --lr 0.001 --epochs 8 --eval-every 8 --seed 0 --mode $m --json-out /tmp/ab_${side}_${tag}_$r.json --log-level WARNING > /dev/null 2>&1)
    /work/main/.venv/bin/python -c "
import json,statistics; r=json.load(open('/tmp/ab_${side}_${tag}_$r.json')); e=[x['epoch_time_s'] for x in r['epochs']][3:]
print('$r $side $tag', round(statistics.mean(e),3), [round(x,3) for x in e], r['epochs'][-1]['loss'], open('/proc/loadavg').read().split()[0])"
  done
done
done
