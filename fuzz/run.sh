#!/usr/bin/env bash
# Coverage-guided fuzzing of one reader on stable Rust: builds fuzz_reader with SanitizerCoverage
# (the flags cargo-fuzz passes, minus the sanitizer) and runs libFuzzer for SECONDS, starting
# from the target's committed corpus and the seeds the mutation tests use. New corpus entries go
# to fuzz/corpus/TARGET (not committed); crashes to fuzz/artifacts/TARGET/.
# Usage: fuzz/run.sh TARGET [SECONDS]   (targets: TARGETS of crates/tma-graph/tests/fuzz/targets.rs
# and of crates/tma-train/tests/fuzz/harness.rs)
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?target}; secs=${2:-120}
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
cargo build --release --target "$triple" --bin fuzz_reader
bin=target/$triple/release/fuzz_reader
mkdir -p "corpus/$target" "artifacts/$target"
seeds=()
for d in ../crates/*/tests/fuzz_corpus/"$target"; do [ -d "$d" ] && seeds+=("$d"); done
TMA_GRAPH_DIR=$PWD/../crates/tma-graph TMA_FUZZ_TARGET=$target "$bin" "corpus/$target" "${seeds[@]}" \
  -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
  -len_control=0 -artifact_prefix="artifacts/$target/" -print_final_stats=1
