#!/usr/bin/env python3
"""Time-to-accuracy report for the runs bench/tta.sh wrote (plain Python 3, no packages).

    python3 bench/tta_report.py [--budget 60s --cores 2 --order ABBA --seeds pair
        --sync-tma 10s --sync-dgl 10s] [bench/out/tta]

(the options only label the report's header: bench/tta.sh passes the values it ran with)

Run directories are named WORKLOAD-METHOD-{tma,dgl}-N; run N of tma is paired with run N of DGL.
For each pair: the DGL run's final validation metric is the target; the report gives the time
each side first reached it (tma's speed-up = DGL's time / tma's), both metrics at equal
training time (20 s, 40 s, DGL's last round: the latest validation; and the best validation
by DGL's last round, the model each stack keeps) and at equal optimizer steps per trainer (tma's
metric interpolated linearly in steps between its two validations around DGL's final step
count, both shown), and both curves. tma runs with
`--val-check-interval` also validate between averaging rounds (rows with "check": true): the
report gives tma's time to the target both from its rounds only and with those checks.

With --summary (bench/tta_many.sh) it first prints one row per workload and method over its
pairs (the ratio of times to the DGL final, both sides at DGL's end and at DGL's final steps,
each pair's tma - DGL, and the DGL pipeline's own seed spread there), then the median and the
worst ratio per method over the list, and which workloads are behind at equal time or steps
by more than DGL's spread; and which matmul path tma ran (its runs' warnings).
"""
import argparse
import json
import os
import sys


# the DGL pipeline's rounds.jsonl keys and the names tma records the same metric under
DGL_METRICS = (("val_mrr", "mrr"), ("val_acc", "accuracy"), ("val_micro_f1", "micro_f1"))


def load_tma(d, metric=None):
    """[(elapsed_s, mean steps per trainer, val, train_loss, eval_s, eval_cpu_s, check)] of a
    tma run (check: a validation between rounds, --val-check-interval). With `metric` (tma's
    name of the DGL pipeline's metric), val is that metric from each validation's `all`, not the
    one tma selected its model by (for 2 classes tma's auto metric is roc_auc, the DGL pipeline
    reports accuracy): a pair compares one metric or the report stops naming the run."""
    out = []
    for line in open(os.path.join(d, "rounds.jsonl")):
        r = json.loads(line)
        st = r["steps"]
        val = r["val"]
        if val["value"] is None:
            continue
        v = val["value"]
        if metric is not None and val.get("metric") != metric:
            v = val.get("all", {}).get(metric)
            if v is None:
                sys.exit(f"error: {d}/rounds.jsonl: round {r.get('round')} validated {val.get('metric')!r} "
                         f"and did not record {metric!r}, the DGL pipeline's metric: rerun it with "
                         f"--metric {metric}")
        out.append((r["elapsed_s"], sum(st) / max(1, len(st)), v, r.get("train_loss"),
                    r.get("eval_s"), r.get("eval_cpu_s"), bool(r.get("check"))))
    return out


def dgl_metric(d):
    """tma's name of the metric a dgl_tma.py run validated (None when it recorded none)."""
    for line in open(os.path.join(d, "rounds.jsonl")):
        r = json.loads(line)
        for key, name in DGL_METRICS:
            if r.get(key) is not None:
                return name
    return None


def load_dgl(d):
    """The same for a dgl_tma.py run (rounds with a skipped evaluation are left out)."""
    out = []
    for line in open(os.path.join(d, "rounds.jsonl")):
        r = json.loads(line)
        v = next((r[k] for k, _ in DGL_METRICS if r.get(k) is not None), None)
        if v is None:
            continue
        st = r["steps_per_trainer"]
        st = [s for s in st if s] or [0]  # the coordinator's own row is 0
        out.append((r["elapsed_s"], sum(st) / len(st), v, r.get("train_loss"), r.get("eval_s"), None))
    return out


def first_reach(curve, target):
    return next((t for t, _, v, *_ in curve if v >= target - 1e-12), None)


def at_time(curve, t):
    """Metric of the last round formed at or before time t (None before the first round)."""
    vals = [v for (e, _, v, *_) in curve if e <= t + 1e-9]
    return vals[-1] if vals else None


def best_by(curve, t):
    """Best metric validated at or before time t: the model each stack keeps and reports
    (both select the best-validated model; None before the first validation)."""
    vals = [v for (e, _, v, *_) in curve if e <= t + 1e-9]
    return max(vals) if vals else None


