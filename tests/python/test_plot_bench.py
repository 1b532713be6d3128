"""tools/plot_bench.py on a small hand-made report.json: the four PNGs are
written and are PNG images of a plausible size; a malformed report fails with
exit status 2 and a message naming the field at fault."""
import copy
import json
import os
import struct
import subprocess
import sys

import pytest

SOURCE_DIR = os.environ.get("VEGAS_SOURCE_DIR",
                            os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SOURCE_DIR, "tools", "plot_bench.py")
OUTPUTS = ["tokens_per_s_vs_context.png", "acceptance_by_position.png", "tau_vs_ratio.png",
           "gamma_ratio_heatmap.png"]

REPORT = {
    "format": "vegas-report/1",
    "model": "vegas-code-22m", "backend": "cpu", "device": "test", "batch": 4, "new_tokens": 16,
    "throughput": {
        "contexts": [2048, 8192], "mean_contexts": [2000.0, 7900.5], "gamma": 6, "ratio": 0.07,
        "series": [
            {"label": "vanilla", "tokens_per_s": [120.0, 80.0]},
            {"label": "vegas:0.5", "tokens_per_s": [150.0, 110.0], "tau": [5.1, 4.8]},
            {"label": "streaming", "tokens_per_s": [140.0, 90.0], "tau": [5.0, 4.2]},
        ],
    },
    "acceptance": {
        "context": 7900.5, "gamma": 6, "ratio": 0.07,
        "series": [
            {"label": "vegas:0.5", "acceptance_by_position": [0.95, 0.9, 0.85, 0.8, 0.75, 0.7]},
            {"label": "streaming", "acceptance_by_position": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]},
        ],
    },
    "tau_vs_ratio": {
        "context": 7900.5, "gamma": 6, "ratios": [0.05, 0.1, 0.2],
        "series": [
            {"label": "vegas:0.5", "tau": [4.0, 5.0, 5.5], "tokens_per_s": [1, 2, 3]},
            {"label": "streaming", "tau": [3.5, 4.5, 5.2], "tokens_per_s": [1, 2, 3]},
        ],
    },
    "heatmap": {
        "context": 7900.5, "label": "vegas:0.5", "gammas": [2, 4, 6], "ratios": [0.05, 0.1],
        "tokens_per_s": [[100.0, 105.0], [120.0, 118.0], [110.0, 101.0]],
        "tau": [[2.5, 2.6], [4.0, 4.1], [5.0, 5.2]], "vanilla_tokens_per_s": 80.0,
    },
}


def plot(tmp_path, report, raw=None):
    path = tmp_path / "report.json"
    path.write_text(raw if raw is not None else json.dumps(report))
    return subprocess.run([sys.executable, SCRIPT, str(path), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)


def png_size(path):
    """(width, height) from the IHDR chunk; fails unless the file is a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_writes_four_pngs(tmp_path):
    pytest.importorskip("matplotlib", reason="tools/install-deps.sh installs matplotlib")
    r = plot(tmp_path, REPORT)
    assert r.returncode == 0, r.stderr
    for name in OUTPUTS:
        w, h = png_size(tmp_path / name)
        assert 300 <= w <= 4000 and 200 <= h <= 4000, (name, w, h)
        assert name in r.stdout
    # A whole PNG, not just its header: matplotlib reads it back.
    import matplotlib.image
    img = matplotlib.image.imread(str(tmp_path / "gamma_ratio_heatmap.png"))
    assert img.shape[0] > 100 and img.shape[1] > 100


@pytest.mark.parametrize("mutate, field", [
    (lambda r: r.pop("heatmap"), "missing field 'heatmap'"),
    (lambda r: r["throughput"]["series"][1]["tokens_per_s"].pop(), "throughput.series[1].tokens_per_s"),
    (lambda r: r["tau_vs_ratio"]["series"][0].__setitem__("tau", [1, "x", 2]), "tau_vs_ratio.series[0].tau[1]"),
    (lambda r: r["heatmap"]["tokens_per_s"].pop(), "heatmap.tokens_per_s"),
    (lambda r: r["acceptance"].__setitem__("series", []), "acceptance.series"),
    (lambda r: r.__setitem__("format", "vegas-report/0"), "format"),
])
def test_malformed_report_names_the_field(tmp_path, mutate, field):
    report = copy.deepcopy(REPORT)
    mutate(report)
    r = plot(tmp_path, report)
    assert r.returncode == 2
    assert field in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not any((tmp_path / name).exists() for name in OUTPUTS)


def test_not_json_and_missing_file(tmp_path):
    r = plot(tmp_path, None, raw="{not json")
    assert r.returncode == 2 and "not JSON" in r.stderr and "Traceback" not in r.stderr
    missing = subprocess.run([sys.executable, SCRIPT, str(tmp_path / "none.json"), str(tmp_path)],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "cannot read" in missing.stderr
