"""`vegas tune --quick` and `vegas bench --report --quick` on the embedded model
(CPU): the profile is well-formed vegas-profile/1, each bucket holds the
argmax of its own sweep and the sweep followed the three steps; the report JSON
is written (and plotted when matplotlib is there); bad input fails with a
message and a non-zero exit."""
import json
import os
import shutil
import subprocess

import pytest

CLI = os.environ.get("VEGAS_CLI")
SOURCE_DIR = os.environ.get("VEGAS_SOURCE_DIR",
                            os.path.join(os.path.dirname(__file__), "..", ".."))
pytestmark = pytest.mark.skipif(not CLI or not os.path.exists(CLI),
                                reason="VEGAS_CLI is not set (run through ctest)")

RATIOS = [0.1, 0.3]
GAMMAS = [2, 3]
LARGE_GAMMA = 4
CANDIDATES = ["vegas:0.5", "streaming", "lookup"]


def run(*args, timeout=300):
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def write_prompts(path):
    """Real code, so that drafts get accepted: the repository's own Python tools."""
    with open(path, "w") as out:
        for name in ("plot_bench.py", "make_fixtures.py", "bench_server.py", "tau_check.py"):
            with open(os.path.join(SOURCE_DIR, "tools", name)) as f:
                out.write(json.dumps({"text": f.read()}) + "\n")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune")
    prompts = d / "prompts.jsonl"
    write_prompts(prompts)
    profile, sweep = d / "out" / "profile.json", d / "sweep.json"
    r = run("tune", "--backend", "cpu", "--quick", "--prompts", str(prompts),
            "--contexts", "192,640", "--context-edges", "512",
            "--candidates", ",".join(CANDIDATES), "--ratios", ",".join(map(str, RATIOS)),
            "--gammas", ",".join(map(str, GAMMAS)), "--large-gamma", str(LARGE_GAMMA),
            "--temperature", "0.6", "--top-k", "20", "--top-p", "0.95",
            "--out", str(profile), "--sweep-json", str(sweep))
    assert r.returncode == 0, r.stderr
    assert "[tune]" in r.stderr  # progress on stderr
    return json.loads(profile.read_text()), json.loads(sweep.read_text())


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def test_profile_schema(tuned):
    profile, _ = tuned
    assert profile["format"] == "vegas-profile/1"
    assert profile["model"] == "vegas-code-22m"
    assert profile["backend"] == "cpu"
    assert isinstance(profile["device"], str) and profile["device"]
    assert profile["created_by"].startswith("vegas tune ")
    buckets = profile["buckets"]
    assert [(b["context_min"], b["context_max"], b["batch_min"], b["batch_max"]) for b in buckets] == \
        [(0, 512, 1, 4), (512, -1, 1, 4)]
    for b in buckets:
        assert {"policy", "window_share", "gamma", "ratio", "tau", "tokens_per_s", "speedup"} <= set(b)
        assert f"{b['policy']}:{b['window_share']:g}" in CANDIDATES or b["policy"] in CANDIDATES
        assert 0.0 <= b["window_share"] <= 1.0
        assert isinstance(b["gamma"], int) and b["gamma"] in GAMMAS + [LARGE_GAMMA]
        assert b["ratio"] in RATIOS
        assert is_number(b["tau"]) and 1.0 <= b["tau"] <= b["gamma"] + 1
        assert is_number(b["tokens_per_s"]) and b["tokens_per_s"] > 0
        assert is_number(b["speedup"]) and b["speedup"] > 0
        # Vanilla is a candidate: where it beat every setting, auto mode starts with it.
        assert b["mode"] == ("vanilla" if b["speedup"] < 1 else "vegas")


def test_profile_holds_the_argmax_of_the_sweep(tuned):
    profile, sweep = tuned
    assert len(sweep["buckets"]) == len(profile["buckets"])
    for b, s in zip(profile["buckets"], sweep["buckets"]):
        assert (s["context_min"], s["context_max"]) == (b["context_min"], b["context_max"])
        best = max(s["points"], key=lambda p: p["tokens_per_s"])  # the first of equals
        assert (b["policy"], b["window_share"], b["gamma"], b["ratio"], b["tokens_per_s"], b["tau"]) == \
            (best["policy"], best["window_share"], best["gamma"], best["ratio"],
             best["tokens_per_s"], best["tau"])
        assert b["speedup"] == pytest.approx(best["tokens_per_s"] / s["vanilla_tokens_per_s"])


