#!/usr/bin/env bash
# Times the README's first-screen commands from a fresh clone, for the README's "Time to first
# result" paragraph (issue 31 item 4). Run it on an idle machine (it prints the load average
# before and after each step; a load above ~0.5 before a step means the figure is not an idle
# one).
#
#   bash bench/readme-timing.sh [REPO]       # REPO: the clone to copy (default: this one)
#   OLD=1 bash bench/readme-timing.sh        # also times the old test command (dev/test
#                                            # profile: every dependency compiled again)
#
# Fresh clone into a temporary folder, with ../shared next to it (a link to REPO's), and a
# fresh CARGO_TARGET_DIR, so nothing is reused from an earlier build; crates already downloaded
# in ~/.cargo are reused (download time is not measured). Steps, in the README's order:
#   build   cargo build --release -p tma-cli
#   main    the main job: tma train (built-in graph, 30 s time limit)
#   tests   cargo test --release --workspace (the README's test command, CI's test step)
#   pip     pip install -v ./python into a fresh venv (the Python package)
# Each prints: wall seconds, the crates compiled ("Compiling" lines; after `build`, `tests` and
# `pip` should compile only what the release build did not), exit code, load average.
# Logs stay in the temporary folder (printed at the end).
set -uo pipefail
REPO=$(cd "${1:-$(dirname "$0")/..}" && pwd)
WORK=$(mktemp -d /tmp/tma-readme-timing.XXXXXX)
git clone -q "$REPO" "$WORK/tma" || exit 1
if [ -d "$REPO/../shared" ]; then
  ln -s "$(cd "$REPO/../shared" && pwd)" "$WORK/shared"
fi
export CARGO_TARGET_DIR="$WORK/target"
cd "$WORK/tma" || exit 1
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(cargo --version); commit $(git rev-parse --short HEAD)"

step() {
  local name=$1
  shift
  local before t0 t1 rc
  before=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s.%N)
  "$@" >"$WORK/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  printf '%-6s %8.1f s  compiled %3d crates  exit %d  load before %s, after %s\n' \
    "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$(grep -c '^ *Compiling ' "$WORK/$name.log")" "$rc" \
    "$before" "$(cut -d' ' -f1-3 /proc/loadavg)"
}

step build cargo build --release -p tma-cli
step main "$CARGO_TARGET_DIR/release/tma" train
step tests cargo test --release --workspace
if [ "${OLD:-0}" = 1 ]; then
  step old-tests cargo test --workspace
fi
python3 -m venv "$WORK/venv" && "$WORK/venv/bin/pip" install -q --upgrade pip >/dev/null 2>&1
step pip "$WORK/venv/bin/pip" install -v ./python
grep -E '^(test result|done:)' "$WORK/tests.log" "$WORK/main.log" | tail -3
echo "logs: $WORK/*.log (remove $WORK when done)"
