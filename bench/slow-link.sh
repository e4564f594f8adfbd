#!/usr/bin/env bash
# Issue 29 item 4 over a real impaired link: two hosts simulated on this machine, "hostA" (this
# network namespace: mpirun, the coordinator and trainers 0-2) and "hostB" (a network namespace
# of its own, tma-hostB: trainer 3), joined through a router namespace (tma-router) by veth
# pairs: hostA 10.77.0.1 <-> 10.77.0.254 router 10.77.1.254 <-> 10.77.1.2 hostB. Open MPI runs
# over TCP on that path only; an rsh agent starts hostB's daemon inside its namespace with its
# own host name (unshare --uts). The router impairs what it forwards, both ways:
#   DELAY_MS (default 200): bench/netdelay.py holds every forwarded packet in an NFQUEUE queue
#            (this kernel has no sch_netem: `tc qdisc ... netem` -> "Specified qdisc kind is
#            unknown"); 0 turns it off. (Delaying in a sending host's own OUTPUT chain instead
#            throttles TCP far below the link: TCP small queues count the held packets.)
#   LOSS     (default 0.05): the fraction of forwarded packets dropped (iptables `statistic
#            --mode random`)
#   RATE     (default none, e.g. 8mbit): a token bucket (`tc qdisc ... tbf`) on both of the
#            router's links
# Then 1 coordinator + 4 trainers on coauthor_cs, --sync-every 2s --round-timeout 3s
# --time-limit 40s (as issue 29 ran it), and prints every round's time, the gap since the
# previous round, missing trainers and steps per trainer, then a summary line: rounds, rounds
# that waited (gap over the schedule + 0.5 s: 2 s, 0.125 s in the averaging ramp), the time
# over the schedule, rounds missing each trainer and steps per trainer. IMPAIR=0 runs the same
# job over the unimpaired path; TRAIN_ARGS are added to `tma train` (e.g. "--hidden 64").
#
#   bench/slow-link.sh    (root; TMA: a tma built with --features mpi; WORK: scratch dir;
#                          NFQ_PYTHON: a python3 with netfilterqueue, default python3)
#   TRAIN_ARGS="--hidden 64" DELAY_MS=100 LOSS=0 RATE=8mbit bench/slow-link.sh
#                         (the late-every-round case of bench/README.md; RATE=24mbit: the
#                          late-but-inside-the-deadline one; no variables: issue 29's link)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=${TMA:-$ROOT/target/release/tma}
D=${WORK:-/tmp/tma-slow-link}
DELAY_MS=${DELAY_MS:-200}
LOSS=${LOSS:-0.05}
RATE=${RATE:-}
IMPAIR=${IMPAIR:-1}
PY=${NFQ_PYTHON:-python3}
TRAIN_ARGS=${TRAIN_ARGS:-}
NS=tma-hostB
R=tma-router
[ "$(id -u)" = 0 ] || { echo "error: bench/slow-link.sh needs root (network namespaces)" >&2; exit 1; }
rm -rf "$D"; mkdir -p "$D"

cleanup() {
    [ -n "${DP:-}" ] && kill -TERM "$DP" 2>/dev/null && wait "$DP" 2>/dev/null
    ip route del 10.77.1.0/24 2>/dev/null
    ip link del tma-vA 2>/dev/null
    ip netns del $NS 2>/dev/null
    ip netns del $R 2>/dev/null
}
trap cleanup EXIT
cleanup
set -e
ip netns add $NS
ip netns add $R
ip link add tma-vA type veth peer name tma-rA
ip link add tma-vB type veth peer name tma-rB
ip link set tma-rA netns $R
ip link set tma-rB netns $R
ip link set tma-vB netns $NS
ip addr add 10.77.0.1/24 dev tma-vA
ip link set tma-vA up
ip route add 10.77.1.0/24 via 10.77.0.254
ip -n $R addr add 10.77.0.254/24 dev tma-rA
ip -n $R addr add 10.77.1.254/24 dev tma-rB
ip -n $R link set tma-rA up
ip -n $R link set tma-rB up
ip netns exec $R sysctl -qw net.ipv4.ip_forward=1
ip -n $NS addr add 10.77.1.2/24 dev tma-vB
ip -n $NS link set tma-vB up
ip -n $NS link set lo up
ip -n $NS route add default via 10.77.1.254
if [ "$IMPAIR" = 1 ]; then
    # every rule inside the router's namespace
    if [ "$LOSS" != 0 ]; then
        ip netns exec $R iptables -A FORWARD -m statistic --mode random --probability "$LOSS" -j DROP
    fi
    if [ "$DELAY_MS" != 0 ]; then
        ip netns exec $R iptables -A FORWARD -j NFQUEUE --queue-num 29
        ip netns exec $R "$PY" "$ROOT/bench/netdelay.py" 29 "$DELAY_MS" 2>"$D/netdelay.log" &
        DP=$!
        sleep 1
        kill -0 $DP 2>/dev/null || { cat "$D/netdelay.log"; exit 1; }
    fi
    if [ -n "$RATE" ]; then
        for dev in tma-rA tma-rB; do
            ip netns exec $R tc qdisc add dev $dev root tbf rate "$RATE" burst 64kb latency 2s
        done
    fi
