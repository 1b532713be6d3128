#!/usr/bin/env python3
"""Medians of VEGAS_ROUND_TRACE=1 lines (stderr of `vegas bench` or any host
program): per drafter (sparse passes or prompt lookup), the rounds, their
batch and gamma, and the median milliseconds of each host section; then, by
how many sequences were live, the rounds' total time (round plus the time
before it) and the tokens they committed: where a run's tail goes.

    VEGAS_ROUND_TRACE=1 vegas bench ... 2> trace.txt
    tools/round_trace_summary.py trace.txt
"""
import re
import statistics
import sys
from collections import defaultdict


def main(path):
    rounds = defaultdict(list)
    by_live = defaultdict(lambda: [0, 0.0, 0.0])  # live seqs -> rounds, ms, tokens
    for line in open(path, errors="replace"):
        if not line.startswith("[vegas-round]"):
            continue
        words = line.split()[1:]
        fields = dict(zip(words[0::2], words[1::2]))
        drafter = fields.pop("drafter", "sparse")
        fields.pop("ms", None)
        row = {k: float(v) for k, v in fields.items() if re.match(r"^[\d.]+$", v)}
        rounds[drafter].append(row)
        band = by_live[int(row["seqs"])]
        band[0] += 1
        band[1] += row.get("round", 0.0) + row.get("between", 0.0)
        band[2] += row.get("committed", 0.0)
    for drafter, rows in sorted(rounds.items()):
        keys = [k for k in rows[0] if k not in ("seqs", "gamma", "committed")]
        med = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in keys}
        seqs = statistics.median(r["seqs"] for r in rows)
        print(f"{drafter:>7}: {len(rows)} rounds, seqs {seqs:.0f}, " +
              " ".join(f"{k} {v:.3f}" for k, v in med.items()) + " (medians, ms)")
    total_ms = sum(b[1] for b in by_live.values()) or 1.0
    for live, (n, ms, tokens) in sorted(by_live.items(), reverse=True):
        print(f"live {live:>3}: {n:5d} rounds {ms:9.1f} ms ({100 * ms / total_ms:5.1f}%) "
              f"{tokens:7.0f} tokens {tokens / ms if ms else 0:7.1f} tokens/ms")


if __name__ == "__main__":
    main(sys.argv[1])
