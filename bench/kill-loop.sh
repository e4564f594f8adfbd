#!/usr/bin/env bash
# Issue 29 item 9, full size: SIGKILL `tma train` at KILLS (default 120) seeded random instants
# during its rounds, checkpoints and model writes; after each kill every kept file must be
# whole and `tma train --resume` must complete or refuse naming why. CI runs the same test
# with 16 kills (crates/tma-cli/tests/cli/durability.rs). Prints the counts.
set -euo pipefail
cd "$(dirname "$0")/.."
TMA_KILL_LOOP="${KILLS:-120}" cargo test -p tma-cli --test cli -- \
  durability::sigkill_at_random_instants --nocapture 2>&1 | grep -E "kill loop|test result|panicked"
