#!/usr/bin/env bash
# Issue 29 item 4, by hand: one MPI trainer rank made slow (SIGSTOP 0.4 s / SIGCONT 0.1 s in
# a loop: 5x slower, as a slow link or a throttled container would make it), 1 coordinator +
# 4 trainers on coauthor_cs, --sync-every 2s --round-timeout 3s --time-limit 40s. Prints every
# round's time, missing trainers and steps per trainer: rounds should stay on their 2 s
# schedule (the slow trainer is not waited for), and the slow trainer's steps should grow.
#
#   bench/slow-trainer.sh        (TMA: a binary built with --features mpi; WORK: scratch dir)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=${TMA:-$ROOT/target/release/tma}
D=${WORK:-/tmp/tma-slow-trainer}
rm -rf "$D"; mkdir -p "$D"
"$T" partition --dataset "$ROOT/../shared/datasets/coauthor_cs" --parts 4 --out "$D/parts" \
    >"$D/part.log" 2>&1 || { cat "$D/part.log"; exit 1; }
if [ "$(id -u)" = 0 ]; then ROOT_FLAGS="--allow-run-as-root --oversubscribe"; else ROOT_FLAGS=""; fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# shellcheck disable=SC2086
mpirun $ROOT_FLAGS --enable-recovery -np 5 "$T" train --engine mpi --partitions "$D/parts" \
    --sync-every 2s --time-limit 40s --round-timeout 3s --out "$D/run" >"$D/out.log" 2>"$D/err.log" &
MP=$!
sleep 12
# the third trainer rank by pid (rank order is start order here)
VICTIM=$(pgrep -f -- "train --engine mpi --partitions $D/parts" | sort -n | grep -v "^$MP$" | sed -n 3p)
echo "throttling pid $VICTIM"
( while kill -0 "$VICTIM" 2>/dev/null; do
    kill -STOP "$VICTIM" 2>/dev/null; sleep 0.4; kill -CONT "$VICTIM" 2>/dev/null; sleep 0.1
  done ) &
TH=$!
wait $MP; echo "mpirun exit status $?"
kill $TH 2>/dev/null
python3 - "$D/run/rounds.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"round {r['round']:3d} t={r['elapsed_s']:6.2f}s missing {r.get('missing')} steps {r.get('steps')}")
PY
