#!/usr/bin/env python3
"""Medians of VEGAS_ROUND_TRACE=1 lines (stderr of `vegas bench` or any host
program): per drafter (sparse passes or prompt lookup), the rounds, their
batch and gamma, and the median milliseconds of each host section.

    VEGAS_ROUND_TRACE=1 vegas bench ... 2> trace.txt
    tools/round_trace_summary.py trace.txt
"""
import re
import statistics
import sys
from collections import defaultdict


def main(path):
    rounds = defaultdict(list)
    for line in open(path, errors="replace"):
        if not line.startswith("[vegas-round]"):
            continue
        words = line.split()[1:]
        fields = dict(zip(words[0::2], words[1::2]))
        drafter = fields.pop("drafter", "sparse")
        fields.pop("ms", None)
        rounds[drafter].append({k: float(v) for k, v in fields.items() if re.match(r"^[\d.]+$", v)})
    for drafter, rows in sorted(rounds.items()):
        keys = [k for k in rows[0] if k not in ("seqs", "gamma")]
        med = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in keys}
        seqs = statistics.median(r["seqs"] for r in rows)
        print(f"{drafter:>7}: {len(rows)} rounds, seqs {seqs:.0f}, " +
              " ".join(f"{k} {v:.3f}" for k, v in med.items()) + " (medians, ms)")


if __name__ == "__main__":
    main(sys.argv[1])
