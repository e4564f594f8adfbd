#!/usr/bin/env bash
# Scale bench (issue 10): generate an R-MAT graph straight to disk, then train RandomTMA on it
# with 4 trainers and time-based averaging (the random partition runs inside `tma train`: the
# graph is mapped, each part is streamed to the run directory and mapped back by its trainer).
# Prints each stage's wall time and each process's peak RSS and peak anonymous memory, and the
# time to the first evaluated round from the first command.
#
#   bench/scale.sh ARCS [WORKDIR]
#     ARCS      target arc count, e.g. 100M, 5M, 1300M (nodes = ARCS / AVG_DEGREE)
#     WORKDIR   where the graph and the run go (default /tmp/tma-scale); removed at the end
#               unless KEEP=1
#
# Environment: TMA (binary, default target/release/tma, built if missing), AVG_DEGREE (20),
# FEAT_DIM (32), SPLIT (generator --split TRAIN,VAL,TEST, 0.6,0.2,0.2; e.g. 0.01,0.001,0.002 as
# ogbn-papers100M labels few nodes: the whole test split is evaluated at the end of the run),
# BUDGET (generator --memory-budget, 512MiB), TRAINERS (4), SYNC_EVERY (20s),
# TIME_LIMIT (60s), HIDDEN (64), EXTRA (more `tma train` flags), KEEP (1: keep WORKDIR),
# GRAPH (an existing graph directory to train on instead of generating one; never removed),
# TASK (node or link; link generates the graph with a stored link split, `--link-split
# LINK_SPLIT`, default 0.0005,0.0005 of the edges, 1000 fixed negatives per held-out pair, and
# trains `--task link` on it), METHOD (random-tma; e.g. super-tma, centralized),
# ENGINE (in-process, or mpi: `tma partition --out WORKDIR/parts` within PART_BUDGET (2GiB), then
# `mpirun -np TRAINERS+1 tma train --engine mpi --partitions WORKDIR/parts`, with MPIRUN_FLAGS
# (default --enable-recovery, plus --allow-run-as-root --oversubscribe as root); needs a build
# with --features mpi; every rank's peak memory is read from summary.json).
#
# Disk: the graph takes 4 bytes per arc + (8 + 4 * FEAT_DIM) per node, the generator's
# temporary buckets 8 bytes per arc, the spilled parts about 1/M of the arcs and all features.
set -euo pipefail

ARCS_ARG=${1:?usage: bench/scale.sh ARCS [WORKDIR]  (e.g. 100M)}
WORK=${2:-/tmp/tma-scale}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMA=${TMA:-$ROOT/target/release/tma}
AVG_DEGREE=${AVG_DEGREE:-20}
FEAT_DIM=${FEAT_DIM:-32}
SPLIT=${SPLIT:-0.6,0.2,0.2}
BUDGET=${BUDGET:-512MiB}
TRAINERS=${TRAINERS:-4}
SYNC_EVERY=${SYNC_EVERY:-20s}
TIME_LIMIT=${TIME_LIMIT:-60s}
HIDDEN=${HIDDEN:-64}
EXTRA=${EXTRA:-}
TASK=${TASK:-node}
LINK_SPLIT=${LINK_SPLIT:-0.0005,0.0005}
METHOD=${METHOD:-random-tma}
ENGINE=${ENGINE:-in-process}
PART_BUDGET=${PART_BUDGET:-2GiB}
if [ "$(id -u)" = 0 ]; then ROOT_FLAGS="--allow-run-as-root --oversubscribe"; else ROOT_FLAGS=""; fi
MPIRUN_FLAGS=${MPIRUN_FLAGS:---enable-recovery $ROOT_FLAGS}
case "$ENGINE" in
    in-process | mpi) ;;
    *) echo "ENGINE=$ENGINE: expected in-process or mpi" >&2; exit 2 ;;
esac
case "$TASK" in
    node) GEN_LINK=() ;;
    link) GEN_LINK=(--link-split "$LINK_SPLIT") ;;
    *) echo "TASK=$TASK: expected node or link" >&2; exit 2 ;;
esac

to_num() { # 100M -> 100000000, 1.3G -> 1300000000
    python3 - "$1" <<'PY'
import sys
s = sys.argv[1].strip().upper()
mul = {"K": 1e3, "M": 1e6, "G": 1e9}
print(int(float(s[:-1]) * mul[s[-1]]) if s[-1] in mul else int(s))
PY
}
ARCS=$(to_num "$ARCS_ARG")
NODES=$((ARCS / AVG_DEGREE))

if [ ! -x "$TMA" ]; then
    echo "building $TMA (cargo build --release -p tma-cli)" >&2
    (cd "$ROOT" && cargo build --release -p tma-cli)
