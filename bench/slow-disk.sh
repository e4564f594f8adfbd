#!/usr/bin/env bash
# Issue 29 item 3 on a real slow disk: the run directory (checkpoints every round, rounds.jsonl,
# models) on an ext4 file system on a loop device whose writes are throttled to BPS bytes a second
# (default 1 MiB/s) by the block I/O controller: cgroup v1 `blkio.throttle.write_bps_device` of
# the root cgroup (every writer of the device, the kernel's writeback included), or cgroup v2
# `io.max` of a cgroup of its own that tma runs in. Then 4 in-process trainers on coauthor_cs,
# --sync-every 2s --time-limit 40s, and prints every round's time and gap, the rounds that
# waited (gap over the schedule + 0.5 s), steps per trainer, `checkpoints_superseded`, and how
# long after the time limit tma exited. BPS=0 runs the same job on the loop device unthrottled.
#
#   bench/slow-disk.sh    (root; TMA: a tma binary; WORK: scratch dir; BPS: bytes a second)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=${TMA:-$ROOT/target/release/tma}
D=${WORK:-/tmp/tma-slow-disk}
BPS=${BPS:-1048576}
[ "$(id -u)" = 0 ] || { echo "error: bench/slow-disk.sh needs root (loop device, mount)" >&2; exit 1; }
V1=/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device
V2=/sys/fs/cgroup
CG=""
cleanup() {
    [ -n "${DEVNUM:-}" ] && [ -w "$V1" ] && echo "$DEVNUM 0" >"$V1" 2>/dev/null
    [ -n "$CG" ] && rmdir "$CG" 2>/dev/null
    mountpoint -q "$D/mnt" 2>/dev/null && umount "$D/mnt"
    [ -n "${LOOP:-}" ] && losetup -d "$LOOP"
}
trap cleanup EXIT
mountpoint -q "$D/mnt" 2>/dev/null && umount "$D/mnt"
rm -rf "$D"; mkdir -p "$D/mnt"
truncate -s 512M "$D/disk.img"
mkfs.ext4 -q "$D/disk.img" || exit 1
LOOP=$(losetup -f --show "$D/disk.img") || exit 1
mount "$LOOP" "$D/mnt" || exit 1
DEVNUM=$(lsblk -dno MAJ:MIN "$LOOP" | tr -d ' ')
RUN_IN=()
if [ "$BPS" != 0 ]; then
    if [ -w "$V1" ]; then
        echo "$DEVNUM $BPS" >"$V1" || exit 1
        echo "throttle: cgroup v1 blkio, root cgroup: $(grep "^$DEVNUM " "$V1")"
    elif [ -f "$V2/cgroup.controllers" ] && grep -qw io "$V2/cgroup.controllers"; then
        echo +io >"$V2/cgroup.subtree_control"
        CG=$V2/tma-slow-disk; mkdir -p "$CG"
        echo "$DEVNUM wbps=$BPS" >"$CG/io.max" || exit 1
        echo "throttle: cgroup v2 io.max: $(cat "$CG/io.max")"
        RUN_IN=(sh -c "echo \$\$ >$CG/cgroup.procs && exec \"\$@\"" sh)
    else
        echo "error: no block I/O throttle here (neither $V1 nor cgroup v2 io)" >&2; exit 1
    fi
fi
python3 - "$D/mnt" <<'PY'
import os, sys, time
p = os.path.join(sys.argv[1], "probe")
t = time.time(); fd = os.open(p, os.O_WRONLY | os.O_CREAT); os.write(fd, b"x" * (1 << 20))
os.fsync(fd); os.close(fd); os.remove(p)
print(f"disk: 1 MiB written and fsynced in {time.time() - t:.2f} s")
PY
START=$(date +%s.%N)
"${RUN_IN[@]}" "$T" train --dataset "$ROOT/../shared/datasets/coauthor_cs" --trainers 4 \
    --sync-every 2s --time-limit 40s --out "$D/mnt/run" >"$D/out.log" 2>"$D/err.log"
echo "tma exit status $? after $(echo "$(date +%s.%N) - $START" | bc) s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
du -sh "$D/mnt/run/checkpoint" | sed 's/^/checkpoint directory: /'
python3 - "$D/mnt/run/rounds.jsonl" "$D/mnt/run/summary.json" <<'PY'
import json, sys
rounds = [json.loads(l) for l in open(sys.argv[1])]
prev, waited, over = None, 0, 0.0
for r in rounds:
    gap = r["elapsed_s"] - prev if prev is not None else 0.0
    nominal = 2.0 / 16 if prev is not None and prev < 1.99 else 2.0  # the ramp's, then 2 s
    mark = ""
    if prev is not None and gap > nominal + 0.5:
        waited += 1; over += gap - nominal; mark = " waited"
    print(f"round {r['round']:3d} t={r['elapsed_s']:6.2f}s gap {gap:5.2f}s steps {r.get('steps')}{mark}")
    prev = r["elapsed_s"]
s = json.load(open(sys.argv[2]))
print(f"rounds {len(rounds)} in {rounds[-1]['elapsed_s']:.1f} s; rounds that waited: {waited} "
      f"({over:.1f} s over the schedule); final steps {rounds[-1].get('steps')}; "
      f"checkpoints_superseded {s.get('checkpoints_superseded', 0)}; train_time_s {s.get('train_time_s')}; "
      f"interrupted {s.get('interrupted')}")
PY
