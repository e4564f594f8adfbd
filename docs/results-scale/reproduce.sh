#!/usr/bin/env bash
# Reproduces docs/results-scale.md: `tma compare` on generated graphs shaped like the paper's
# (issue 30): Reddit-like (233K nodes, ~114M arcs) and citation2-like (2.93M nodes, ~30M arcs),
# link prediction and node classification, six methods, 4 trainers, the failure runs, and the
# MAG-like graph (65M nodes, ~1.3B arcs: random-tma against centralized, link, one seed).
#
# Usage (from the repository root):
#   docs/results-scale/reproduce.sh [OUT_ROOT]
#   ONLY=citation2-link docs/results-scale/reproduce.sh      # one comparison (a name below)
#   BUDGET=10m SEEDS=0,1,2 docs/results-scale/reproduce.sh   # the page's settings (defaults)
#
# Every comparison is resumable: one already finished is kept, one that was interrupted
# continues where it stopped (`tma compare --resume`), so the whole page can be run over
# several sittings. SEEDS longer than a comparison's recorded seeds adds the seeds missing
# (`tma compare --resume --seeds`). Each comparison's records (compare.json, the
# partitions' records, sittings.log (when, load, build), every run's summary.json, rounds.jsonl.gz, partition.json and
# config.toml: ~0.1-0.3 MB a run, no models or partitions) are copied into RECORDS (default
# docs/results-scale/runs/<name>/) every minute while it runs and when it ends; with
# FROM_RECORDS=1 a comparison missing from OUT starts from its records (its graph generated
# again under the same GRAPHS path, the partitions it still needs made again and checked
# byte for byte against the recorded ones), so seeds run on other days, on a machine that
# kept nothing, add up. Without FROM_RECORDS a row that has records starts afresh and
# writes its records to OUT/records/<name>, never over the kept ones. Graphs are generated once under GRAPHS (default: the system temp
# directory; ~2 GB citation2 and ~2 GB more for its noisier node graph, 0.7 GB reddit and
# as much again for its node graph, 1.8 GB for the planted communities, ~13 GB mag), never
# into the repository; each comparison keeps one partition
# directory per layout under its OUT, with its runs' models and checkpoints (measured on
# citation2, 1.9 GB, before the layouts shared their evaluation data as hard links: ~3.3 GB
# per layout, 13 GB for a four-method comparison; mag: 17 GB random + 24 GB whole as copies,
# of which 19.7 GB are now links). Delete both when done.
set -euo pipefail
OUT=${1:-${TMPDIR:-/tmp}/tma-results-scale}
GRAPHS=${GRAPHS:-${TMPDIR:-/tmp}/tma-scale-graphs}
BUDGET=${BUDGET:-10m}            # training time of every run
SEEDS=${SEEDS:-0,1,2}            # random-tma, super-tma, psgd-pa, centralized
FEW_SEEDS=${FEW_SEEDS:-0}        # llcg and ggs (the issue allows one seed when time is short)
FAIL_SEEDS=${FAIL_SEEDS:-0}      # the failure runs
MAG_BUDGET=${MAG_BUDGET:-30m}
NODE_NOISE=${NODE_NOISE:-8}      # feature noise of the node-classification graphs (below)
ONLY=${ONLY:-}
RECORDS=${RECORDS:-docs/results-scale/runs}
FROM_RECORDS=${FROM_RECORDS:-0}
# TMA=PATH runs a given build (e.g. a copy that a rebuild during the runs cannot replace)
if [ -z "${TMA:-}" ]; then
  cargo build --release -p tma-cli
  TMA=./target/release/tma
fi
mkdir -p "$OUT" "$GRAPHS"

