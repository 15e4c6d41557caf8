#!/usr/bin/env python3
"""ctest clients_python_gate: the Python client and its HTTP gate against a real daemon.

Starts `tokentriage serve` on a temporary socket with a 3-per-minute limit, then
clients/python/http_gate.py in front of it, and asks through HTTP as a caller would: three
requests pass with the rate headers, the fourth gets 429 with Retry-After, a tpm cost that can
never fit gets 413, a malformed subject is the caller's 400. With the daemon gone the gate fails
open by default and answers 503 with --fail closed.

usage: test_python_gate.py TOKENTRIAGE CLIENTS_DIR
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

FAILED = []
DEADLINE_S = 10.0

CONFIG = """\
server:
  socket: {sock}
  http: ""
governance:
  keys: {{ disclose_limits: true }}
  limits:
    - id: team_rpm
      attach: {{ level: team }}
      type: rpm
      amount: 3
      period: 1m
    - id: team_tpm
      attach: {{ level: team }}
      type: tpm
      amount: 100000
      period: 1m
      burst: 20000
"""


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def wait_for(what, fn):
    end = time.monotonic() + DEADLINE_S
    while not fn():
        if time.monotonic() > end:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)


def connectable(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def start_gate(clients, sock, *extra):
    p = subprocess.Popen([sys.executable, os.path.join(clients, "http_gate.py"), "--port", "0",
                          "--socket", sock, *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()  # "listening on 127.0.0.1:PORT"
    if not line.startswith("listening on "):
        p.kill()
        raise RuntimeError(f"http_gate.py did not start: {line!r}")
    return p, int(line.rsplit(":", 1)[1])


def get(port, headers):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.headers


def main():
    tt, clients = sys.argv[1], os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="tt-gate-")
    sock = os.path.join(work, "tt.sock")
    cfg = os.path.join(work, "tt.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(sock=sock))
    procs = []
    daemon = None
    try:
        daemon = subprocess.Popen([tt, "serve", "-c", cfg], stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(work, "serve.log"), "w"))
        procs.append(daemon)
        wait_for("the daemon's socket", lambda: daemon.poll() is None and connectable(sock))
        gate, port = start_gate(clients, sock)
        procs.append(gate)

        team = {"X-Team": "t-gate", "X-Tokens": "100"}
        for i in range(3):
            status, h = get(port, team)
            check(status == 200 and h.get("RateLimit") and h.get("Ratelimit-Policy"),
                  f"request {i + 1} of 3: 200 with RateLimit and Ratelimit-Policy ({status}, RateLimit {h.get('RateLimit')!r})")
        status, h = get(port, team)
        check(status == 429 and h.get("Retry-After", "").isdigit() and int(h["Retry-After"]) > 0,
              f"request 4: 429 with Retry-After ({status}, Retry-After {h.get('Retry-After')!r})")
        check("team_rpm" in (h.get("RateLimit") or ""), f"the 429 names team_rpm in RateLimit ({h.get('RateLimit')!r})")

        status, h = get(port, {"X-Team": "t-big", "X-Tokens": "50000"})
        check(status == 413, f"a tpm cost above the burst is unfittable: 413 ({status})")
        status, _ = get(port, {"X-Team": "t-long", "X-Api-Key": "k" * 300})
        check(status == 400, f"an id over 256 bytes is refused by the daemon: the gate answers 400 ({status})")

        daemon.send_signal(signal.SIGTERM)
        check(daemon.wait(DEADLINE_S) == 0, "the daemon exits 0 on SIGTERM")
        status, _ = get(port, team)
        check(status == 200, f"daemon gone, --fail open: 200 ({status})")
        closed, cport = start_gate(clients, sock, "--fail", "closed")
        procs.append(closed)
        status, h = get(cport, team)
        check(status == 503, f"daemon gone, --fail closed: 503 ({status})")
    except Exception as e:
        check(False, f"{type(e).__name__}: {e}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        if FAILED and os.path.exists(os.path.join(work, "serve.log")):
            print(open(os.path.join(work, "serve.log")).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'FAILED' if FAILED else 'passed'}: python client and HTTP gate ({len(FAILED)} failure(s))")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
