"""Starts build/bin/vegas-server on a free loopback port and stops it again:
shared by the server tests and tools/bench_server.py."""
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request


class ServerProcess:
    def __init__(self, binary, *args, env=None, startup_timeout=120):
        # $VEGAS_SERVER_EXTRA_ARGS: e.g. "--threads 1" for a run under TSan.
        extra = shlex.split(os.environ.get("VEGAS_SERVER_EXTRA_ARGS", ""))
        self.args = [binary, "--port", "0", *args, *extra]
        e = dict(os.environ)
        e.setdefault("OMP_WAIT_POLICY", "passive")
        e.update(env or {})
        # stderr is inherited: the server's messages show in the test log.
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, text=True, env=e)
        line = self.proc.stdout.readline()  # "vegas-server: listening on http://127.0.0.1:PORT ..."
        m = re.search(r"http://([0-9.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"vegas-server did not start: {line!r}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.url = f"http://{self.host}:{self.port}"
        deadline = time.time() + startup_timeout
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)

    def alive(self):
        return self.proc.poll() is None

    def rss_mib(self):
        """The server's resident memory now, MiB (0 once it has exited)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def stop(self):
        """SIGTERM; returns the exit code (0 = a clean shutdown)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def metrics(self, api_key=None):
        """GET /metrics as {sample name with labels: value}."""
        req = urllib.request.Request(self.url + "/metrics")
        if api_key:
            req.add_header("Authorization", "Bearer " + api_key)
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values