gen() { # preset
  [ -f "$GRAPHS/$1/tma-graph.json" ] || $TMA generate --preset "$1" --out "$GRAPHS/$1"
}
# Node classification reads a second graph of the preset, the same but for noisier features:
# with the preset's noise (2.0) the 16 class means stand out of the noise so far that every
# method classifies 99.98% of nodes from a node's own features (docs/results-scale.md); at
# --feature-noise 8 a node's own features classify ~40% and its neighbours carry the rest.
gen_node() { # preset
  [ -f "$GRAPHS/$1-noise$NODE_NOISE/tma-graph.json" ] ||
    $TMA generate --preset "$1" --feature-noise "$NODE_NOISE" --out "$GRAPHS/$1-noise$NODE_NOISE"
}
# where comparison $1's records go: RECORDS/$1 when it is the comparison recorded there
# (started from those records, or none were there when it started); else OUT/records/$1, so a
# row started afresh never writes over (or mixes with) the records of another sitting
records_dir() { # name
  if [ -f "$OUT/$1/.records-here" ]; then echo "$RECORDS/$1"; else echo "$OUT/records/$1"; fi
}
# the records of comparison OUT/$1 (small files only; a run's rounds gzipped); each file is
# written beside its place and renamed, so a copy cut short never leaves half a file
save_records() { # name
  local src="$OUT/$1" dst f r
  dst=$(records_dir "$1")
  [ -f "$src/compare.json" ] || return 0
  mkdir -p "$dst/partitions"
  for f in compare.json continued.json results.json sittings.log; do
    [ -f "$src/$f" ] && cp "$src/$f" "$dst/$f.tmp" && mv "$dst/$f.tmp" "$dst/$f"
  done
  for f in "$src"/partitions/*.json; do
    [ -f "$f" ] && cp "$f" "$dst/partitions/.tmp" && mv "$dst/partitions/.tmp" "$dst/partitions/$(basename "$f")"
  done
  for r in "$src"/*-seed*/; do
    [ -f "$r/summary.json" ] || continue
    local d
    d="$dst/$(basename "$r")"
    mkdir -p "$d"
    for f in summary.json partition.json config.toml; do
      [ -f "$r/$f" ] && cp "$r/$f" "$d/$f.tmp" && mv "$d/$f.tmp" "$d/$f"
    done
    gzip -9nc "$r/rounds.jsonl" > "$d/rounds.jsonl.gz.tmp" && mv "$d/rounds.jsonl.gz.tmp" "$d/rounds.jsonl.gz"
  done
  return 0
}
# OUT/$1 from RECORDS/$1: the comparison's records, to be continued with --resume
restore_records() { # name
  local src="$RECORDS/$1" dst="$OUT/$1" r
  [ -f "$src/compare.json" ] || return 0
  echo "$1: starts from its records in $src"
  mkdir -p "$dst"
  cp -r "$src"/. "$dst"/
  for r in "$dst"/*-seed*/; do
    [ -f "$r/rounds.jsonl.gz" ] && gunzip -c "$r/rounds.jsonl.gz" > "$r/rounds.jsonl" && rm "$r/rounds.jsonl.gz"
  done
  return 0
}
# a comparison already finished is kept (its table written again: a resume that trains
# nothing); one that was interrupted, or recorded with fewer seeds, continues (--resume)
run() { # name, compare options...
  local name=$1; shift
  if [ -n "$ONLY" ] && [ "$ONLY" != "$name" ]; then return; fi
  if [ ! -e "$OUT/$name" ]; then
    if [ "$FROM_RECORDS" = 1 ]; then restore_records "$name"; fi
    mkdir -p "$OUT/$name"
    if [ "$FROM_RECORDS" = 1 ] || [ ! -f "$RECORDS/$name/compare.json" ]; then
      touch "$OUT/$name/.records-here"
    else
      echo "$name: starts afresh (FROM_RECORDS=1 would continue the records in $RECORDS/$name, which are kept as they are); its records go to $OUT/records/$name"
    fi
  fi
  mkdir -p "$OUT/$name"
  # one line per sitting: when, the load, which build
  echo "$name: $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) tma $TMA, checkout $(git describe --always --dirty 2>/dev/null || echo unknown)" |
    tee -a "$OUT/load.log" >> "$OUT/$name/sittings.log"
  # the saver: a SIGTERM ends it at once while it sleeps, or after the copy it is making
  ( trap 'exit 0' TERM
    while true; do
      sleep 60 & wait $! || true
      save_records "$name" || echo "$name: records not saved this minute"
    done ) &
  local saver=$! rc=0
  if [ -f "$OUT/$name/compare.json" ]; then
    $TMA compare "$@" --resume "$OUT/$name" || rc=$?
  else
    $TMA compare "$@" --out "$OUT/$name" || rc=$?
  fi
  # the saver stops (after the copy it may be making) before the last save; a failing kill
  # must not end the script under set -e before that save (it did: the last run of a row
  # went unrecorded)
  kill $saver 2>/dev/null || true
  wait $saver 2>/dev/null || true
  save_records "$name" || echo "$name: records not saved (see above)"
  return $rc
}
ALWAYS="--time-limit $BUDGET --quiet"
COMMON="--trainers 4 $ALWAYS"
MAIN=random-tma,super-tma,psgd-pa,centralized
FEW=llcg,ggs
for g in citation2 reddit; do
  # ONLY names one comparison: generate only the graph it reads
  if [ -n "$ONLY" ] && [[ "$ONLY" != "$g"-* ]]; then continue; fi
  if [ -z "$ONLY" ] || [[ "$ONLY" == "$g"-link* ]]; then gen $g; fi
  if [ -z "$ONLY" ] || [[ "$ONLY" == "$g"-node* ]]; then gen_node $g; fi
  for task in link node; do
    d="$GRAPHS/$g"; [ $task = node ] && d="$GRAPHS/$g-noise$NODE_NOISE"
    run "$g-$task" --dataset "$d" --task $task $COMMON --methods $MAIN --seeds "$SEEDS"
    run "$g-$task-llcg-ggs" --dataset "$d" --task $task $COMMON --methods $FEW --seeds "$FEW_SEEDS"
  done