fi
if [ -e "$WORK" ] && [ -n "$(ls -A "$WORK" 2>/dev/null)" ]; then
    echo "$WORK exists and is not empty; remove it or pass another WORKDIR" >&2
    exit 2
fi
mkdir -p "$WORK"
cleanup() { if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; fi; }
trap cleanup EXIT

now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }
# peak RSS of a finished command from GNU time's -v output, MiB
time_rss() { awk '/Maximum resident set size/ {printf "%.0f", $6 / 1024}' "$1"; }

echo "scale bench: $ARCS_ARG arcs target -> $NODES nodes x avg degree $AVG_DEGREE, $FEAT_DIM-d features, $TRAINERS trainers, task $TASK, $METHOD"
echo "binary: $TMA"
T0=$(now)
# the machine's lowest MemAvailable over the whole bench, sampled every 2 s
( while true; do awk '/MemAvailable/ {print $2}' /proc/meminfo >>"$WORK/memavail.kib"; sleep 2; done ) &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null; cleanup' EXIT

# 1. generate (or reuse GRAPH)
if [ -n "${GRAPH:-}" ]; then
    ln -s "$(cd "$GRAPH" && pwd)" "$WORK/graph"
    : >"$WORK/gen.time"
    T1=$(now)
else
    "$(command -v time || echo /usr/bin/time)" -v -o "$WORK/gen.time" \
        "$TMA" generate --nodes "$NODES" --avg-degree "$AVG_DEGREE" --feat-dim "$FEAT_DIM" \
        --split "$SPLIT" "${GEN_LINK[@]}" --memory-budget "$BUDGET" --out "$WORK/graph" >"$WORK/gen.log" 2>&1 ||
        { cat "$WORK/gen.log"; exit 1; }
    T1=$(now)
fi
TG=$T1
STORED=$(python3 -c "import json; m = json.load(open('$WORK/graph/tma-graph.json')); print(m['num_arcs'])")
GRAPH_MIB=$(du -smL "$WORK/graph" | cut -f1)

# 2 + 3. partition (random, streamed to the run directory) and train; the first evaluated round
# is the first line of rounds.jsonl with a validation value, polled every 0.5 s
RUN="$WORK/run"
PART_LINE=""
if [ "$ENGINE" = mpi ]; then
    # the partition directory first (streamed within PART_BUDGET), then one process per rank
    TP0=$(now)
    "$(command -v time || echo /usr/bin/time)" -v -o "$WORK/part.time" \
        "$TMA" partition --dataset "$WORK/graph" --task "$TASK" --method "${PART_METHOD:-random}" \
        --parts "$TRAINERS" --memory-budget "$PART_BUDGET" --out "$WORK/parts" >"$WORK/part.log" 2>&1 ||
        { cat "$WORK/part.log"; exit 1; }
    PART_LINE="| partition --out (${PART_METHOD:-random}, $(du -smL "$WORK/parts" | cut -f1) MiB on disk, --memory-budget $PART_BUDGET) | $(secs "$TP0" "$(now)") s | $(time_rss "$WORK/part.time") MiB | - |"
    T1=$(now)
    # shellcheck disable=SC2086
    mpirun $MPIRUN_FLAGS -np $((TRAINERS + 1)) \
        "$TMA" train --engine mpi --partitions "$WORK/parts" \
        --sync-every "$SYNC_EVERY" --time-limit "$TIME_LIMIT" --hidden "$HIDDEN" --out "$RUN" $EXTRA \
        >"$WORK/train.out" 2>"$WORK/train.err" &
else
# shellcheck disable=SC2086
"$(command -v time || echo /usr/bin/time)" -v -o "$WORK/train.time" \
    "$TMA" train --dataset "$WORK/graph" --task "$TASK" --method "$METHOD" --trainers "$TRAINERS" \
    --sync-every "$SYNC_EVERY" --time-limit "$TIME_LIMIT" --hidden "$HIDDEN" --out "$RUN" $EXTRA \
    >"$WORK/train.out" 2>"$WORK/train.err" &
fi
PID=$!
FIRST=""
# the train process's resident memory over time (s since train started, VmRSS, RssFile,
# RssAnon in kB, the last line it printed): where the peak RSS is reached
: >"$WORK/rss.tsv"
while kill -0 "$PID" 2>/dev/null; do
    # the first round whose validation is done (rounds without one record a null value)
    if [ -z "$FIRST" ] && [ -s "$RUN/rounds.jsonl" ] &&
        grep -qE '"val":\{[^}]*"value":-?[0-9]' "$RUN/rounds.jsonl"; then FIRST=$(now); fi
    CHILD=$(pgrep -P "$PID" | head -1 || true)
    if [ -n "$CHILD" ] && [ -r "/proc/$CHILD/status" ]; then
        awk -v t="$(secs "$T1" "$(now)")" -v last="$(tr '\r' '\n' <"$WORK/train.err" | grep -v '^\s*$' | tail -1 | cut -c1-60)" \
            '/^VmRSS/ {r=$2} /^RssFile/ {f=$2} /^RssAnon/ {a=$2} END {if (r) print t "\t" r "\t" f "\t" a "\t" last}' \
            "/proc/$CHILD/status" >>"$WORK/rss.tsv" 2>/dev/null || true
    fi
    sleep 0.5