def at_steps(curve, s):
    """(metric, below, above) at s mean steps per trainer: interpolated linearly in steps
    between the last validation at or below s and the first above it, given as (steps, metric)
    (above None when s is past the curve's end; then the metric is the last one's; below None
    when s is before its first validation: no metric)."""
    pts = sorted((st, v) for (_, st, v, *_) in curve)
    lo = [p for p in pts if p[0] <= s + 1e-9]
    hi = [p for p in pts if p[0] > s + 1e-9]
    if not lo:
        return None, None, hi[0] if hi else None
    a = lo[-1]
    if not hi or a[0] >= s - 1e-9:
        return a[1], a, None
    b = hi[0]
    return a[1] + (b[1] - a[1]) * (s - a[0]) / (b[0] - a[0]), a, b


def fmt_steps(m):
    """`metric (interpolated between v1 at s1 and v2 at s2)` for the equal-steps column."""
    v, a, b = m
    if v is None:
        return f"- (first validation at {b[0]:.0f})" if b else "-"
    if b is None:
        return f"{v:.3f} (at {a[0]:.0f})"
    return f"{v:.3f} (between {a[1]:.3f} at {a[0]:.0f} and {b[1]:.3f} at {b[0]:.0f})"


def products_path(d):
    """What ran a tma run's dense products: its summary's `matmul_products` (f32, bf16-amx,
    bf16-avx512); for runs before that field, f32 when its warnings say medium fell back, else
    bf16-amx (the only bf16 path then)."""
    try:
        s = json.load(open(os.path.join(d, "summary.json")))
    except (OSError, ValueError):
        return None
    if s.get("matmul_products"):
        return s["matmul_products"]
    return "f32" if any("run in f32" in w for w in s.get("warnings", [])) else "bf16-amx"


