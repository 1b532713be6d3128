#!/usr/bin/env python3
"""Summarises the kernel timelines of a -DVEGAS_TIMELINE build (kernels/timeline.cuh).

usage: timeline_summary.py OUTPUT...   (the stdout of bench_cuda_decode or bench_cuda_phases)

Each table is one kernel's last launch (qkv_rope_mma, the decode attention and
the o projection, gate/up and down of the step's last layer), one line per block with its marks
in ns. Printed per table and mark: min / median / max over the blocks, in us
after the qkv kernel's first stamp, so that the three kernels share one clock.
"""
import re
import statistics as st
import sys


def parse(path):
    """The tables of one output: name -> (first stamp, [marks in ns per block])."""
    tables, current = {}, None
    for line in open(path).read().split("\n"):
        m = re.match(r"timeline (\w+): (\d+) blocks, t0 (\d+)", line)
        if m:
            current = m.group(1)
            tables[current] = (int(m.group(3)), [])
            continue
        m = re.match(r"\s+(\d+)\s+sm (\d+)\s+ns(.*)cyc(.*)", line)
        if m and current:
            tables[current][1].append([int(x) for x in m.group(3).split()])
    return tables


def main():
    for path in sys.argv[1:]:
        tables = parse(path)
        if "tl_qkv" not in tables:
            print(f"== {path}: no timeline (not a -DVEGAS_TIMELINE build?)")
            continue
        base = tables["tl_qkv"][0]
        print("==", path)
        for name, (t0, rows) in tables.items():
            if not rows:
                continue
            off = t0 - base
            marks = []
            for k in range(len(rows[0])):
                v = [r[k] + off for r in rows if r[k] >= 0]
                if v:
                    marks.append(f"m{k}: {min(v) / 1000:.2f}/{st.median(v) / 1000:.2f}/"
                                 f"{max(v) / 1000:.2f}")
            print(f"  {name:10s} " + "  ".join(marks))


if __name__ == "__main__":
    main()
