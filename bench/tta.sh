#!/usr/bin/env bash
# Time to accuracy: tma against the paper's own stack (the release's pipeline re-implemented on
# DGL, `dgl_tma.py`), same data, split sizes, model and budget, A-B-B-A order, then a report.
#
#   bench/tta.sh                          # every workload below, 60 s each, A-B-B-A
#   BUDGET=120s ORDER=ABBA bench/tta.sh   # longer runs
#   ORDER=AB WORKLOADS="facebook-link" METHODS=random-tma bench/tta.sh
#   WORKLOADS="coauthor_cs-node amazon_photo-node" bench/tta.sh  # any dataset: DATASET-{link,node}
#   VAL_CHECK_NODE= bench/tta.sh          # tma validates at its rounds only, like the DGL side
#   MATMUL_PRECISION=highest bench/tta.sh # tma's products in f32 (default medium: bf16 on AMX)
#   SEEDS=same bench/tta.sh               # every run seed 0 (default: pair i runs seed i, both sides)
#   SYNC_TMA=500ms VAL_CHECK_NODE= WORKLOADS=facebook-node METHODS=random-tma bench/tta.sh
#                                         # tma averaging every 0.5 s, DGL every SYNC_DGL (10 s)
#   SYNC_RAMP=0 bench/tta.sh              # tma on the paper's plain schedule (default: tma's
#                                         # own, --sync-ramp 16: the first 10 s span averaged
#                                         # every 0.625 s; the DGL pipeline has no ramp)
#   DROPOUT=0 bench/tta.sh                # tma without dropout on node workloads, as the DGL
#                                         # pipeline (default: tma's own, 0.5 for node
#                                         # classification, 0 for link prediction)
#   RESUME=1 OUT=bench/out/x bench/tta.sh # keep the runs OUT already holds whole (tma:
#                                         # summary.json, DGL: final.json) and run the rest
#   bench/tta_many.sh                     # the fixed list of graphs (issue 33), resumable
#
# Set-up (both sides): 1000 validation and 1000 test positive edges held out (both directions
# leave the training graph), 1000 fixed negatives each; SAGE, 2 layers, hidden 256, fanouts 25
# next to the seeds then 10, Adam lr 1e-3, batch 65536 edges (link) / 1024 nodes (node),
# gradient clipping 1.0 from epoch 2, 4 trainers (centralized: 1), 10 s rounds, CORES cores.
# Dropout: each side's default (the DGL pipeline has none and no option; tma 0.5 on node
# workloads since docs/decisions/0016-node-dropout.md, none on link; DROPOUT= sets tma's).
# A node workload on a dataset with its own split (train/val/test masks or index files) uses it
# on both sides (split 0 of masks: tma's --split-index default and the DGL pipeline's).
# DGL evaluates concurrently like tma (--eval-mode concurrent, the release's behaviour).
# On node workloads tma also validates between its rounds every VAL_CHECK_NODE (default 2s;
# --val-check-interval: the mean of the trainers' current models, which they do not receive);
# the report gives tma's time to the target from its rounds alone and with those checks. The
# DGL pipeline has no such option: it validates at its rounds. Link workloads check every
# VAL_CHECK_LINK (default 3s; empty: rounds only): one link validation (1000 positives x 1001
# candidates through the MLP decoder, ~131 GFLOP) takes ~0.5-0.8 core-s with bf16 products but
# ~1.4 core-s in f32, where a check every 2 s took ~30% of 2 cores and cut tma's steps by
# 22-30% (bench/tta-results.md, "Validation checks"); with MATMUL_PRECISION=highest set
# VAL_CHECK_LINK= too.
#
# tma runs with --matmul-precision MATMUL_PRECISION (default medium: its dense products as bf16
# AMX tile products with f32 sums, where the CPU has AMX-BF16; else f32 with a warning in the
# run's log); the DGL pipeline runs in f32.
#
# Needs: the DGL pipeline (PEER, default ../shared/peers/dgl_tma.py) and a Python with torch
# 2.1.2 + dgl 2.1.0 (DGL_PYTHON, default .venv-dgl/bin/python; bench/README.md has the pip
# line). Raw runs go to bench/out/tta/ (ignored by git); the report to $REPORT
# (default bench/out/tta/report.md; bench/tta-results.md keeps a measured one with its set-up).
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET=${BUDGET:-60s}
ORDER=${ORDER:-ABBA}
CORES=${CORES:-2}
PEER=${PEER:-../shared/peers/dgl_tma.py}
DGL_PYTHON=${DGL_PYTHON:-.venv-dgl/bin/python}
DATA=${DATA:-../shared/datasets}
WORKLOADS=${WORKLOADS:-"facebook-link photo-link facebook-node"}
METHODS=${METHODS:-"random-tma centralized"}
OUT=${OUT:-bench/out/tta}
REPORT=${REPORT:-$OUT/report.md}
TMA=${TMA:-}
VAL_CHECK_NODE=${VAL_CHECK_NODE-2s}
VAL_CHECK_LINK=${VAL_CHECK_LINK-3s}
MATMUL_PRECISION=${MATMUL_PRECISION:-medium}
# the seed of a run: its pair's number (the n-th run of each side is pair n), the same on both
# sides, so that a sequence samples the seed spread (on facebook node random-tma one seed's
# best validation differs from another's by up to 0.006 on either side: bench/tta-results.md);
# SEEDS=same: seed 0 for every run
SEEDS=${SEEDS:-pair}
[[ "$SEEDS" == pair || "$SEEDS" == same ]] || { echo "tta.sh: SEEDS=$SEEDS: give pair or same" >&2; exit 2; }
# the averaging span of each side (the set-up above: 10 s both). tma's trainers make ~12x the
# reference stack's steps per second on facebook node classification, so an equal span holds
# ~12x the local steps per round; SYNC_TMA gives tma a span holding no more local steps than
# DGL's rounds (bench/tta-results.md, "Averaging span")
SYNC_TMA=${SYNC_TMA:-10s}
SYNC_DGL=${SYNC_DGL:-10s}
# tma's averaging ramp (--sync-ramp; empty: tma's default, the first span cut into 16 rounds, docs/decisions/0015-averaging-ramp.md; 0: the paper's plain schedule)
SYNC_RAMP=${SYNC_RAMP:-}
# tma's --dropout (empty: tma's default for the task, 0.5 node / 0 link; the DGL pipeline: 0)
DROPOUT=${DROPOUT:-}
# RESUME=1: a run whose directory is whole is kept, not run again (an interrupted sequence
# goes on where it stopped; a run cut short is run again)
RESUME=${RESUME:-}

