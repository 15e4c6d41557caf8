#!/usr/bin/env python3
"""ctest redis_outage: a Redis outage an operator can see (issue 30 item 4), on a real
redis-server SIGKILLed under a real daemon and started again on the same port.

While Redis is down: the log says so once (not once per failed call), `fleet` says `down` for
every redis limit (human and --json), and the doors say `unavailable` on a decision a
fail-closed limit denied because its store could not answer: the socket (code "unavailable",
read by the Python client and by the CLI, which is the C client), HTTP on the socket (503 and
the code), and gRPC (on a unix path) for a rule in Redis: the status UNAVAILABLE. A
fail-open limit is decided by its local fallback meanwhile. /readyz stays ready (docs/redis.md
says why). When Redis is back: one line, `armed` again, Redis deciding again.

The gRPC door on a store that cannot answer: a share limit that fails closed on a replica whose
membership has not joined (its seed never answers) is denied for want of its store as a Redis one
is; the door answers the gRPC status UNAVAILABLE naming the limit, which is what Envoy's
failure_mode_deny acts on (docs/clients.md), where it answered OVER_LIMIT; the socket says
unavailable there too.

usage: test_outage.py TOKENTRIAGE PROTO_DIR CLIENTS_DIR
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from rlspb import load_messages, rate_limit_call  # noqa: E402
import ttcheck  # noqa: E402
from ttcheck import check, connectable, free_port, summary, wait_for  # noqa: E402

SERVER = """\
server:
  socket: {sock}
  http: 127.0.0.1:{http}
  grpc: {grpc}
"""
REDIS = """\
governance:
  limits:
    - {{ id: closed_rpm, attach: {{ level: team }}, type: rpm, amount: 1000, period: 1m,
        store: redis, posture: {{ fail: closed }} }}
    - {{ id: open_rpm, attach: {{ level: key }}, type: rpm, amount: 1000, period: 1m,
        store: redis, posture: {{ fail: open }} }}
    - {{ id: edge_team, domain: edge, descriptor: [{{ key: team }}], type: rpm, amount: 1000,
        period: 1m, store: redis, posture: {{ fail: closed }} }}
shared_state:
  redis: {{ address: "127.0.0.1:{redis}", timeout: 100ms }}
"""
UNARMED = """\
governance:
  limits:
    - {{ id: team_share, attach: {{ level: team }}, type: rpm, amount: 1000, period: 1m,
        store: share, posture: {{ fail: closed }} }}
shared_state:
  share: {{ node_id: lonely, bind: "127.0.0.1:{gossip}", seeds: ["127.0.0.1:{seed}"],
           join_timeout: 10m }}
