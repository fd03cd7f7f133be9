for r in 1 2 3; do
for arm in before after; do
  if [ $arm = before ]; then dir=/work/wt-ab; else dir=/work/main; fi
  (cd $dir && OMP_NUM_THREADS=1 python -m gnnpipe.train --dataset blogcatalog --data-root /work/shared/datasets --model gcnii --layers 32 --hidden 100 --input-proj --classifier --dropout 0.5 --lr 0.001 --epochs 10 --eval-every 10 --seed 0 --mode single --json-out /tmp/single_${arm}_$r.json --log-level WARNING)
  python -c "
import json,statistics;d=json.load(open('/tmp/single_${arm}_$r.json'));s=d['summary']['mean_epoch_time_skipped_epochs'];print('$arm',$r,round(statistics.fmean(e['epoch_time_s'] for e in d['epochs'][s:]),4))"
done; done
