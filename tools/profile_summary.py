#!/usr/bin/env python3
"""Per-kernel time of one decode step from an `ncu --csv` run of bench_cuda_decode.

usage: profile_summary.py PROFILE.csv LABEL

ncu lists each kernel launch with its gpu__time_duration. A step is a repeating
sequence of launches; this finds the step length (the period of the kernel-name
sequence), then sums each kernel's time over the steps and divides by their
count. Kernels run one at a time under ncu, so the total is an upper bound of
the step's device time (no overlap from programmatic dependent launch).
"""
import csv
import re
import sys
from collections import OrderedDict


def main():
    path, label = sys.argv[1], sys.argv[2]
    with open(path) as f:
        lines = [l for l in f if l.startswith('"')]
    rows = list(csv.DictReader(lines))
    launches = []
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3}
        bare = r["Kernel Name"].replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
        name = re.sub(r"\(.*", "", bare).split("<")[0].split("::")[-1]
        launches.append((name, value * scale.get(unit, 1e-3)))
    if not launches:
        print(f"{label}: no kernels in {path}")
        return
    names = [n for n, _ in launches]
    period = len(names)
    for p in range(1, len(names) // 2 + 1):
        if all(names[i] == names[i + p] for i in range(len(names) - p)):
            period = p
            break
    steps = len(names) // period
    used = launches[: steps * period]
    per = OrderedDict()
    for name, us in used:
        t, n = per.get(name, (0.0, 0))
        per[name] = (t + us, n + 1)
    total = sum(t for t, _ in per.values()) / steps
    print(f"== {label}: {period} kernels per step, {steps} steps, {total:.1f} us of kernels per step")
    for name, (t, n) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        print(f"  {name:40s} x{n // steps:3d} {t / steps:8.1f} us  {t / n:6.2f} us each")


if __name__ == "__main__":
    main()