done
wait "$PID" || { cat "$WORK/train.err"; exit 1; }
T2=$(now)
if [ -z "$FIRST" ] && grep -qE '"val":\{[^}]*"value":-?[0-9]' "$RUN/rounds.jsonl" 2>/dev/null; then FIRST=$T2; fi
PREP=$(grep -o 'split and partition in [0-9.]*s' "$WORK/train.err" | grep -o '[0-9.]*s$' || echo "?")

echo
echo "| stage | wall time | peak RSS | peak anonymous |"
echo "|---|---|---|---|"
echo "| generate ($STORED arcs stored, ${GRAPH_MIB} MiB on disk, --memory-budget $BUDGET) | $(secs "$T0" "$TG") s | $(time_rss "$WORK/gen.time") MiB | - |"
if [ -n "$PART_LINE" ]; then echo "$PART_LINE"; fi
python3 - "$RUN/summary.json" "$(secs "$T1" "$T2")" "$PREP" "$WORK/train.time" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1]))
wall, prep = sys.argv[2], sys.argv[3]
mib = lambda b: "?" if b is None else f"{b / 2**20:.0f} MiB"
for m in s["memory"]:
    who = m["role"] + (f" rank {m['rank']}" if m["rank"] is not None else "")
    print(f"| train: {who} (partition inside: {prep}; {s['rounds']} rounds) | {wall} s | {mib(m['peak_rss_bytes'])} | {mib(m['peak_anon_bytes'])} |")
if len(s["memory"]) > 1:
    tot = lambda k: None if any(m[k] is None for m in s["memory"]) else sum(m[k] for m in s["memory"])
    print(f"| train: sum over {len(s['memory'])} processes | {wall} s | {mib(tot('peak_rss_bytes'))} | {mib(tot('peak_anon_bytes'))} |")
PY
echo
if [ -n "$FIRST" ]; then
    echo "first evaluated round: $(secs "$T0" "$FIRST") s after the first command ($(secs "$T1" "$FIRST") s after train started)"
else
    echo "first evaluated round: none (no round in rounds.jsonl)"
fi
if [ "$ENGINE" != mpi ] && [ -s "$WORK/rss.tsv" ]; then
    sort -t$'\t' -k2,2n "$WORK/rss.tsv" | tail -1 |
        awk -F'\t' '{printf "largest sampled RSS of tma train: %.0f MiB (file pages %.0f MiB, anonymous %.0f MiB) at %s s, after: %s\n", $2/1024, $3/1024, $4/1024, $1, $5}'
fi
echo "whole bench: $(secs "$T0" "$T2") s; lowest MemAvailable $(sort -n "$WORK/memavail.kib" | head -1 | awk '{printf "%.1f GiB", $1 / 1048576}') of $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo); swap used $(awk '/SwapTotal/ {t=$2} /SwapFree/ {f=$2} END {print (t - f) / 1024 " MiB of " t / 1024 " MiB"}' /proc/meminfo)"
python3 - "$RUN/summary.json" "$RUN/rounds.jsonl" "$STORED" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
arcs = int(sys.argv[3])
# a figure a run did not produce (a round without validation, no best model) prints as "-"
f4 = lambda x: "-" if x is None else f"{x:.4f}"
f1 = lambda x: "-" if x is None else f"{x:.1f}"
get = lambda d, *k: (get(d.get(k[0]), *k[1:]) if isinstance(d, dict) else None) if k else d
for line in open(sys.argv[2]):
    r = json.loads(line)
    print(f"round {r['round']}: t={f1(r.get('elapsed_s'))}s val {get(r, 'val', 'metric')}={f4(get(r, 'val', 'value'))} eval {f1(r.get('eval_s'))}s steps {r.get('steps')}")
print(f"best val {f4(get(s, 'best_val', 'value'))} test {f4(get(s, 'best_test', 'value'))}")
for m in s["memory"]:
    if m["peak_anon_bytes"]:
        print(f"{m['role']}: {m['peak_anon_bytes'] / arcs:.2f} anonymous bytes per stored arc, {m['peak_rss_bytes'] / arcs:.2f} RSS bytes per stored arc")
PY
