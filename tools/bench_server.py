#!/usr/bin/env python3
"""Throughput of vegas-server under concurrent completion clients.

  tools/bench_server.py [--server build/bin/vegas-server] [--clients 16] [--requests 4]
                        [--max-tokens 64] [--mode vegas|vanilla] [--url http://host:port]

Starts the server on a free loopback port (unless --url is given), then runs
--clients threads, each sending --requests non-streaming /v1/completions
(greedy, ignore_eos so every request generates exactly --max-tokens tokens) with
its own prompt. Prints one JSON line: requests/s and generated tokens/s over the
wall time of the whole run, and the server's tau and acceptance from /metrics."""
import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
from server_process import ServerProcess  # noqa: E402

PROMPTS = ["def parse_args(argv):\n", "class LRUCache:\n", "import numpy as np\n\ndef normalize(",
           "def fibonacci(n):\n", "for i in range(10):\n", "def read_json(path):\n",
           "async def fetch(url):\n", "def merge_sort(items):\n", "class Stack:\n    def __init__(",
           "def is_prime(n):\n", "with open('data.csv') as f:\n", "def flatten(xs):\n",
           "def binary_search(a, x):\n", "import os\nimport sys\n\n", "def main():\n",
           "def tokenize(text):\n"]


def complete(host, port, prompt, max_tokens):
    conn = http.client.HTTPConnection(host, port, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True})
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = json.loads(r.read())
    conn.close()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data}")
    return data["usage"]["completion_tokens"]


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", default=os.path.join(root, "build", "bin", "vegas-server"))
    ap.add_argument("--url")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=4, help="requests per client")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--mode", default="vegas", choices=["vegas", "vanilla"])
    ap.add_argument("--backend", default="auto")
    args = ap.parse_args()

    server = None
    if args.url:
        u = urllib.parse.urlparse(args.url)
        host, port = u.hostname, u.port
    else:
        server = ServerProcess(args.server, "--mode", args.mode, "--backend", args.backend,
                               "--parallel", str(max(args.clients, 1)))
        host, port = server.host, server.port
    try:
        tokens = [0] * args.clients
        errors = []

        def client(i):
            try:
                for r in range(args.requests):
                    tokens[i] += complete(host, port, PROMPTS[(i + r) % len(PROMPTS)], args.max_tokens)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
        if errors:
            raise SystemExit(f"bench_server: {len(errors)} requests failed: {errors[0]}")
        n_requests = args.clients * args.requests
        m = server.metrics() if server else {}
        print(json.dumps({
            "clients": args.clients, "requests": n_requests, "max_tokens": args.max_tokens,
            "mode": args.mode if server else None, "seconds": round(seconds, 3),
            "requests_per_s": round(n_requests / seconds, 3),
            "tokens_per_s": round(sum(tokens) / seconds, 1),
            "tau": m.get("vegas_spec_tau"), "acceptance": m.get("vegas_spec_acceptance_rate"),
        }))
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    main()