def test_sweep_follows_the_three_steps(tuned):
    _, sweep = tuned
    assert sweep["format"] == "vegas-tune-sweep/1"
    tol = sweep["tau_tolerance"]
    for s in sweep["buckets"]:
        points = {(p["label"], p["gamma"], p["ratio"]): p for p in s["points"]}
        assert len(points) == len(s["points"])  # every setting measured once
        for c in s["candidates"]:
            label = c["label"]
            # Lookup selects nothing, so only the first ratio is measured, in every step.
            ratios = RATIOS[:1] if label == "lookup" else RATIOS
            if label == "lookup":
                assert {p["ratio"] for p in s["points"] if p["label"] == label} == {RATIOS[0]}
            # Step 1: every ratio at the large gamma; the knee is the smallest within tol of the best tau.
            taus = [points[(label, LARGE_GAMMA, r)]["tau"] for r in ratios]
            knee = next(r for r, t in zip(ratios, taus) if t >= (1 - tol) * max(taus))
            assert c["knee_ratio"] == knee
            # Step 2: every gamma at the knee; the highest tokens/s.
            tps = [points[(label, g, knee)]["tokens_per_s"] for g in GAMMAS]
            assert c["step2_gamma"] == GAMMAS[tps.index(max(tps))]
            # Step 3 ends on a ratio measured at that gamma, no worse than the knee.
            end = points[(label, c["step2_gamma"], c["step3_ratio"])]
            assert end["tokens_per_s"] >= max(tps)


def test_tune_with_a_draft_model(tmp_path):
    """--draft-model adds the candidate "model" (the draft model drafting every
    round; here the embedded model drafts for itself): measured at the first
    ratio only, over the gammas; each bucket's setting stays the best of the
    model's own drafting, and the draft model's best point goes beside it as
    "draft_model" (where sessions with that draft start gamma)."""
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts)
    profile_path, sweep_path = tmp_path / "profile.json", tmp_path / "sweep.json"
    draft = os.path.join(SOURCE_DIR, "models", "vegas-code-22m")
    r = run("tune", "--backend", "cpu", "--quick", "--prompts", str(prompts), "--contexts", "192",
            "--candidates", "vegas:0.5", "--ratios", ",".join(map(str, RATIOS)),
            "--gammas", ",".join(map(str, GAMMAS)), "--large-gamma", str(LARGE_GAMMA),
            "--draft-model", draft, "--out", str(profile_path), "--sweep-json", str(sweep_path))
    assert r.returncode == 0, r.stderr
    assert "the draft model at gamma" in r.stderr
    profile, sweep = json.loads(profile_path.read_text()), json.loads(sweep_path.read_text())
    assert sweep["draft_model"] == draft
    assert len(profile["buckets"]) == len(sweep["buckets"]) == 1
    b, s = profile["buckets"][0], sweep["buckets"][0]
    own = [p for p in s["points"] if p["label"] != "model"]
    model = [p for p in s["points"] if p["label"] == "model"]
    assert own and model
    assert {p["ratio"] for p in model} == {RATIOS[0]}  # a draft model selects nothing
    assert {p["gamma"] for p in model} == set(GAMMAS + [LARGE_GAMMA])
    best_own = max(own, key=lambda p: p["tokens_per_s"])
    best_model = max(model, key=lambda p: p["tokens_per_s"])
    assert (b["policy"], b["gamma"], b["ratio"], b["tokens_per_s"]) == \
        (best_own["policy"], best_own["gamma"], best_own["ratio"], best_own["tokens_per_s"])
    d = b["draft_model"]
    assert (d["gamma"], d["tau"], d["tokens_per_s"]) == \
        (best_model["gamma"], best_model["tau"], best_model["tokens_per_s"])
    assert d["speedup"] == pytest.approx(best_model["tokens_per_s"] / s["vanilla_tokens_per_s"])
    assert s["draft_model_choice"]["gamma"] == d["gamma"]
    # Sessions with the draft model and automatic knobs take that profile from
    # the model directory, and decode: greedy, they equal vanilla.
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    for name in os.listdir(draft):
        if name != "vegas-profile.json":
            os.symlink(os.path.join(os.path.abspath(draft), name), model_dir / name)
    shutil.copy(profile_path, model_dir / "vegas-profile.json")
    r = run("bench", "--backend", "cpu", "--mode", "vegas", "--model", str(model_dir),
            "--prompts", str(prompts), "--context", "96", "--batch", "2", "--new-tokens", "8",
            "--policy", "auto", "--gamma", "0", "--ratio", "0", "--temperature", "0",
            "--draft-model", draft)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["vegas"]["identical_to_vanilla"] is True


