#!/usr/bin/env python3
"""Plots of `vegas bench --report DIR` (DIR/report.json, format "vegas-report/1").

    python3 tools/plot_bench.py DIR/report.json DIR

writes four PNGs into DIR:
  tokens_per_s_vs_context.png  decode tokens/s against context, vanilla and every policy
  acceptance_by_position.png   acceptance probability of each draft position (Vegas paper, Fig. 4)
  tau_vs_ratio.png             tokens per round against the sparsity ratio (Fig. 8)
  gamma_ratio_heatmap.png      tokens/s over draft length x ratio for one policy (Fig. 13)

Exit status: 0 done; 2 bad arguments or a malformed report (the message names
the field); 3 matplotlib cannot be imported (the CLI then skips plotting).
"""
import json
import math
import sys

EXIT_BAD_REPORT = 2
EXIT_NO_MATPLOTLIB = 3
FORMAT = "vegas-report/1"
OUTPUTS = ("tokens_per_s_vs_context.png", "acceptance_by_position.png", "tau_vs_ratio.png",
           "gamma_ratio_heatmap.png")


class ReportError(Exception):
    """The report lacks a field or holds a value of the wrong kind."""


def _field(obj, key, where):
    if not isinstance(obj, dict):
        raise ReportError(f"{where}: expected an object")
    if key not in obj:
        raise ReportError(f"{where}: missing field '{key}'")
    return obj[key]


