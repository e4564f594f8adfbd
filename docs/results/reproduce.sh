#!/usr/bin/env bash
# Reproduces docs/results.md: `tma compare` on three graphs, two tasks, plus the failure runs.
# Usage: docs/results/reproduce.sh [OUT_ROOT]   (from the repository root; needs ../shared/datasets)
set -euo pipefail
OUT=${1:-/tmp/tma-results}
D=../shared/datasets
TMA=./target/release/tma
cargo build --release -p tma-cli
COMMON="--trainers 4 --threads 2 --hidden 128 --fanouts 10,10 --lr 0.005 --time-limit 12s --sync-every 2s --seeds 0,1,2 --quiet"
NODE="--task node --batch-size 512"
LINK="--task link --batch-size 2048 --eval-num-neg 100 --eval-max-edges 500"
# a comparison already finished is kept; one that was interrupted continues (--resume)
run() {
  local name=$1; shift
  if [ -f "$OUT/$name/results.json" ]; then return; fi
  if [ -f "$OUT/$name/compare.json" ]; then $TMA compare "$@" --out "$OUT/$name" --resume "$OUT/$name"
  else $TMA compare "$@" --out "$OUT/$name"; fi
}
for g in musae_facebook_pagepage amazon_photo coauthor_cs; do
  run "$g-node" --dataset $D/$g $COMMON $NODE
done
# failures: 1 of 4 trainers lost from the start (the paper's setting), and trainer 1 lost at 4 s
FAILM=random-tma,super-tma,psgd-pa,llcg,ggs
run amazon_photo-node-drop1 --dataset $D/amazon_photo $COMMON $NODE --methods $FAILM --drop-parts 1
run amazon_photo-node-fail4s --dataset $D/amazon_photo $COMMON $NODE --methods $FAILM --fail 1@4s
for g in musae_facebook_pagepage amazon_photo coauthor_cs; do
  run "$g-link" --dataset $D/$g $COMMON $LINK
done
for d in "$OUT"/*/; do
  n=$(basename "$d"); cp "$d/table.md" "docs/results/$n.md"; cp "$d/val_vs_time.svg" "docs/results/$n.svg"
done