[[ -f "$PEER" ]] || { echo "tta.sh: peer pipeline $PEER not found (set PEER=)" >&2; exit 2; }
[[ -x "$DGL_PYTHON" ]] || { echo "tta.sh: $DGL_PYTHON not found (set DGL_PYTHON=; see bench/README.md)" >&2; exit 2; }
if [[ -z "$TMA" ]]; then
  cargo build --release -q -p tma-cli
  TMA="${CARGO_TARGET_DIR:-target}/release/tma"
fi
mkdir -p "$OUT"
rm -f "$OUT/failed.txt"

# the number of held-out pairs must be 1000 on both sides: fraction = 1000.25 / undirected pairs
frac() {
  "$DGL_PYTHON" - "$1" <<'EOF'
import numpy as np, sys, os
ei = np.load(os.path.join(sys.argv[1], "edge_index.npy"))
n = int(ei.max()) + 1
u, v = np.minimum(ei[0], ei[1]).astype(np.int64), np.maximum(ei[0], ei[1]).astype(np.int64)
keep = u != v
print(f"{1000.25 / len(np.unique(u[keep] * n + v[keep])):.9f}")
EOF
}

# node workloads: both sides train and validate on one split, a seeded 60/20/20 permutation of
# the labelled nodes (numpy seed 0, as the DGL pipeline draws its own) written as train/val/test_idx.npy next
# to links to the dataset's arrays; left to themselves the two sides draw different splits, and
# on facebook one split's validation accuracy differs from another's by up to ~0.01
shared_split() { # dataset_dir out_dir
  rm -rf "$2"; mkdir -p "$2"
  local f
  for f in "$1"/*; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$2/"; done
  "$DGL_PYTHON" - "$1" "$2" <<'EOF2'
import numpy as np, sys, os
y = np.load(os.path.join(sys.argv[1], "y.npy"))
lab = np.nonzero(y.sum(1) > 0 if y.ndim == 2 else y >= 0)[0]
perm = np.random.default_rng(0).permutation(lab)
a, b = int(0.6 * len(lab)), int(0.8 * len(lab))
for k, v in (("train", perm[:a]), ("val", perm[a:b]), ("test", perm[b:])):
    np.save(os.path.join(sys.argv[2], f"{k}_idx.npy"), np.sort(v).astype(np.int64))
EOF2
}

# node workloads: tma validates (and selects its model) by the DGL pipeline's metric, accuracy
# (micro-F1 for multi-label labels); tma's own default for 2 classes is roc_auc, which the DGL
# pipeline does not report
node_metric() { # dataset_dir
  "$DGL_PYTHON" -c "import numpy as np, sys; print('micro_f1' if np.load(sys.argv[1], mmap_mode='r').ndim == 2 else 'accuracy')" "$1/y.npy"
}

load() { echo "$(date -u +%H:%M:%S) $1: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"; }

run_tma() { # dir dataset task method frac seed
  local m=4; [[ "$4" == centralized ]] && m=1
  load "tma $1"
  local extra=(--batch-size 1024)
  [[ "$3" == node ]] && extra+=(--metric "$(node_metric "$2")")
  [[ "$3" == link ]] && extra=(--batch-size 65536 --eval-max-edges 1000 --eval-num-neg 1000 --val-frac "$5" --test-frac "$5")
  local check=$VAL_CHECK_NODE
  [[ "$3" == link ]] && check=$VAL_CHECK_LINK
  if [[ -n "$check" ]]; then extra+=(--val-check-interval "$check"); fi
  if [[ -n "$SYNC_RAMP" ]]; then extra+=(--sync-ramp "$SYNC_RAMP"); fi
  if [[ -n "$DROPOUT" ]]; then extra+=(--dropout "$DROPOUT"); fi
  "$TMA" train --dataset "$2" --task "$3" --method "$4" --trainers "$m" --sync-every "$SYNC_TMA" \
    --time-limit "$BUDGET" --model sage --layers 2 --hidden 256 --fanouts 25,10 --lr 0.001 \
    --clip-norm 1.0 --threads "$CORES" --matmul-precision "$MATMUL_PRECISION" --seed "$6" "${extra[@]}" \
    --out "$1" --quiet > "$1.log" 2>&1
}

run_dgl() { # dir dataset task method frac seed
  load "dgl $1"
  local extra=()
  [[ "$3" == link ]] && extra=(--val-frac "$5" --test-frac "$5" --val-eval-max 1000 --eval-negatives 1000 --batch-size 65536)
  PYTHONFAULTHANDLER=1 "$DGL_PYTHON" "$PEER" --dataset "$2" --task "$3" --method "$4" --trainers 4 --sync-every "$SYNC_DGL" \
    --time-limit "$BUDGET" --model sage --layers 2 --hidden 256 --fanouts 10,25 --lr 0.001 \
    --grad-clip 1.0 --cores "$CORES" --eval-mode concurrent --seed "$6" "${extra[@]}" --out "$1" > "$1.log" 2>&1
}

for w in $WORKLOADS; do
  case "$w" in
    facebook-link) ds=musae_facebook_pagepage task=link ;;
    photo-link) ds=amazon_photo task=link ;;
    facebook-node) ds=musae_facebook_pagepage task=node ;;
    # any other dataset under DATA: DATASET-link or DATASET-node (e.g. coauthor_cs-node)
    *-link | *-node) ds=${w%-*} task=${w##*-} ;;
    *) echo "tta.sh: unknown workload $w (facebook-link, photo-link, facebook-node, or DATASET-link / DATASET-node for a dataset under $DATA)" >&2; exit 2 ;;
  esac
  [[ -d "$DATA/$ds" ]] || { echo "tta.sh: workload $w: no dataset $DATA/$ds" >&2; exit 2; }
  f=0; [[ "$task" == link ]] && f=$(frac "$DATA/$ds")
  src="$DATA/$ds"
  if [[ "$task" == node && ! -e "$DATA/$ds/train_idx.npy" && ! -e "$DATA/$ds/train_masks.npy" ]]; then
    src="$OUT/data/$w"; shared_split "$DATA/$ds" "$src"
  fi
  for m in $METHODS; do
    for ((i = 0; i < ${#ORDER}; i++)); do
      side=${ORDER:$i:1}
      # the i-th run of each side is numbered by how many of that side came before
      n=$(grep -o "$side" <<< "${ORDER:0:$i}" | wc -l || true)
      d="$OUT/$w-$m-$([[ $side == A ]] && echo tma || echo dgl)-$n"
      seed=$n; [[ "$SEEDS" == same ]] && seed=0
      if [[ -n "$RESUME" && ( -f "$d/summary.json" || -f "$d/final.json" ) ]]; then
        echo "tta.sh: $d is whole, kept (RESUME=1)" >&2
        continue
      fi
      rm -rf "$d" "$d.log"
      # a failed run is reported (its log kept) and the sequence goes on
      if [[ $side == A ]]; then
        run_tma "$d" "$src" "$task" "$m" "$f" "$seed" || echo "tta.sh: tma run $d failed (exit $?; see $d.log)" | tee -a "$OUT/failed.txt" >&2
      else
        run_dgl "$d" "$src" "$task" "$m" "$f" "$seed" || echo "tta.sh: DGL run $d failed (exit $?; see $d.log)" | tee -a "$OUT/failed.txt" >&2
      fi
    done
  done
done
load end
python3 bench/tta_report.py ${REPORT_OPTS:-} --budget "$BUDGET" --cores "$CORES" --order "$ORDER" --seeds "$SEEDS" --sync-tma "$SYNC_TMA" --sync-dgl "$SYNC_DGL" "$OUT" > "$REPORT"
cat "$REPORT"