done
# Reddit-like with METIS behind super-tma and psgd-pa: at 114.5M arcs the default clustering
# (auto) takes label propagation, which finds little structure on this graph (1.7% of arcs
# inside super-nodes); METIS needs ~9 GiB here and the paper's baselines use it
if [ -z "$ONLY" ] || [ "$ONLY" = reddit-link-metis ]; then
  gen reddit
  run reddit-link-metis --dataset "$GRAPHS/reddit" --task link $COMMON \
    --methods super-tma,psgd-pa --super-clustering metis --seeds "$FEW_SEEDS"
fi
# Link prediction where neighbourhoods matter (issue 30, item 4): the citation2 preset with
# 100,000 classes of ~29 nodes each as planted communities (70% of a node's edges inside its
# community) and features of noise 8, so that a held-out link is told from the 1000 negatives
# mostly by the endpoints' shared community, which a 2-layer model sees through neighbours.
# A random 4-way part keeps a quarter of each community's arcs; super-nodes keep most.
if [ -z "$ONLY" ] || [ "$ONLY" = citation2-comm-link ]; then
  [ -f "$GRAPHS/citation2-comm/tma-graph.json" ] ||
    $TMA generate --preset citation2 --classes 100000 --feature-noise 8 --out "$GRAPHS/citation2-comm"
  run citation2-comm-link --dataset "$GRAPHS/citation2-comm" --task link $COMMON \
    --methods centralized,random-tma,super-tma --seeds "$FEW_SEEDS"
fi
# failures (citation2-like, both tasks): 1 of 4 trainers absent from the start (the paper's
# setting: the graph is cut into 4 parts and 3 trainers train, one part's data is never
# seen: --trainers 3 --drop-parts 1), and trainer 1 of 4 lost half-way through the budget
half() { # a budget such as 90s, 10m or 1h -> half of it in seconds
  local n=${1%[smh]}
  case ${1: -1} in s) echo "$((n / 2))s" ;; m) echo "$((n * 30))s" ;; h) echo "$((n * 1800))s" ;;
    *) echo "reproduce.sh: BUDGET=$1: give seconds, minutes or hours (90s, 10m, 1h)" >&2; exit 2 ;; esac
}
HALF=$(half "$BUDGET")
for task in link node; do
  if [ -n "$ONLY" ] && [[ "$ONLY" != citation2-$task-* ]]; then continue; fi
  d="$GRAPHS/citation2"
  if [ $task = node ]; then gen_node citation2; d="$GRAPHS/citation2-noise$NODE_NOISE"; else gen citation2; fi
  run "citation2-$task-drop1" --dataset "$d" --task $task --trainers 3 $ALWAYS \
    --methods random-tma,psgd-pa --seeds "$FAIL_SEEDS" --drop-parts 1
  run "citation2-$task-fail-half" --dataset "$d" --task $task $COMMON \
    --methods random-tma,psgd-pa --seeds "$FAIL_SEEDS" --fail "1@$HALF"
done
# MAG-like, link prediction: random-tma against centralized, one seed, the longest budget
if [ -z "$ONLY" ] || [ "$ONLY" = mag-link ]; then
  gen mag
  ONLY=mag-link run mag-link --dataset "$GRAPHS/mag" --task link --trainers 4 \
    --time-limit "$MAG_BUDGET" --quiet --methods random-tma,centralized --seeds 0
fi
for d in "$OUT"/*/; do
  n=$(basename "$d")
  [ -f "$d/table.md" ] || continue
  cp "$d/table.md" "docs/results-scale/$n.md"; cp "$d/val_vs_time.svg" "docs/results-scale/$n.svg"
done