def test_report_quick_writes_json_and_plots(tmp_path):
    out = tmp_path / "report"
    r = run("bench", "--backend", "cpu", "--report", str(out), "--quick")
    assert r.returncode == 0, r.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["format"] == "vegas-report/1" and report["backend"] == "cpu"
    t = report["throughput"]
    labels = [s["label"] for s in t["series"]]
    assert labels[0] == "vanilla" and len(labels) >= 2
    for s in t["series"]:
        assert len(s["tokens_per_s"]) == len(t["contexts"]) and all(x > 0 for x in s["tokens_per_s"])
    gamma = report["acceptance"]["gamma"]
    for s in report["acceptance"]["series"]:
        assert len(s["acceptance_by_position"]) == gamma
        assert all(0.0 <= p <= 1.0 for p in s["acceptance_by_position"])
    h = report["heatmap"]
    assert len(h["tokens_per_s"]) == len(h["gammas"])
    assert all(len(row) == len(h["ratios"]) for row in h["tokens_per_s"])
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "no plots" in r.stderr and "matplotlib" in r.stderr
    else:
        for name in ("tokens_per_s_vs_context.png", "acceptance_by_position.png",
                     "tau_vs_ratio.png", "gamma_ratio_heatmap.png"):
            assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


TINY_REPORT = ["bench", "--backend", "cpu", "--quick", "--contexts", "64",
               "--policies", "vegas:0.5", "--ratios", "0.5", "--gammas", "2"]


def test_report_with_a_draft_model(tmp_path):
    """--draft-model adds the series "model" (here the embedded model drafting
    for itself) to the throughput and acceptance plots; the ratio sweep and
    the heat map stay the policies' (a draft model selects nothing)."""
    draft = os.path.join(SOURCE_DIR, "models", "vegas-code-22m")
    r = run(*TINY_REPORT, "--report", str(tmp_path), "--no-plot", "--draft-model", draft)
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["draft_model"] == draft
    assert [s["label"] for s in report["throughput"]["series"]] == ["vanilla", "vegas:0.5", "model"]
    assert all(x > 0 for x in report["throughput"]["series"][2]["tokens_per_s"])
    assert [s["label"] for s in report["acceptance"]["series"]] == ["vegas:0.5", "model"]
    assert [s["label"] for s in report["tau_vs_ratio"]["series"]] == ["vegas:0.5"]
    assert report["heatmap"]["label"] != "model"


def test_report_without_python_still_writes_json(tmp_path):
    r = run(*TINY_REPORT, "--report", str(tmp_path), "--python", "/nonexistent/python3")
    assert r.returncode == 0, r.stderr
    assert "no plots" in r.stderr and "/nonexistent/python3" in r.stderr
    assert json.loads((tmp_path / "report.json").read_text())["format"] == "vegas-report/1"
    # Asked for explicitly, plotting must succeed.
    r = run(*TINY_REPORT, "--report", str(tmp_path), "--python", "/nonexistent/python3", "--plot")
    assert r.returncode != 0 and "cannot plot" in r.stderr


@pytest.mark.parametrize("args, message", [
    (["--contexts", "abc"], "--contexts"),
    (["--contexts", "0"], "--contexts 0"),
    (["--contexts", "100000"], "--contexts 100000"),
    (["--ratios", "1.5"], "--ratios"),
    (["--candidates", "vegas:2"], "window share"),
    (["--prompts", "/nonexistent/prompts.jsonl"], "/nonexistent/prompts.jsonl"),
])
def test_tune_bad_input(tmp_path, args, message):
    r = run("tune", "--backend", "cpu", "--quick", "--out", str(tmp_path / "p.json"), *args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert not (tmp_path / "p.json").exists()


def test_tune_unwritable_out_fails_before_measuring(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run("tune", "--backend", "cpu", "--quick", "--out", str(blocker / "profile.json"))
    assert r.returncode != 0
    assert "profile" in r.stderr and str(blocker) in r.stderr
    assert "[tune]" not in r.stderr  # nothing was measured


def test_tune_contexts_in_one_bucket_fail(tmp_path):
    r = run("tune", "--backend", "cpu", "--quick", "--contexts", "128,256",
            "--out", str(tmp_path / "p.json"))
    assert r.returncode != 0 and "one context per bucket" in r.stderr


def test_greedy_bench_reports_where_vegas_differs(tmp_path):
    """A greedy `vegas bench --mode vegas` says whether the tokens equal
    vanilla's and, when they do not, where they first differ; on the CPU they
    are identical (lossless), so first_difference is null."""
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts)
    r = run("bench", "--backend", "cpu", "--mode", "vegas", "--prompts", str(prompts),
            "--context", "96", "--batch", "2", "--new-tokens", "8", "--gamma", "3",
            "--temperature", "0")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["vegas"]
    assert v["identical_to_vanilla"] is True
    assert "first_difference" in v and v["first_difference"] is None


def test_bench_warmup_runs_in_the_timed_session(tmp_path):
    """--warmup-tokens runs the prompts once in the session that is then timed
    (graph captures and first-use costs stay out of the timed requests): the
    warm-up's time is reported, and the speculative statistics are the timed
    requests' alone, the same as a cold session's (greedy, fixed knobs: the
    same rounds), with the tokens still equal to vanilla's."""
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts)
    runs = {}
    for warmup in ("0", "6"):
        r = run("bench", "--backend", "cpu", "--mode", "vegas", "--prompts", str(prompts),
                "--context", "96", "--batch", "2", "--new-tokens", "8", "--gamma", "3",
                "--temperature", "0", "--warmup-tokens", warmup)
        assert r.returncode == 0, r.stderr
        runs[warmup] = json.loads(r.stdout)
    cold, warm = runs["0"], runs["6"]
    assert cold["warmup_seconds"] == 0 and cold["vegas"]["warmup_seconds"] == 0
    assert warm["warmup_seconds"] > 0 and warm["vegas"]["warmup_seconds"] > 0
    for key in ("rounds", "drafted", "accepted", "committed", "acceptance_by_position"):
        assert warm["vegas"][key] == cold["vegas"][key], key
    assert warm["vegas"]["identical_to_vanilla"] is True


