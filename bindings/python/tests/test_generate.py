"""Generation: greedy tokens equal the C CLI's, streaming order, cancellation, options."""
import json
import os
import subprocess
import threading

import pytest

import vegas

PROMPT = "def read_config(path):\n"


def cli_generate(*args):
    cli = os.environ.get("VEGAS_CLI")
    if not cli:
        pytest.skip("VEGAS_CLI is not set (ctest sets it to the built `vegas`)")
    out = subprocess.run([cli, "generate", "--backend", "cpu", "--json", *args],
                         capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout)


def test_greedy_tokens_equal_the_cli(model):
    ref = cli_generate("--prompt", PROMPT, "--max-tokens", "24", "--ignore-eos")
    with model.session() as s:
        done = s.generate(PROMPT, max_tokens=24, ignore_eos=True)
    assert done.tokens == ref["tokens"]
    assert done.text == ref["text"]
    assert done.info.finish_reason == vegas.FinishReason.LENGTH
    assert done.info.n_generated == 24


def test_one_call_generate_equals_the_cli_text(model):
    ref = cli_generate("--prompt", "import os\n", "--max-tokens", "20")
    assert model.generate("import os\n", max_tokens=20) == ref["text"]


def test_streaming_order_matches_the_sequence(model):
    with model.session() as s:
        streamed = list(s.stream(PROMPT, max_tokens=16, ignore_eos=True))
        done = s.generate(PROMPT, max_tokens=16, ignore_eos=True)
    assert [t.id for t in streamed] == done.tokens
    assert "".join(t.text for t in streamed) == done.text
    assert "".join(model.stream(PROMPT, max_tokens=16, ignore_eos=True)) == done.text


def test_two_sequences_stream_in_their_own_order(model):
    events = []
    with model.session() as s:
        a = s.submit(PROMPT, max_tokens=12, ignore_eos=True, on_token=events.append)
        b = s.submit("class Stack:\n", max_tokens=8, ignore_eos=True, on_token=events.append)
        s.run()
        assert [e.id for e in events if e.seq == a] == s.tokens(a)
        assert [e.id for e in events if e.seq == b] == s.tokens(b)
        assert "".join(e.text for e in events if e.seq == b) == s.text(b)
        assert {e.seq for e in events[:2]} == {a, b}  # decoded together, not one after another


def test_prefill_first_schedule_gives_the_same_greedy_tokens(model):
    with model.session() as s:
        ref = [s.generate(p, max_tokens=8, ignore_eos=True).tokens
               for p in (PROMPT, "class Stack:\n")]
    with model.session(schedule="prefill_first") as s:
        a = s.submit(PROMPT, max_tokens=8, ignore_eos=True)
        b = s.submit("class Stack:\n", max_tokens=8, ignore_eos=True)
        s.run()
        assert [s.tokens(a), s.tokens(b)] == ref
    with pytest.raises(ValueError, match="Schedule"):
        model.session(schedule="sideways")


def test_callback_stops_the_sequence(model):
    seen = []
    with model.session() as s:
        done = s.generate(PROMPT, max_tokens=64, ignore_eos=True,
                          on_token=lambda t: seen.append(t) or len(seen) == 5)
    assert done.info.finish_reason == vegas.FinishReason.CALLBACK
    assert len(done.tokens) == 5


def test_cancel_from_another_thread(model):
    first = threading.Event()
    with model.session() as s:
        seq = s.submit(PROMPT, max_tokens=2000, ignore_eos=True,
                       on_token=lambda t: first.set())
        canceller = threading.Thread(target=lambda: (first.wait(60), s.cancel(seq)))
        canceller.start()
        s.run()  # ctypes drops the GIL inside the call: the other thread gets to cancel
        canceller.join()
        info = s.info(seq)
    assert info.finish_reason == vegas.FinishReason.CANCELLED
    assert 1 <= info.n_generated < 2000


def test_breaking_out_of_a_stream_releases_the_sequence(model):
    with model.session() as s:
        stream = s.stream(PROMPT, max_tokens=100, ignore_eos=True)
        first = next(stream)
        stream.close()
        with pytest.raises(vegas.VegasError) as err:
            s.info(first.seq)
        assert err.value.status == vegas.Status.NOT_FOUND


def test_callback_exception_is_raised_to_the_caller(model):
    def boom(token):
        raise KeyError("from the callback")
    with model.session() as s:
        with pytest.raises(KeyError, match="from the callback"):
            s.generate(PROMPT, max_tokens=8, on_token=boom)


def test_sampling_is_reproducible_per_seed(model):
    sampling = vegas.Sampling(temperature=0.8, top_k=40, top_p=0.95, seed=7)
    with model.session() as s:
        a = s.generate(PROMPT, max_tokens=16, ignore_eos=True, sampling=sampling).tokens
        b = s.generate(PROMPT, max_tokens=16, ignore_eos=True, sampling=sampling).tokens
        c = s.generate(PROMPT, max_tokens=16, ignore_eos=True,
                       sampling={"temperature": 0.8, "top_k": 40, "seed": 8}).tokens
    assert a == b and a != c