def _number(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ReportError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _numbers(value, where, length=None):
    if not isinstance(value, list) or not value:
        raise ReportError(f"{where}: expected a non-empty list of numbers")
    out = [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if length is not None and len(out) != length:
        raise ReportError(f"{where}: {len(out)} values where {length} were expected")
    return out


def _series(section, where, keys, length=None):
    """[(label, {key: numbers})] of section['series']."""
    series = _field(section, "series", where)
    if not isinstance(series, list) or not series:
        raise ReportError(f"{where}.series: expected a non-empty list")
    out = []
    for i, s in enumerate(series):
        w = f"{where}.series[{i}]"
        label = _field(s, "label", w)
        if not isinstance(label, str):
            raise ReportError(f"{w}.label: expected a string")
        out.append((label, {k: _numbers(_field(s, k, w), f"{w}.{k}", length) for k in keys}))
    return out


def load_report(path):
    """The report's plotted data, validated; raises ReportError naming the field at fault."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        raise ReportError(f"cannot read: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise ReportError(f"not JSON: {e}") from e
    if _field(report, "format", "report") != FORMAT:
        raise ReportError(f"format: expected '{FORMAT}', got {report.get('format')!r}")
    t = _field(report, "throughput", "report")
    contexts = _numbers(_field(t, "mean_contexts", "throughput"), "throughput.mean_contexts")
    throughput = _series(t, "throughput", ["tokens_per_s"], len(contexts))

    a = _field(report, "acceptance", "report")
    acceptance = _series(a, "acceptance", ["acceptance_by_position"])

    r = _field(report, "tau_vs_ratio", "report")
    ratios = _numbers(_field(r, "ratios", "tau_vs_ratio"), "tau_vs_ratio.ratios")
    tau = _series(r, "tau_vs_ratio", ["tau"], len(ratios))

    h = _field(report, "heatmap", "report")
    gammas = _numbers(_field(h, "gammas", "heatmap"), "heatmap.gammas")
    h_ratios = _numbers(_field(h, "ratios", "heatmap"), "heatmap.ratios")
    grid = _field(h, "tokens_per_s", "heatmap")
    if not isinstance(grid, list) or len(grid) != len(gammas):
        raise ReportError(f"heatmap.tokens_per_s: expected {len(gammas)} rows (one per gamma)")
    grid = [_numbers(row, f"heatmap.tokens_per_s[{i}]", len(h_ratios)) for i, row in enumerate(grid)]
    return {
        "report": report,
        "contexts": contexts,
        "throughput": throughput,
        "acceptance": acceptance,
        "acceptance_context": _number(_field(a, "context", "acceptance"), "acceptance.context"),
        "ratios": ratios,
        "tau": tau,
        "tau_context": _number(_field(r, "context", "tau_vs_ratio"), "tau_vs_ratio.context"),
        "gammas": gammas,
        "heat_ratios": h_ratios,
        "heat_grid": grid,
        "heat_label": str(h.get("label", "")),
        "heat_context": _number(_field(h, "context", "heatmap"), "heatmap.context"),
        "heat_vanilla": h.get("vanilla_tokens_per_s"),
    }


def _subtitle(report):
    parts = [str(report.get(k)) for k in ("model", "backend", "device") if report.get(k)]
    if "batch" in report:
        parts.append(f"batch {report['batch']}")
    if "new_tokens" in report:
        parts.append(f"{report['new_tokens']} new tokens")
    return ", ".join(parts)


def _finish(fig, ax, title, report, path):
    ax.set_title(f"{title}\n{_subtitle(report)}", fontsize=10)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot(data, out_dir):
    import os

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = data["report"]
    t = report["throughput"]
    paths = [os.path.join(out_dir, name) for name in OUTPUTS]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, s in data["throughput"]:
        style = {"color": "black", "linestyle": "--"} if label == "vanilla" else {}
        ax.plot(data["contexts"], s["tokens_per_s"], marker="o", label=label, **style)
    if max(data["contexts"]) >= 4 * min(data["contexts"]):
        ax.set_xscale("log", base=2)
    ax.set_xlabel("context (mean prompt tokens)")
    ax.set_ylabel("decode tokens/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    _finish(fig, ax, f"Decode throughput (γ {t.get('gamma')}, ratio {t.get('ratio')})", report,
            paths[0])
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, s in data["acceptance"]:
        p = s["acceptance_by_position"]
        ax.plot(range(1, len(p) + 1), p, marker="o", label=label)
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance probability")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    _finish(fig, ax, f"Acceptance by draft position (context {data['acceptance_context']:.0f})",
            report, paths[1])
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, s in data["tau"]:
        ax.plot(data["ratios"], s["tau"], marker="o", label=label)
    ax.set_xlabel("sparsity ratio (selected share of the KV)")
    ax.set_ylabel("τ (tokens per round)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    _finish(fig, ax, f"τ against ratio (context {data['tau_context']:.0f})", report, paths[2])
    plt.close(fig)

    grid, gammas, ratios = data["heat_grid"], data["gammas"], data["heat_ratios"]
    fig, ax = plt.subplots(figsize=(1.2 * len(ratios) + 3, 0.6 * len(gammas) + 2.5))
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(ratios)), [f"{r:g}" for r in ratios])
    ax.set_yticks(range(len(gammas)), [f"{g:g}" for g in gammas])
    ax.set_xlabel("ratio")
    ax.set_ylabel("γ")
    best = max((v, i, j) for i, row in enumerate(grid) for j, v in enumerate(row))
    top = max(max(row) for row in grid)
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=8,
                    color="black" if v > 0.6 * top else "white",
                    fontweight="bold" if (i, j) == best[1:] else "normal")
    fig.colorbar(im, ax=ax, label="decode tokens/s")
    vanilla = data["heat_vanilla"]
    extra = f", vanilla {vanilla:.0f} tok/s" if isinstance(vanilla, (int, float)) else ""
    ax.set_title(f"Tokens/s over γ × ratio: {data['heat_label']} (context "
                 f"{data['heat_context']:.0f}{extra})\n{_subtitle(report)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(paths[3], dpi=120)
    plt.close(fig)
    return paths


def main(argv):
    if len(argv) != 3:
        print("usage: plot_bench.py REPORT.json OUT_DIR", file=sys.stderr)
        return EXIT_BAD_REPORT
    report_path, out_dir = argv[1], argv[2]
    try:
        data = load_report(report_path)
    except ReportError as e:
        print(f"plot_bench: {report_path}: {e}", file=sys.stderr)
        return EXIT_BAD_REPORT
    try:
        import matplotlib  # noqa: F401  (checked before any plotting)
    except ImportError:
        print("plot_bench: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return EXIT_NO_MATPLOTLIB
    for path in plot(data, out_dir):
        print(f"plot_bench: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