def test_sampled_bench_over_seeds(tmp_path):
    """`vegas bench --seeds 3` repeats vanilla and Vegas with seeds 7, 8, 9: the
    first entry is the run's own speed-up and τ, the mean lies between the
    extremes, and --seeds is refused with --report (a single-run option)."""
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts)
    r = run("bench", "--backend", "cpu", "--mode", "vegas", "--prompts", str(prompts),
            "--context", "96", "--batch", "2", "--new-tokens", "8", "--gamma", "3",
            "--temperature", "0.8", "--seed", "7", "--seeds", "3")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["vegas"]
    s = v["over_seeds"]
    assert s["seeds"] == [7, 8, 9] and len(s["speedup"]) == len(s["tau"]) == 3
    assert s["speedup"][0] == v["speedup"] and s["tau"][0] == v["tau"]
    assert s["speedup_min"] <= s["speedup_mean"] <= s["speedup_max"]
    assert all(t > 0 for t in s["tau"])
    r = run("bench", "--backend", "cpu", "--report", str(tmp_path / "rep"), "--quick",
            "--seeds", "2")
    assert r.returncode != 0 and "--seeds" in r.stderr


def test_sampled_bench_reports_the_full_batch_rate(tmp_path):
    """The full-batch rate counts only steps in which every sequence took part:
    vanilla's sequences run in lockstep, so its rate is positive; Vegas's
    speed-up over those steps is the ratio of the two rates. The other steps'
    shares of time and tokens (the tail) are reported too."""
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts)
    r = run("bench", "--backend", "cpu", "--mode", "vegas", "--prompts", str(prompts),
            "--context", "96", "--batch", "2", "--new-tokens", "32", "--gamma", "3",
            "--temperature", "0.8", "--seed", "7")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    v = d["vegas"]
    assert d["decode_tokens_per_s_full_batch"] > 0
    assert v["decode_tokens_per_s_full_batch"] > 0
    assert v["speedup_full_batch"] == pytest.approx(
        v["decode_tokens_per_s_full_batch"] / d["decode_tokens_per_s_full_batch"])
    # The tail: the steps in which some sequence had finished or finished.
    # Vanilla's sequences all finish in its last step, its only tail step.
    assert 0 < d["tail_token_share"] < 0.1 and 0 < d["tail_time_share"] < 0.2
    assert 0 <= v["tail_token_share"] <= 1 and 0 <= v["tail_time_share"] <= 1


def test_tune_keeps_the_model_directorys_profile(tmp_path):
    """Without --out, tune refuses to overwrite a profile already in the model
    directory (the shipped one, measured on a GPU) before measuring anything;
    --replace allows it."""
    source = os.path.join(SOURCE_DIR, "models", "vegas-code-22m")
    model = tmp_path / "model"
    model.mkdir()
    for name in os.listdir(source):  # the weights linked, the profile copied
        if name == "vegas-profile.json":
            shutil.copy(os.path.join(source, name), model / name)
        else:
            os.symlink(os.path.join(os.path.abspath(source), name), model / name)
    shipped = (model / "vegas-profile.json").read_bytes()
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts)
    r = run("tune", "--backend", "cpu", "--quick", "--model", str(model), "--prompts", str(prompts))
    assert r.returncode != 0
    assert "vegas-profile.json exists" in r.stderr and "--replace" in r.stderr
    assert "[tune]" not in r.stderr  # refused before the sweep
    assert (model / "vegas-profile.json").read_bytes() == shipped
    r = run("tune", "--backend", "cpu", "--quick", "--model", str(model), "--prompts", str(prompts),
            "--replace", "--sweep-json", str(tmp_path / "sweep.json"))
    assert r.returncode == 0, r.stderr
    assert json.loads((model / "vegas-profile.json").read_text())["created_by"].startswith("vegas tune ")
