#!/usr/bin/env python3
"""ctest clients_python: the Python client against a real daemon.

Starts `tokentriage serve` on a temporary socket with a 3-per-minute limit and asks through
clients/python/tokentriage_client.py as a workload would: three decisions admit with the rate
headers, the fourth denies with Retry-After, a tpm cost that can never fit is unfittable, a
malformed subject is the daemon's error (TokentriageError, nothing decided), and with the
daemon gone the caller gets OSError (and decides itself whether to fail open or closed).

The answer forms (docs/protocol.md): a request without "v" (an old client) still gets the
rendered headers and no numbers; "v": 2 gets the numbers alone; "headers": true both, and the
Python renderer writes exactly the daemon's headers from the numbers, decision after decision;
"v": 3 is refused naming what this daemon speaks.

usage: test_python_client.py TOKENTRIAGE CLIENTS_DIR
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from ttcheck import check, connectable, summary, tear_down, wait_for  # noqa: E402

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
    - id: key_one
      attach: {{ level: key }}
      type: concurrency
      amount: 1
"""


def raw_call(path, request):
    """One request as any msgpack client would send it, without the client's "v"."""
    import msgpack
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5.0)
        s.connect(path)
        s.sendall(msgpack.packb(request, use_bin_type=True))
        unpacker = msgpack.Unpacker(raw=False)
        while True:
            unpacker.feed(s.recv(65536))
            for message in unpacker:
                return message


def answer_forms(sock, render_headers):
    subject = {"team": "t-forms"}
    old = raw_call(sock, {"op": "decide", "seq": 1, "subject": subject, "tokens": 10})
    check(old.get("headers", {}).get("RateLimit") and "policy" not in old and "requests" not in old,
          f"a request without v (protocol 1) gets the rendered headers, no numbers ({old})")
    v2 = raw_call(sock, {"op": "decide", "seq": 2, "v": 2, "subject": subject, "tokens": 10})
    check("headers" not in v2 and v2.get("policy", [None])[0] == "team_rpm"
          and len(v2.get("requests", [])) == 3 and len(v2.get("tokens", [])) == 3,
          f"v 2 gets the numbers and no header strings ({v2})")
    # admits, then the rpm limit's denial, then an unfittable cost: the daemon's map (headers
    # true) and the numbers of the same answer render alike
    for i, (team, tokens) in enumerate([("t-both", 10)] * 4 + [("t-unfit", 50000)]):
        both = raw_call(sock, {"op": "decide", "seq": 3 + i, "v": 2, "headers": True,
                               "subject": {"team": team}, "tokens": tokens})
        mine = render_headers(both)
        check(both.get("headers") and list(mine.items()) == list(both["headers"].items()),
              f"{both['verdict']}: the client's rendering is the daemon's ({mine} vs {both.get('headers')})")
    bad = raw_call(sock, {"op": "decide", "seq": 9, "v": 3, "subject": subject})
    err = bad.get("error", {})
    check(err.get("code") == "bad_value" and "protocol 3" in err.get("message", "")
          and bad.get("seq") == 9, f"v 3 is refused naming the versions served ({bad})")


def main():
    tt, clients = sys.argv[1], os.path.abspath(sys.argv[2])
    sys.path.insert(0, clients)
    from tokentriage_client import Client, TokentriageError, render_headers

    work = tempfile.mkdtemp(prefix="tt-py-")
    sock = os.path.join(work, "tt.sock")
    cfg = os.path.join(work, "tt.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(sock=sock))
    daemon = None
    try:
        daemon = subprocess.Popen([tt, "serve", "-c", cfg], stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(work, "serve.log"), "w"))
        wait_for("the daemon's socket", lambda: daemon.poll() is None and connectable(sock))
        with Client(sock, timeout=5.0) as c:
            check(c.ping() is not None, "ping answers")
            for i in range(3):
                d = c.decide({"team": "t-py"}, tokens=100)
                h = d.get("headers", {})
                check(d["admit"] and h.get("RateLimit") and h.get("Ratelimit-Policy"),
                      f"decision {i + 1} of 3 admits with RateLimit and Ratelimit-Policy ({d})")
            d = c.decide({"team": "t-py"}, tokens=100)
            retry = d.get("headers", {}).get("Retry-After", "")
            check(not d["admit"] and d["verdict"] == "deny" and retry.isdigit() and int(retry) > 0,
                  f"decision 4 denies with Retry-After ({d})")
            check(d["limit"] == "team_rpm", f"the denial names team_rpm ({d['limit']!r})")
            d = c.decide({"team": "t-big"}, tokens=50000)
            check(d["verdict"] == "unfittable" and d.get("code") == "quota_cost_unfittable",
                  f"a tpm cost above the burst is unfittable ({d})")
            try:
                c.decide({"team": "t", "key": "k" * 300}, tokens=1)
                check(False, "an id over 256 bytes raises TokentriageError")
            except TokentriageError as e:
                check(e.code == "bad_value" and "256" in e.message,
                      f"an id over 256 bytes raises TokentriageError naming it ({e.code}: {e.message})")
            try:
                c.decide({"team": "t-py"})
                check(False, "a tpm limit without tokens raises TokentriageError")
            except TokentriageError as e:
                check("tokens" in e.message, f"a tpm limit without tokens is the daemon's error ({e.message})")

        answer_forms(sock, render_headers)
        with Client(sock, timeout=5.0) as c:
            d = c.decide({"team": "t-settle"}, tokens=20000)
            check(d["admit"] and d.get("reservation", 0) > 0,
                  f"a tpm decision carries a reservation ({d.get('reservation')!r})")
            s1 = c.settle(d["reservation"], 5000)
            check(s1["settled"] == 1 and not s1["already_settled"], f"settle corrects the tpm limit ({s1!r})")
            s2 = c.settle(d["reservation"], 5000)
            check(s2["settled"] == 0 and s2["already_settled"], f"a repeated settle changes nothing ({s2!r})")
            try:
                c.settle(12345, 0)
                check(False, "a made-up reservation is refused")
            except TokentriageError as e:
                check(e.code == "unknown_reservation", f"a made-up reservation is refused ({e.code})")
            check(c.charge({"team": "t-settle"}, 100) == 1, "charge counts tokens on the tpm limit")

        daemon.send_signal(signal.SIGTERM)
        check(daemon.wait(DEADLINE_S) == 0, "the daemon exits 0 on SIGTERM")
        try:
            with Client(sock, timeout=1.0) as c:
                c.decide({"team": "t-py"}, tokens=1)
            check(False, "with the daemon gone decide raises OSError")
        except OSError:
            check(True, "with the daemon gone decide raises OSError: the caller chooses open or closed")
    except Exception as e:
        check(False, f"{type(e).__name__}: {e}")
    finally:
        tear_down(daemon, work, os.path.join(work, "serve.log"))
    return summary("python client")


if __name__ == "__main__":
    sys.exit(main())
