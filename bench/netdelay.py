#!/usr/bin/env python3
"""Delays every packet of an NFQUEUE queue by a fixed time (the `delay` of netem, which this
kernel lacks: `tc qdisc ... netem` says "Specified qdisc kind is unknown"). Packets keep their
order. Used by bench/slow-link.sh; needs root and the `netfilterqueue` package
(pip install netfilterqueue; Debian: libnetfilter-queue-dev to build it).

    netdelay.py QUEUE_NUM DELAY_MS     (SIGTERM or SIGINT ends it, releasing what it holds)
"""
import collections
import select
import signal
import sys
import time

from netfilterqueue import NetfilterQueue

queue, delay = int(sys.argv[1]), float(sys.argv[2]) / 1000.0


def stop(_sig, _frame):
    raise KeyboardInterrupt


# a background job of a script ignores SIGINT: stop on SIGTERM (and SIGINT) explicitly
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
held = collections.deque()


def hold(pkt):
    pkt.retain()
    held.append((time.monotonic() + delay, pkt))


nfq = NetfilterQueue()
nfq.bind(queue, hold, max_len=65536)
fd = nfq.get_fd()
passed = 0
try:
    while True:
        now = time.monotonic()
        while held and held[0][0] <= now:
            held.popleft()[1].accept()
            passed += 1
        wait = max(0.0, held[0][0] - now) if held else 1.0
        r, _, _ = select.select([fd], [], [], wait)
        if r:
            nfq.run(block=False)
except KeyboardInterrupt:
    pass
finally:
    for _, p in held:
        p.accept()
    nfq.unbind()
    print(f"netdelay: queue {queue}: {passed} packets delayed {delay * 1000:.0f} ms", file=sys.stderr)
