#!/usr/bin/env python3
"""What prompt lookup drafting (the policy "lookup") would accept, without running it.

Decodes the public prompts of one size greedily with vanilla decoding (the Python binding, CPU
by default), then replays each continuation round by round: a round proposes up to gamma tokens
by runtime/speculative/prompt_lookup.cpp's rule (the longest suffix of max_n..1 tokens that
occurred before; its latest `votes` occurrences vote token by token), keeps the proposal's prefix
that matches the continuation, and commits one token more (the verify pass's correction or bonus
token). Prints tau (tokens per round) and the share of rounds with a proposal for a few gammas,
for the policy's rule (4-grams, 8 votes) and for the latest occurrence alone (3-grams, 1 vote):
what a round of one verify pass would commit.

  VEGAS_LIBRARY=build/lib/libvegas.so.0 tools/lookup_tau.py --size 2048 --new-tokens 128
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bindings", "python"))
import vegas  # noqa: E402


def propose(context, gamma, max_n, votes):
    for n in range(max_n, 0, -1):
        if len(context) <= n:
            continue
        suffix = context[-n:]
        alive = [s for s in range(len(context) - n - 1, -1, -1)
                 if context[s:s + n] == suffix][:votes]  # latest first
        if not alive:
            continue
        drafts = []
        for j in range(gamma):
            nexts = [context[s + n + j] for s in alive if s + n + j < len(context)]
            if not nexts:
                break
            best = max(nexts, key=nexts.count)  # the first of equal counts: the latest's
            drafts.append(best)
            alive = [s for s in alive if s + n + j < len(context) and context[s + n + j] == best]
        return drafts
    return []


def replay(prompt, generated, gamma, max_n, votes):
    """(tau, share of rounds with a proposal) of lookup over one continuation."""
    t = rounds = proposed = 0
    while t < len(generated):
        proposal = propose(prompt + generated[:t], gamma, max_n, votes)
        kept = 0
        while (kept < len(proposal) and t + kept < len(generated)
               and proposal[kept] == generated[t + kept]):
            kept += 1
        rounds += 1
        proposed += bool(proposal)
        t += kept + 1
    return len(generated) / rounds, proposed / rounds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=os.path.join(HERE, "..", "models", "vegas-code-22m"))
    parser.add_argument("--prompts",
                        default=os.path.join(HERE, "..", "..", "shared", "bench",
                                             "prompts-public.jsonl"))
    parser.add_argument("--size", type=int, default=2048, help="the prompts' target_tokens")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--backend", default="cpu")
    a = parser.parse_args()
    prompts = [json.loads(line) for line in open(a.prompts)]
    prompts = [p for p in prompts if p["target_tokens"] == a.size]
    model = vegas.Model(a.model, backend=a.backend)
    ids = [model.tokenizer.encode(p["text"])[:a.size] for p in prompts]
    start = time.time()
    with model.session(mode="vanilla", max_batch=len(ids)) as session:
        seqs = [session.submit(i, max_tokens=a.new_tokens, sampling={"temperature": 0.0},
                               ignore_eos=True) for i in ids]
        session.run()
        generated = [session.tokens(s) for s in seqs]
    print(f"# {len(ids)} prompts of {a.size} tokens, {a.new_tokens} greedy tokens each "
          f"({time.time() - start:.0f} s)")
    for gamma in (4, 6, 8):
        for max_n, votes in ((4, 8), (3, 1)):
            runs = [replay(p, g, gamma, max_n, votes) for p, g in zip(ids, generated) if g]
            taus = [r[0] for r in runs]
            print(f"gamma {gamma} ngram {max_n}..1, {votes} votes: tau {sum(taus) / len(taus):.2f} "
                  f"(per prompt {min(taus):.2f}-{max(taus):.2f}), rounds with a proposal "
                  f"{sum(r[1] for r in runs) / len(runs):.0%}")


if __name__ == "__main__":
    main()