fi
set +e
echo "link: delay ${DELAY_MS} ms each way, loss $LOSS each way, rate ${RATE:-unlimited} (impaired: $IMPAIR)"

"$T" partition --dataset "$ROOT/../shared/datasets/coauthor_cs" --parts 4 --out "$D/parts" \
    >"$D/part.log" 2>&1 || { cat "$D/part.log"; exit 1; }
# `agent HOST [options] COMMAND...`: hostB's daemon, in hostB's namespace under its own name
cat >"$D/agent.sh" <<EOF
#!/bin/sh
host=\$1; shift
while [ "\${1#-}" != "\$1" ]; do shift; done
exec ip netns exec $NS unshare --uts sh -c "hostname \$host && exec \$*"
EOF
chmod +x "$D/agent.sh"
printf '%s slots=4\nhostB slots=1\n' "$(hostname)" >"$D/hosts"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
START=$(date +%s.%N)
mpirun --enable-recovery --hostfile "$D/hosts" --mca plm_rsh_agent "$D/agent.sh" \
    --mca btl self,vader,tcp --mca btl_tcp_if_include 10.77.0.0/16 \
    --mca oob_tcp_if_include 10.77.0.0/16 -np 5 \
    "$T" train --engine mpi --partitions "$D/parts" --sync-every 2s --round-timeout 3s \
    --time-limit 40s --out "$D/run" $TRAIN_ARGS >"$D/out.log" 2>"$D/err.log"
echo "mpirun exit status $? after $(echo "$(date +%s.%N) - $START" | bc) s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$D/run/rounds.jsonl" "$D/run/summary.json" <<'PY'
import json, sys
rounds = [json.loads(l) for l in open(sys.argv[1])]
prev, waited, idle, late = None, 0, 0.0, {}
for r in rounds:
    gap = r["elapsed_s"] - prev if prev is not None else 0.0
    mark = ""
    nominal = 2.0 / 16 if prev is not None and prev < 1.99 else 2.0  # the ramp's, then 2 s
    if prev is not None and gap > nominal + 0.5:
        waited += 1; idle += gap - nominal; mark = " waited"
    for t in r.get("missing") or []:
        late[t] = late.get(t, 0) + 1
    print(f"round {r['round']:3d} t={r['elapsed_s']:6.2f}s gap {gap:5.2f}s missing {r.get('missing')} "
          f"steps {r.get('steps')}{mark}")
    prev = r["elapsed_s"]
s = json.load(open(sys.argv[2]))
print(f"rounds {len(rounds)} in {rounds[-1]['elapsed_s']:.1f} s; rounds that waited (gap over the "
      f"schedule + 0.5 s): "
      f"{waited}, {idle:.1f} s over the 2 s schedule; rounds missing each trainer {late}; "
      f"final steps {rounds[-1].get('steps')}; summary rounds {s.get('rounds')}")
PY
[ "$IMPAIR" = 1 ] && [ "$DELAY_MS" != 0 ] && { kill -TERM "$DP"; wait "$DP"; DP=; cat "$D/netdelay.log"; }