def median(xs):
    xs = sorted(xs)
    k = len(xs)
    return None if not k else (xs[k // 2] if k % 2 else (xs[k // 2 - 1] + xs[k // 2]) / 2)


def summary(facts):
    """One row per workload and method, then the median and worst ratio per method."""
    def diff(pair):
        x, y = pair
        return None if x is None or y is None else x - y
    print("\n## Per workload and method\n")
    print("Pairs separated by `;`. The ratio is the DGL run's time to its final validation metric over "
          "tma's from its rounds (in brackets: with tma's checks between rounds); the median and the worst "
          "below use the rounds' figure.\n")
    print("| workload | method | tma sooner by, per pair | val @DGL's end tma / DGL | tma - DGL @DGL's end |"
          " kept model @DGL's end tma / DGL | val @DGL's final steps tma / DGL | tma - DGL @equal steps |"
          " DGL seed spread (final) | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    groups = {}
    for f in facts:
        w, m = f["stem"], "?"
        for meth in ("random-tma", "centralized", "super-tma", "psgd-pa"):
            if f["stem"].endswith("-" + meth):
                w, m = f["stem"][: -len(meth) - 1], meth
        groups.setdefault((w, m), []).append(f)
    per_method = {}
    behind_time, behind_steps, behind_kept = [], [], []
    for (w, m), fs in sorted(groups.items()):
        rs = [f["ratio"] for f in fs if f["ratio"] is not None]
        finals = [f["end"][1] for f in fs]
        spread = max(finals) - min(finals) if len(finals) > 1 else 0.0
        dt = [diff(f["end"]) for f in fs]
        ds = [diff(f["steps"]) for f in fs]
        per_method.setdefault(m, []).extend((r, w) for r in rs)
        # behind: every pair below DGL by more than DGL's own seed spread
        bt = all(d is not None and d < -spread for d in dt)
        bs = all(d is not None and d < -spread for d in ds)
        # the model each stack keeps and tests: its best validation by DGL's end
        bk = all(d is not None and d < -spread for d in (diff(f["best"]) for f in fs))
        if bk:
            behind_kept.append(f"{w} {m}")
        if bt:
            behind_time.append(f"{w} {m}")
        if bs:
            behind_steps.append(f"{w} {m}")
        verdict = "; ".join(x for x in (("behind at equal time" if bt else ""),
                                        ("kept model behind" if bk else ""),
                                        ("behind at equal steps" if bs else "")) if x) or "at or above (or within DGL's spread)"
        def ratio(r):
            return "-" if r is None else "not reached" if r == 0 else f"{r:.2f}x"
        ratios = "; ".join(f"{ratio(f['ratio'])} ({ratio(f['ratio_checks'])})" for f in fs)
        ends = "; ".join(f"{fmt(f['end'][0])} / {f['end'][1]:.3f}" for f in fs)
        steps = "; ".join(f"{fmt(f['steps'][0])} / {f['steps'][1]:.3f}" for f in fs)
        kept = "; ".join(f"{fmt(f['best'][0])} / {fmt(f['best'][1])}" for f in fs)

        def signed(xs):
            return "; ".join("-" if d is None else f"{d:+.3f}" for d in xs)
        print(f"| {w} | {m} | {ratios} | {ends} | {signed(dt)} | {kept} | {steps} | {signed(ds)} | {spread:.3f} | {verdict} |")
    print("\n## Over the list\n")
    print("| method | workloads | pairs | median ratio to the DGL final | worst (workload) | pairs not reached |")
    print("|---|---|---|---|---|---|")
    for m, rs in sorted(per_method.items()):
        ws = {w for _, w in rs}
        worst = min(rs) if rs else None
        med = median([r for r, _ in rs])
        print(f"| {m} | {len(ws)} | {len(rs)} | {fmt(med, 2)}x | "
              f"{'-' if worst is None else ('not reached' if worst[0] == 0 else f'{worst[0]:.2f}x')} "
              f"({'-' if worst is None else worst[1]}) | {sum(1 for r, _ in rs if r == 0)} |")
    print(f"\nBehind the DGL pipeline in both pairs by more than its seed spread: at equal time "
          f"{', '.join(behind_time) or 'none'}; at equal steps {', '.join(behind_steps) or 'none'}; "
          f"with the model each stack keeps (its best validation by DGL's end) {', '.join(behind_kept) or 'none'}.")
    paths = {f["products"] for f in facts if f["products"] is not None}
    names = {"f32": "f32", "bf16-amx": "bf16 on AMX tiles (medium)",
             "bf16-avx512": "bf16 on AVX512_BF16 dot products (medium; no AMX)"}
    print("\ntma's dense products: " + (names.get(next(iter(paths)), next(iter(paths))) if len(paths) == 1
                                       else "mixed or unknown (see each run's summary.json matmul_products)") + ".")


def fmt(x, nd=3):
    return "-" if x is None else f"{x:.{nd}f}"


def main():
    ap = argparse.ArgumentParser(
        description="Time-to-accuracy report for the runs bench/tta.sh wrote (markdown on stdout).")
    for name, what in [("budget", "training budget of each run, e.g. 60s"),
                       ("cores", "cores the runs shared"),
                       ("order", "run order, e.g. ABBA"),
                       ("seeds", "pair (pair N runs seed N on both sides) or same (seed 0)"),
                       ("sync-tma", "tma's averaging span, e.g. 10s"),
                       ("sync-dgl", "the DGL pipeline's averaging span, e.g. 10s")]:
        ap.add_argument("--" + name, help=what + " (header only)")
    ap.add_argument("root", nargs="?", default="bench/out/tta",
                    help="directory of the runs (default bench/out/tta)")
    ap.add_argument("--summary", action="store_true",
                    help="also one row per workload and method, and the median and worst over them")
    a = ap.parse_args()
    a_summary = a.summary
    opts = {k.replace("_", "-"): v for k, v in vars(a).items()
            if v is not None and k not in ("root", "summary")}
    root = a.root
    if not os.path.isdir(root):
        sys.exit(f"error: {root} is not a directory of bench/tta.sh runs (bench/tta.sh writes "
                 "bench/out/tta, or OUT=DIR)")
    runs = {}
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.isfile(os.path.join(d, "rounds.jsonl")):
            continue
        stem, side, n = name.rsplit("-", 2)
        runs.setdefault(stem, {}).setdefault(int(n), {})[side] = d
    print(f"# Time to accuracy: tma vs the DGL pipeline (budget {opts.get('budget', '?')}, "
          f"{opts.get('cores', '?')} cores, order {opts.get('order', '?')})\n")
    if "sync-tma" in opts:
        # tma's averaging ramp (--sync-ramp), as its runs' config.toml recorded it
        ramps = sorted({line.split("=")[1].strip()
                        for sides in runs.values() for s in sides.values() if "tma" in s
                        for line in open(os.path.join(s["tma"], "config.toml"))
                        if line.startswith("sync_ramp")})
        ramp = (f", the first span cut into {' / '.join(ramps)} rounds: --sync-ramp"
                if ramps and ramps not in (["0"], ["1"]) else "")
        print(f"Averaging every {opts['sync-tma']} (tma{ramp}) / {opts.get('sync-dgl', '?')} (DGL).\n")
    # tma's dropout per workload, as its runs' config.toml recorded it (the DGL pipeline: none)
    drops = {}
    for stem, sides in runs.items():
        for s in sides.values():
            if "tma" in s:
                for line in open(os.path.join(s["tma"], "config.toml")):
                    if line.startswith("dropout"):
                        drops.setdefault(line.split("=")[1].strip(), set()).add(stem.split("-")[0] + "-" + stem.split("-")[1])
    if drops:
        print("Dropout: tma " + "; ".join(f"{v} ({', '.join(sorted(w))})" for v, w in sorted(drops.items()))
              + "; the DGL pipeline 0.\n")
    if opts.get("seeds") == "pair":
        print("Seeds: pair N runs seed N on both sides.\n")
    elif opts.get("seeds") == "same":
        print("Seeds: every run seed 0.\n")
    print("| workload | pair | DGL final val (target) | DGL: time to target | tma: time to target, rounds / with checks | "
          "tma sooner by, rounds / with checks | val @20 s tma / DGL | val @40 s tma / DGL | val @DGL's end tma / DGL | "
          "best val by DGL's end tma / DGL | steps/trainer at end tma / DGL | val @DGL's final steps tma / DGL |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    curves, facts, metrics = [], [], set()
    for stem in sorted(runs):
        for n in sorted(runs[stem]):
            p = runs[stem][n]
            if "tma" not in p or "dgl" not in p:
                continue
            metric = dgl_metric(p["dgl"])
            a, b = load_tma(p["tma"], metric), load_dgl(p["dgl"])
            metrics.add(metric)
            if not a or not b:
                continue
            target = b[-1][2]
            rounds = [x for x in a if not x[6]]
            ta, tr, tb = first_reach(a, target), first_reach(rounds, target), first_reach(b, target)

            def ratio(t):
                return f"{tb / t:.2f}x" if t and tb else ("not reached" if t is None else "-")
            has_checks = any(x[6] for x in a)

            def both(x, y):
                # "rounds / with checks", one figure when the run made no checks
                return f"{x} / {y}" if has_checks else f"{x} (no checks)"
            t_end = b[-1][0]

            def at(curve, t):
                # a time past the budget has no value
                return at_time(curve, t) if t <= t_end + 1.0 else None
            sb = b[-1][1]
            sa = at_steps(a, sb)
            print(f"| {stem} | {n} | {target:.4f} | {fmt(tb, 1)} s | {both(fmt(tr, 1), fmt(ta, 1))} s | "
                  f"{both(ratio(tr), ratio(ta))} | "
                  f"{fmt(at(a, 20))} / {fmt(at(b, 20))} | {fmt(at(a, 40))} / {fmt(at(b, 40))} | "
                  f"{fmt(at_time(a, t_end))} / {target:.3f} | {fmt(best_by(a, t_end))} / {fmt(best_by(b, t_end))} | "
                  f"{a[-1][1]:.0f} / {sb:.0f} | "
                  f"{fmt_steps(sa)} / {target:.3f} |")
            curves.append((stem, n, a, b))
            facts.append(dict(stem=stem, n=n, ratio=(tb / tr if tr and tb else (0.0 if tr is None else None)),
                              ratio_checks=(tb / ta if ta and tb else (0.0 if ta is None else None)),
                              end=(at_time(a, t_end), target), steps=(sa[0], target),
                              best=(best_by(a, t_end), best_by(b, t_end)), dgl_best=max(v for _, _, v, *_ in b),
                              products=products_path(p["tma"])))
    print(f"\nBoth sides compared on the DGL pipeline's metric: {', '.join(sorted(m for m in metrics if m))} "
          "(read from each tma validation's `all`; for 2 classes tma's own default, roc_auc, is not one the "
          "DGL pipeline reports).")
    if a_summary:
        summary(facts)
    print("\nCurves (time s: steps/trainer: val; tma rounds also show eval wall s / eval core-s; "
          "a `c` after the time marks a check between rounds):\n")
    for stem, n, a, b in curves:
        print(f"- {stem} #{n} tma: " + " ".join(
            f"{t:.0f}{'c' if k else ''}:{s:.0f}:{v:.3f}({fmt(e, 1)}/{fmt(c, 1)})" for t, s, v, _, e, c, k in a))
        print(f"- {stem} #{n} DGL: " + " ".join(f"{t:.0f}:{s:.0f}:{v:.3f}" for t, s, v, *_ in b))


if __name__ == "__main__":
    main()