"""


class Redis:
    """One redis-server on a port of its own, no persistence; start() again reuses the port."""

    def __init__(self, work):
        self.dir, self.port, self.proc = work, free_port(), None

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("redis-server", lambda: connectable(("127.0.0.1", self.port)),
                 procs=[self.proc])

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def log_events(path):
    """The daemon's JSON log lines (a line that does not parse is skipped: server_logs holds
    that every one does)."""
    out = []
    with open(path, "rb") as f:
        for ln in f.read().split(b"\n"):
            try:
                out.append(json.loads(ln))
            except ValueError:
                pass
    return out


def count(path, msg_prefix):
    return len([e for e in log_events(path) if str(e.get("msg", "")).startswith(msg_prefix)])


class UnixHTTP(http.client.HTTPConnection):
    """HTTP on the decision socket, where /v1/decide is served (TCP serves it with tokens only)."""

    def __init__(self, path):
        super().__init__("tt", timeout=10)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.unix_path)


def http_get(at, target):
    """GET on the decision socket (a path) or on the HTTP listener (a port): (status, body)."""
    c = UnixHTTP(at) if isinstance(at, str) else http.client.HTTPConnection("127.0.0.1", at,
                                                                            timeout=10)
    c.request("GET", target)
    r = c.getresponse()
    out = r.status, r.read().decode()
    c.close()
    return out


def cli(tt, sock, *args):
    return subprocess.run([tt, *args, "-s", sock], capture_output=True, text=True, timeout=20)


def fleet_states(tt, sock):
    """{limit id: state} from `fleet --json`."""
    r = cli(tt, sock, "fleet", "--json")
    try:
        return {row["id"]: row.get("state") for row in json.loads(r.stdout)["limits"]}
    except (ValueError, KeyError):
        return {}


def grpc_code(call, pb, team):
    """The gRPC status code of one ShouldRateLimit for team, and the overall code when OK."""
    req = pb.RateLimitRequest(domain="edge")
    req.descriptors.add().entries.add(key="team", value=team)
    try:
        return grpc.StatusCode.OK, call(req, timeout=5).overall_code
    except grpc.RpcError as e:
        return e.code(), e.details()


LIMITS_ARMED = {"closed_rpm": "armed", "open_rpm": "armed", "edge_team": "armed"}


def while_down(tt, sock, http, Client, log):
    """Every door during the outage."""
    with Client(sock) as c:
        answers = [c.decide({"team": "t-1"}) for _ in range(25)]
    check(all(not a["admit"] and a["verdict"] == "deny" for a in answers),
          "socket: a fail-closed limit denies while Redis is down (25 of 25)")
    codes = {a.get("code") for a in answers}
    check(codes == {"unavailable"}, f"socket: ... with code \"unavailable\" ({codes})")
    check(all(getattr(a, "unavailable", None) is True for a in answers),
          "the Python client: Decision.unavailable is true")
    with Client(sock) as c:
        fb = c.decide({"key": "k-1"})
    check(fb["admit"] and not fb.get("code"),
          f"socket: a fail-open limit is decided by its local fallback ({dict(fb)})")

    r = cli(tt, sock, "decide", "--subject", "team=t-1", "--json")
    d = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
    check(d.get("code") == "unavailable", f"decide --json: code unavailable ({r.stdout.strip()})")
    r = cli(tt, sock, "decide", "--subject", "team=t-1")
    check("unavailable" in r.stdout and "do not retry the same cost" not in r.stdout,
          f"decide: says unavailable, not unfittable's advice ({r.stdout.strip()!r})")
    r = cli(tt, sock, "decide", "--subject", "team=t-1", "--exit-status")
    check(r.returncode == 3, f"decide --exit-status: 3, unavailable ({r.returncode})")

    status, body = http_get(sock, "/v1/decide?team=t-1")
    b = json.loads(body) if body.startswith("{") else {}
    check(status == 503 and b.get("unavailable") is True and b.get("code") == "unavailable",
          f"HTTP: 503 with unavailable and code ({status} {body.strip()})")

    states = fleet_states(tt, sock)
    check(states == {"closed_rpm": "down", "open_rpm": "down", "edge_team": "down"},
          f"fleet --json: every redis limit down ({states})")
    r = cli(tt, sock, "fleet")
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith(("closed_rpm", "open_rpm"))]
    check(len(rows) == 2 and all("down" in row for row in rows),
          f"fleet: each redis limit's row says down ({rows})")

    status, body = http_get(http, "/readyz")
    check(status == 200, f"/readyz stays ready while Redis is down ({status} {body.strip()})")
    check(count(log, "redis: store down") == 1,
          f"the log says the store is down once, after 30 failed decisions "
          f"({count(log, 'redis: store down')})")


class Daemon:
    """`tokentriage serve --log-format json` on SERVER + `limits` (formatted with `more`), its
    socket, HTTP and gRPC ports its own; wait() once its listeners answer."""

    def __init__(self, tt, work, name, limits, **more):
        self.sock = os.path.join(work, f"{name}.sock")
        self.http, self.grpc = free_port(), os.path.join(work, f"{name}.grpc")
        self.log = os.path.join(work, f"{name}.log")
        cfg = os.path.join(work, f"{name}.yaml")
        with open(cfg, "w") as f:
            f.write(SERVER.format(sock=self.sock, http=self.http, grpc=self.grpc) +
                    limits.format(**more))
        self.proc = subprocess.Popen([tt, "serve", "-c", cfg, "--log-format", "json"],
                                     stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        wait_for(f"{name}'s listeners", lambda: connectable(self.sock) and
                 connectable(self.grpc), procs=[self.proc])
        self.channel = grpc.insecure_channel(f"unix:{self.grpc}")


def redis_outage(tt, work, pb, Client):
    redis = Redis(work)
    redis.start()
    d = None
    try:
        d = Daemon(tt, work, "redis", REDIS, redis=redis.port)
        sock, log, call = d.sock, d.log, rate_limit_call(d.channel, pb)
        wait_for("the store up", lambda: count(log, "redis: store up") == 1, procs=[d.proc])
        with Client(sock) as c:
            a = c.decide({"team": "t-1"})
        check(a["admit"] and not a.get("code"), "Redis up: admitted, no code")
        check(fleet_states(tt, sock) == LIMITS_ARMED, "fleet: armed while Redis answers")
        code, overall = grpc_code(call, pb, "t-1")
        check(code == grpc.StatusCode.OK and overall == pb.RateLimitResponse.OK,
              f"gRPC: a rule in Redis answers OK ({code} {overall})")

        redis.kill()
        wait_for("the store down in the log", lambda: count(log, "redis: store down") >= 1,
                 procs=[d.proc])
        while_down(tt, sock, d.http, Client, log)
        code, detail = grpc_code(call, pb, "t-1")
        check(code == grpc.StatusCode.UNAVAILABLE and "edge_team" in str(detail),
              f"gRPC: the rule's store down is the status UNAVAILABLE naming it ({code} {detail})")

        redis.start()
        wait_for("the store up again", lambda: count(log, "redis: store up") >= 2, procs=[d.proc])
        wait_for("fleet armed again", lambda: fleet_states(tt, sock) == LIMITS_ARMED,
                 deadline_s=10, procs=[d.proc])
        with Client(sock) as c:
            a = c.decide({"team": "t-1"})
        check(a["admit"] and not a.get("code"), "Redis back: admitted again, no code")
        check(grpc_code(call, pb, "t-1")[0] == grpc.StatusCode.OK, "gRPC: OK again")
        check(count(log, "redis: store up") == 2 and count(log, "redis: store down") == 1,
              "the log: up, down, up, one line each")
        ev = [e for e in log_events(log) if str(e.get("msg", "")).startswith("redis: store down")]
        check(ev and ev[0].get("level") == "warn" and ev[0].get("detail"),
              f"the down line is a warning with the reason ({ev[:1]})")
    finally:
        stop(d, redis)


def unarmed_over_grpc(tt, work, pb, Client):
    """A share limit failing closed before membership has joined, asked over gRPC and the
    socket."""
    d = None
    try:
        d = Daemon(tt, work, "unarmed", UNARMED, gossip=free_port(), seed=free_port())
        code, detail = grpc_code(rate_limit_call(d.channel, pb), pb, "t-1")
        check(code == grpc.StatusCode.UNAVAILABLE and "team_share" in str(detail),
              f"gRPC: a store that cannot answer is the status UNAVAILABLE naming the limit "
              f"({code} {detail})")
        with Client(d.sock) as c:
            a = c.decide({"team": "t-1"})
        check(not a["admit"] and a.get("code") == "unavailable",
              f"socket: the unarmed share store's deny says unavailable ({dict(a)})")
        check(fleet_states(tt, d.sock) == {"team_share": "unarmed"}, "fleet: unarmed")
    finally:
        stop(d, None)


def stop(d, redis):
    """Stops the daemon (a clean exit checked, its log printed when a check failed) and Redis."""
    if d:
        d.channel.close()
        if d.proc.poll() is None:
            ttcheck.stop(d.proc, d.log)
    if redis and redis.proc and redis.proc.poll() is None:
        redis.kill()


def main():
    tt, proto_dir, clients = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    sys.path.insert(0, clients)
    from tokentriage import Client  # noqa: E402

    work = tempfile.mkdtemp(prefix="tt-outage-")
    try:
        pb, _ = load_messages(proto_dir, work)
        for part in (lambda: redis_outage(tt, work, pb, Client),
                     lambda: unarmed_over_grpc(tt, work, pb, Client)):
            try:
                part()
            except (TimeoutError, RuntimeError, ValueError) as e:
                check(False, f"{type(e).__name__}: {e}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summary("redis outage")


if __name__ == "__main__":
    sys.exit(main())
