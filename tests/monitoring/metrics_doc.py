#!/usr/bin/env python3
"""docs/metrics.md against /metrics: the page lists every family a daemon exposes, with its type
and labels, and nothing it never exposes.

One daemon on loopback runs every part that has metrics of its own: a share limit with demand
division (membership, share and demand families; alone, it goes solo after join_timeout), a
redis limit on a private redis-server (the Redis families), a state directory with a 1 s snapshot
interval (the state families, the snapshot age once one is written), a rule of the gRPC door with
detailed_metric (its detailed series, asked once over gRPC). It answers a decision on each
limit, then /metrics is read until the snapshot age shows, and compared with the page's tables:
  - a family exposed and not listed, or listed and never exposed, fails;
  - so does a type that differs, or a label seen on the samples that the row does not name (and
    the other way round).

usage: metrics_doc.py TOKENTRIAGE SOURCE_DIR
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from rlspb import load_messages  # noqa: E402
from ttcheck import check, free_port, summary, wait_for  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exposition import families  # noqa: E402

ROW = re.compile(r"^\|\s*`([a-zA-Z_:][a-zA-Z0-9_:]*)`\s*\|\s*([a-z]+)\s*\|([^|]*)\|")


def documented(path):
    """{name: (type, {label, ...})} from the page's table rows."""
    out = {}
    with open(path) as f:
        for line in f:
            m = ROW.match(line)
            if m:
                out[m.group(1)] = (m.group(2), set(re.findall(r"`([a-zA-Z_][a-zA-Z0-9_]*)`", m.group(3))))
    return out


def http_get(url):
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.read().decode()


def main():
    tt, src = sys.argv[1:3]
    if shutil.which("redis-server") is None:
        print("SKIP: redis-server not found (scripts/deps.sh installs it)", file=sys.stderr)
        return 77
    work = tempfile.mkdtemp(prefix="tt-metrics-doc-")
    procs = []
    try:
        os.mkdir(os.path.join(work, "state"), 0o700)
        redis_sock = os.path.join(work, "redis.sock")
        procs.append(subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", redis_sock, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for("redis-server's socket", lambda: os.path.exists(redis_sock), 10, procs)
        http, gossip = free_port(), free_port()
        sock, gsock = os.path.join(work, "tt.sock"), os.path.join(work, "grpc.sock")
        with open(os.path.join(work, "tt.yaml"), "w") as f:
            f.write(f"""server:
  socket: {sock}
  http: 127.0.0.1:{http}
  grpc: {gsock}
  state_dir: {work}/state
  snapshot_interval: 1s
  record: {{ file: {work}/traffic.ttr }}
governance:
  limits:
    - {{ id: team_rpm, attach: {{ level: team }}, type: rpm, amount: 600, period: 1m, store: share }}
    - {{ id: key_rpm, attach: {{ level: key }}, type: rpm, amount: 60, period: 1m, store: redis }}
    - {{ id: per_user, domain: d, descriptor: [{{ key: user }}], detailed_metric: true, type: rpm,
        amount: 60, period: 1m }}
shared_state:
  share: {{ node_id: solo, bind: 127.0.0.1:{gossip}, seeds: [], join_timeout: 1s, division: demand }}
  redis: {{ address: {redis_sock}, timeout: 200ms }}
""")
        log = open(os.path.join(work, "tt.log"), "w")
        procs.append(subprocess.Popen([tt, "serve", "-c", os.path.join(work, "tt.yaml")],
                                      stdout=log, stderr=log))
        base = f"http://127.0.0.1:{http}"

        def ready():
            try:
                return http_get(base + "/readyz") is not None
            except OSError:
                return False
        wait_for("the daemon to be ready", ready, 20, procs)
        for subject in ("team=t-1", "key=k-1"):
            r = subprocess.run([tt, "decide", "-s", sock, "--subject", subject], capture_output=True, text=True)
            check(r.returncode == 0, f"a decision on {subject} is answered ({r.stderr.strip()[:80]})")
        pb, _ = load_messages(os.path.join(src, "rls", "proto"), work)
        with grpc.insecure_channel("unix:" + gsock) as ch:
            call = ch.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                                  request_serializer=pb.RateLimitRequest.SerializeToString,
                                  response_deserializer=pb.RateLimitResponse.FromString)
            rq = pb.RateLimitRequest(domain="d")
            rq.descriptors.add().entries.add(key="user", value="u-1")
            check(call(rq, timeout=5).overall_code == pb.RateLimitResponse.OK,
                  "a gRPC decision on the detailed rule is answered")
        text = wait_for("a snapshot to be written (its age on /metrics)",
                        lambda: (lambda t: t if "tokentriage_state_snapshot_age_seconds " in t else None)(
                            http_get(base + "/metrics")), 20, procs)

        exposed = families(text)
        doc = documented(os.path.join(src, "docs", "metrics.md"))
        check(len(exposed) > 80 and len(doc) > 80,
              f"the scrape has {len(exposed)} families and the page {len(doc)} rows (both read)")
        for name in sorted(set(exposed) - set(doc)):
            check(False, f"{name} ({exposed[name][0]}) is on /metrics but not in docs/metrics.md")
        for name in sorted(set(doc) - set(exposed)):
            check(False, f"{name} is in docs/metrics.md but this daemon, which runs every part, never exposed it")
        wrong = 0
        for name in sorted(set(doc) & set(exposed)):
            (dtype, dlabels), (etype, elabels) = doc[name], exposed[name]
            if dtype != etype or dlabels != elabels:
                wrong += 1
                check(False, f"{name}: the page says {dtype} {sorted(dlabels)}, /metrics has {etype} {sorted(elabels)}")
        check(wrong == 0 and set(doc) == set(exposed),
              f"docs/metrics.md lists exactly the {len(exposed)} families /metrics exposes, with their types and labels")
    except Exception as e:  # a deadline, or a process that died
        check(False, f"{type(e).__name__}: {e}")
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)
    return summary("metrics_doc")


if __name__ == "__main__":
    sys.exit(main())
