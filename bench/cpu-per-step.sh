#!/bin/bash
# Compare two tma binaries (e.g. built with and without LTO): bash bench/cpu-per-step.sh BIN (alternate A B A B)
# user CPU seconds per optimizer step of a fixed workload (robust to other load on the machine)
bin=$1; out=$(mktemp -d)
/usr/bin/time -f "%U %S" -o $out/t $bin train --dataset ${DATASETS:-../shared/datasets}/planetoid_cora --method centralized --threads 1 --time-limit 8s --sync-every 4s --sync-ramp 0 --out $out/r --quiet >/dev/null 2>&1
steps=$(python3 -c "import json;print(sum(json.load(open('$out/r/summary.json'))['steps_per_trainer']))")
read u s < $out/t
python3 -c "print('$bin', 'steps', $steps, 'user_s', $u, 'ms_cpu_per_step', round(1000*$u/$steps,3))"
rm -rf $out