def test_stop_string_ends_the_text(model):
    with model.session() as s:
        full = s.generate(PROMPT, max_tokens=24, ignore_eos=True).text
        stop = full.strip()[:3]
        cut = s.generate(PROMPT, max_tokens=24, ignore_eos=True, stop=[stop])
    assert cut.info.finish_reason == vegas.FinishReason.STOP
    assert cut.text == full[:full.find(stop)]


def test_vegas_mode_reports_speculative_stats(model):
    with model.session(mode="vegas", gamma=4, policy="streaming") as s:
        done = s.generate(PROMPT, max_tokens=24, ignore_eos=True)
        stats = s.stats()
    assert len(done.tokens) == 24
    assert stats.gamma == 4 and stats.rounds > 0 and stats.drafted > 0
    assert stats.tokens_per_round == pytest.approx(stats.committed / stats.rounds)
    assert done.info.rounds > 0


# Token trees and a draft model through the binding: greedy output stays
# vanilla's; the model drafting for itself has every draft accepted.
def test_token_trees_and_a_draft_model_keep_the_greedy_tokens(model):
    with model.session() as s:
        ref = s.generate(PROMPT, max_tokens=24, ignore_eos=True).tokens
    with model.session(mode="vegas", tree_branches=2, tree_depth=2) as s:
        assert s.generate(PROMPT, max_tokens=24, ignore_eos=True).tokens == ref
    with model.session(mode="vegas", draft_model=model, draft_window=64) as s:
        done = s.generate(PROMPT, max_tokens=24, ignore_eos=True)
        stats = s.stats()
    assert done.tokens == ref
    assert stats.rounds > 0 and stats.accepted == stats.drafted


# The prefix cache through the binding: the second generation of a prompt
# prefills only its last pages (cache_stats), with the same tokens; off, none.
def test_prefix_cache_stats(model):
    prompt = "def add(a, b):\n    return a + b\n\n" * 20
    for cache in (1, 0):
        with model.session(prefix_cache=cache) as s:
            first = s.generate(prompt, max_tokens=8, ignore_eos=True)
            assert s.cache_stats() == (0, 0)
            second = s.generate(prompt, max_tokens=8, ignore_eos=True)
            hit, evicted = s.cache_stats()
        assert second.tokens == first.tokens
        assert (hit > 100) == bool(cache) and evicted == 0


# Logprobs through the binding: one entry per generated token, greedy tokens
# are their own most probable alternative, the alternatives are ordered
# log-probabilities, and the callback sees each token's entry as it commits.
def test_logprobs(model):
    with model.session() as s:
        seen = []
        seq = s.submit("def add(a, b):\n", max_tokens=6, ignore_eos=True, logprobs=True,
                       top_logprobs=3,
                       on_token=lambda tok: seen.append(s.logprobs(tok.seq)[-1].token))
        s.run()
        entries = s.logprobs(seq)
        assert [e.token for e in entries] == s.tokens(seq) == seen
        for e in entries:
            assert len(e.top) == 3 and e.top[0] == (e.token, e.logprob) and e.logprob <= 0
            assert e.top[0][1] >= e.top[1][1] >= e.top[2][1]
        plain = s.submit("x", max_tokens=1)
        s.run()
        with pytest.raises(vegas.VegasError):
            s.logprobs(plain)


def test_auto_gamma_from_a_named_profile(model, tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"format": "vegas-profile/1", "backend": "cpu", "buckets": [
        {"context_min": 0, "context_max": -1, "batch_min": 1, "batch_max": -1,
         "policy": "vegas", "gamma": 3, "ratio": 0.1}]}))
    with model.session(mode="vegas", gamma=0, ratio=0, policy="auto",
                       profile_path=profile) as s:
        done = s.generate(PROMPT, max_tokens=8, ignore_eos=True)  # fewer rounds than the warm-up
        stats = s.stats()
        assert s.switches() == []
    assert (done.info.gamma, done.info.switches) == (3, 0)
    assert done.info.ratio == pytest.approx(0.1)
    assert stats.switches == 0
    with pytest.raises(vegas.VegasError) as err:
        model.session(mode="vegas", gamma=0, profile_path=tmp_path / "missing.json")
    assert err.value.status == vegas.Status.IO


def test_python_selection_policy_is_called(model):
    class TopBudget(vegas.SelectPolicy):
        calls = 0

        def select(self, q):
            TopBudget.calls += 1
            best = sorted(range(len(q.scores)), key=q.scores.__getitem__, reverse=True)
            return sorted(best[:q.budget])

    with model.session(mode="vegas", select_policy=TopBudget(), gamma=4, min_tokens=4) as s:
        done = s.generate(PROMPT * 4, max_tokens=16, ignore_eos=True)
    assert len(done.tokens) == 16
    assert TopBudget.calls > 0
    with pytest.raises(ValueError, match="mode='vegas'"):
        model.session(select_policy=TopBudget())
