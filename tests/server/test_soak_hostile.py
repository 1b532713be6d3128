"""A CI-sized soak of vegas-server under every hostile client of the issue at
once (header flood, oversized chunked and gzip bodies, a combining-mark prompt,
100 slow sockets), then 64 normal requests that must all succeed. It prints the
server's RSS growth (run pytest with -s to see it) and bounds it."""
import concurrent.futures
import gzip
import http.client
import json
import os
import socket
import sys
import threading
import time

import pytest

from server_process import ServerProcess

SERVER = os.environ.get("VEGAS_SERVER")
pytestmark = pytest.mark.skipif(not SERVER, reason="VEGAS_SERVER is not set (run through ctest)")

MAX_BODY = 16 << 20


def exchange(server, head, pieces, timeout=60):
    """Sends a raw request (stopping quietly if the server closes) and returns
    the response status, or 0 if none came."""
    sock = socket.create_connection((server.host, server.port), timeout=timeout)
    try:
        try:
            sock.sendall(head)
            for piece in pieces:
                sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        data = b""
        while b"\r\n" not in data:
            try:
                part = sock.recv(4096)
            except (ConnectionResetError, socket.timeout):
                break
            if not part:
                break
            data += part
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    finally:
        sock.close()


def header_flood(server):
    line = b"X-Flood: " + b"a" * 8000 + b"\r\n"
    return exchange(server, b"GET /v1/models HTTP/1.1\r\n", (line for _ in range(4000)))


def chunked_body(server):
    body = json.dumps({"prompt": "a" * (MAX_BODY + (4 << 20)), "max_tokens": 1}).encode()
    piece = 1 << 16
    chunks = (b"%x\r\n" % len(body[i:i + piece]) + body[i:i + piece] + b"\r\n"
              for i in range(0, len(body), piece))
    return exchange(server, b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                    chunks)


def gzip_body(server):
    packed = gzip.compress(json.dumps({"prompt": "a" * (MAX_BODY + (2 << 20)),
                                       "max_tokens": 1}).encode(), compresslevel=9)
    return exchange(server, b"POST /v1/completions HTTP/1.1\r\nContent-Encoding: gzip\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(packed), [packed])


def combining_marks(server):
    body = json.dumps({"prompt": "a" + "\u0301\u0316" * 25000, "max_tokens": 1}).encode()
    return exchange(server, b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n"
                    % len(body), [body])


def normal_request(server, i):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
    try:
        conn.request("POST", "/v1/completions",
                     json.dumps({"prompt": f"def f{i}(x):", "max_tokens": 4}),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def test_hostile_soak_then_64_normal_requests_succeed():
    server = ServerProcess(SERVER, "--backend", "cpu", "--threads", "2", "--request-timeout", "4")
    try:
        start_rss = server.rss_mib()
        slow = [socket.create_connection((server.host, server.port), timeout=30)
                for _ in range(100)]
        stop = threading.Event()

        def drip():
            while not stop.is_set():
                for s in slow:
                    try:
                        s.sendall(b"X")
                    except OSError:
                        pass
                stop.wait(1.0)

        dripper = threading.Thread(target=drip)
        dripper.start()
        start = time.time()
        try:
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                attacks = {name: pool.submit(fn, server) for name, fn in [
                    ("header flood", header_flood), ("chunked body", chunked_body),
                    ("gzip body", gzip_body), ("combining marks", combining_marks)]}
                statuses = {name: f.result(timeout=120) for name, f in attacks.items()}
                peak_rss = server.rss_mib()
                normal = list(pool.map(lambda i: normal_request(server, i), range(64)))
        finally:
            stop.set()
            dripper.join()
            for s in slow:
                s.close()
        end_rss = server.rss_mib()
        print(f"\nsoak: {time.time() - start:.1f} s, RSS {start_rss:.0f} MiB -> peak "
              f"{peak_rss:.0f} -> {end_rss:.0f} MiB (+{end_rss - start_rss:.0f}); "
              f"attacks {statuses}", file=sys.stderr)
        assert statuses == {"header flood": 431, "chunked body": 413, "gzip body": 413,
                            "combining marks": 400}
        assert normal == [200] * 64
        assert server.alive()
        assert end_rss - start_rss < 256, "the attacks left memory behind"
    finally:
        assert server.stop() == 0
