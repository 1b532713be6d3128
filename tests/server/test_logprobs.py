"""Token log-probabilities through vegas-server (CPU, embedded model): OpenAI
chat (logprobs + top_logprobs) through the official client, OpenAI
completions (logprobs n), llama.cpp's n_probs on /infill, plain and streamed.
Greedy answers: each token is its own most probable alternative, the
alternatives are ordered, the tokens spell the text, and a stream carries the
same entries as the whole answer."""
import json
import math
import os

import pytest

from server_process import ServerProcess
from test_server import post

SERVER = os.environ.get("VEGAS_SERVER")
pytestmark = pytest.mark.skipif(not SERVER, reason="VEGAS_SERVER is not set (run through ctest)")
openai = __import__("openai") if SERVER else pytest.importorskip("openai")


@pytest.fixture(scope="module")
def server():
    s = ServerProcess(SERVER, "--backend", "cpu", "--max-prompt-tokens", "512")
    yield s
    assert s.alive()
    assert s.stop() == 0


def sse(server, path, body):
    import http.client
    conn = http.client.HTTPConnection(server.host, server.port, timeout=300)
    conn.request("POST", path, json.dumps(dict(body, stream=True)),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    events = []
    for line in r.read().decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            events.append(json.loads(line[6:]))
    conn.close()
    return events


def check_greedy_entry(token, logprob, top):
    assert logprob <= 0 and math.isfinite(logprob)
    assert top[0] == (token, logprob), "greedy: the token is its own most probable alternative"
    assert all(a[1] >= b[1] for a, b in zip(top, top[1:]))


def test_chat_logprobs_through_the_client(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    msgs = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    r = client.chat.completions.create(model="vegas-code-22m", messages=msgs, max_tokens=8, temperature=0,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert 0 < len(content) <= 8
    for e in content:
        assert len(e.top_logprobs) == 3 and bytes(e.bytes).decode(errors="replace") == e.token
        check_greedy_entry(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs])
    assert "".join(e.token for e in content).startswith(r.choices[0].message.content[:1])
    plain = client.chat.completions.create(model="vegas-code-22m", messages=msgs, max_tokens=8, temperature=0)
    assert plain.choices[0].logprobs is None
    assert plain.choices[0].message.content == r.choices[0].message.content


def test_completion_logprobs_plain_and_streamed(server):
    body = {"prompt": "def add(a, b):\n", "max_tokens": 10, "temperature": 0, "logprobs": 2,
            "ignore_eos": True}
    status, whole = post(server, "/v1/completions", body)
    assert status == 200, whole
    lp = whole["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == 10 == len(lp["token_logprobs"]) == len(lp["top_logprobs"])
    assert "".join(lp["tokens"]) == whole["choices"][0]["text"]
    offsets = [0]
    for tok, value, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        assert len(top) <= 2 and max(top.values()) == value and top[tok] == value
        offsets.append(offsets[-1] + len(tok.encode()))
    assert lp["text_offset"] == offsets[:-1]
    streamed = {"tokens": [], "token_logprobs": [], "text_offset": []}
    for event in sse(server, "/v1/completions", body):
        choice = event["choices"][0]
        if choice["logprobs"] is not None:
            for key in streamed:
                streamed[key] += choice["logprobs"][key]
    assert streamed == {k: lp[k] for k in streamed}


def test_infill_n_probs(server):
    body = {"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\n", "n_predict": 6,
            "n_probs": 4, "temperature": 0}
    status, whole = post(server, "/infill", body)
    assert status == 200, whole
    probs = whole["completion_probabilities"]
    assert 0 < len(probs) <= 6
    for e in probs:
        assert len(e["top_logprobs"]) == 4
        check_greedy_entry(e["id"], e["logprob"],
                           [(t["id"], t["logprob"]) for t in e["top_logprobs"]])
    streamed = [e for ev in sse(server, "/infill", body) for e in ev.get("completion_probabilities", [])]
    assert streamed == probs


def test_infill_post_sampling_probs(server):
    """post_sampling_probs: the probabilities of the distribution each token was
    drawn from (greedy: the token alone, probability 1; top_k 3: at most 3)."""
    body = {"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\n", "n_predict": 6,
            "n_probs": 4, "post_sampling_probs": True, "temperature": 0}
    status, greedy = post(server, "/infill", body)
    assert status == 200, greedy
    for e in greedy["completion_probabilities"]:
        assert e["prob"] == 1.0 and [t["id"] for t in e["top_probs"]] == [e["id"]]
    status, sampled = post(server, "/infill", dict(body, temperature=0.8, top_k=3, seed=5))
    assert status == 200, sampled
    for e in sampled["completion_probabilities"]:
        top = e["top_probs"]
        assert 0 < e["prob"] <= 1 and len(top) <= 3 and e["id"] in [t["id"] for t in top]
        assert sum(t["prob"] for t in top) == pytest.approx(1.0, abs=1e-4)
