#!/usr/bin/env bash
# Time to accuracy over many graphs (issue 33): bench/tta.sh on a fixed list of graphs from
# ../shared/datasets that nobody tuned tma's defaults on (plus the three it was tuned on, to see
# that they keep their figures), with the defaults, both methods (random-tma, centralized),
# A-B-B-A, seeds per pair (pair N runs seed N on both sides: 2 seeds), then one table per
# workload and method and the median and worst over the list (bench/tta_report.py --summary).
#
#   bench/tta_many.sh                            # the whole list, 60 s a run (~3.5 h on 2 cores)
#   BUDGET=30s bench/tta_many.sh                 # shorter runs
#   LIST="musae_github-link deezer_HU-node" bench/tta_many.sh   # any DATASET-{link,node}
#   OUT=bench/out/tta-many-2 bench/tta_many.sh   # another sequence
#
# Resumable: it keeps the runs OUT already holds whole (RESUME=1 of bench/tta.sh) and runs the
# rest, so an interrupted sequence (or one spread over several sittings) goes on where it
# stopped; delete OUT to start again. Every other setting of bench/tta.sh (METHODS, ORDER,
# SEEDS, CORES, MATMUL_PRECISION, TMA, DGL_PYTHON, PEER, DATA) passes through. The report
# (REPORT, default OUT/report.md) says which matmul path tma ran (bf16 on AMX, else f32).
#
# The list: every graph is link-capable; node workloads need labels. Kinds (INDEX.md of the
# datasets): social with features (musae_facebook_pagepage*), co-purchase (amazon_photo*),
# co-authorship with features (coauthor_cs), social without features (musae_github,
# deezer_HU: multi-label, blogcatalog: dense), collaboration without features
# (seal_arxiv_astroph), biological, small (seal_Yeast), heterophilous (hetero_squirrel,
# dense, its own 10 masks: split 0; fb100_Johns_Hopkins55), citation, sparse, no features
# (planetoid_pubmed, its own split). * the three workloads tma's defaults were tuned on
# (facebook link and node, photo link). Ordered so the graphs nobody tuned on come first.
set -euo pipefail
cd "$(dirname "$0")/.."
DEFAULT_LIST="musae_github-link seal_arxiv_astroph-link deezer_HU-link seal_Yeast-link
  coauthor_cs-link hetero_squirrel-link planetoid_pubmed-link blogcatalog-link
  musae_github-node deezer_HU-node hetero_squirrel-node fb100_Johns_Hopkins55-node
  planetoid_pubmed-node coauthor_cs-node amazon_photo-node
  facebook-link photo-link facebook-node"
LIST=${LIST:-$DEFAULT_LIST}
export OUT=${OUT:-bench/out/tta-many}
export REPORT=${REPORT:-$OUT/report.md}
export RESUME=1
export REPORT_OPTS="--summary"
WORKLOADS=$(echo $LIST) exec bench/tta.sh
