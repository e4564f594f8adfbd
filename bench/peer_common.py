"""Helpers shared by the peer scripts: peak-RSS reset/read and the BENCH JSON line format read by
`tma bench --peers` (one JSON object per line: key, value, unit, higher_is_better, peak_rss_mib,
impl, what)."""
import json, os, statistics


def reset_peak_rss():
    """Reset VmHWM (Linux clear_refs = 5); ignore failures."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return None


def median(xs):
    return statistics.median(xs)


def emit(key, value, unit, higher_is_better, impl, what, rss=True):
    rec = dict(key=key, value=float(value), unit=unit, higher_is_better=higher_is_better,
               peak_rss_mib=peak_rss_mib() if rss else None, impl=impl, what=what)
    print("BENCH " + json.dumps(rec), flush=True)
