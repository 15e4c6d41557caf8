#!/usr/bin/env python3
"""ctest server_doors: every way in on real daemons, each asked through its own client: the
decision socket (msgpack, the Python client), HTTP on the socket and on TCP, Envoy's gRPC on a unix
path and on TCP (Debian's python3-grpcio). They are one engine call (server/door.c): the same
decisions, counted on /metrics by door; and who may spend is the same on every door (SPEC §9): a
uid the socket refuses (server.allow_uids) is refused on every unix door and spends nothing over
loopback TCP (setpriv runs its clients), and over TCP only a bearer token of server.tokens_file
spends, and only the subjects it was granted.

usage: test_doors.py TOKENTRIAGE PROTO_DIR CLIENTS_DIR
"""

import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from rlspb import load_messages  # noqa: E402
from ttcheck import check, connectable, free_port, stop, summary, wait_for  # noqa: E402

RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH = "/grpc.health.v1.Health/Check"
PROXY = "proxy-token-0123456789abcdef"   # any team, any key
TEAM_A = "team-a-token-0123456789abcdef"  # team a, keys a-*
TOKENS = f"""\
tokens:
  - {{ name: proxy, token: {PROXY}, subjects: {{ team: ["*"], key: ["*"] }} }}
  - {{ name: team-a, token: {TEAM_A}, subjects: {{ team: [a], key: ["a-*"] }} }}
"""
LIMITS = """\
governance:
  limits:
    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 3, period: 1m }
    - { id: key_tpm, attach: { level: key }, type: tpm, amount: 100000, period: 8760h,
        burst: 100000 }
"""
# gRPC on a unix path (allow_uids), HTTP on TCP (tokens)
UNIX = """\
server:
  socket: {sock}
  socket_mode: 0666
  allow_uids: [0]
  http: 127.0.0.1:{port}
  http_decide: on
  tokens_file: {tokens}
  grpc: {grpc}
"""
# the socket alone, every uid let in: two clients of one pool
POOL = """\
server:
  socket: {sock}
  socket_mode: 0666
  http: ""
"""
# gRPC on TCP (tokens)
TCP = """\
server:
  socket: {sock}
  http: ""
  tokens_file: {tokens}
  grpc: 127.0.0.1:{grpc}
"""
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def unix_http(sock, target, method="GET"):
    """One HTTP/1.1 request on the decision socket: (status, body)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock)
    s.sendall(f"{method} {target} HTTP/1.1\r\nHost: tt\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def tcp_http(port, target, method="GET", token=PROXY):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, target, headers={"Authorization": f"Bearer {token}"} if token else {})
    r = c.getresponse()
    out = r.status, r.read().decode()
    c.close()
    return out


def metrics(sock):
    """/metrics as {'name{labels}': value}."""
    status, body = unix_http(sock, "/metrics")
    out = {}
    for line in body.splitlines():
        m = re.match(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def one_engine_call(sock, port, call, pb, Client):
    """The same limit decided through every door: each decision counted once, by its door."""
    with Client(sock) as c:
        for _ in range(2):
            check(c.decide({"team": "s"})["admit"], "socket: admitted")
    check(unix_http(sock, "/v1/decide?team=h1")[0] == 200, "HTTP on the socket: 200")
    check(tcp_http(port, "/v1/decide?team=h2")[0] == 200, "HTTP on TCP, with a token: 200")
    codes = []
    for _ in range(4):
        r = pb.RateLimitRequest(domain="edge")
        r.descriptors.add().entries.add(key="team", value="g")
        codes.append(call(r, timeout=5).overall_code)
    OK, OVER = pb.RateLimitResponse.OK, pb.RateLimitResponse.OVER_LIMIT
    check(codes == [OK, OK, OK, OVER], f"gRPC: three OK, then OVER_LIMIT ({codes})")
    m = metrics(sock)
    want = {
        'tokentriage_verdicts_total{door="socket",verdict="admit"}': 2,
        'tokentriage_verdicts_total{door="http",verdict="admit"}': 2,
        'tokentriage_verdicts_total{door="grpc",verdict="admit"}': 3,
        'tokentriage_verdicts_total{door="grpc",verdict="deny"}': 1,
        'tokentriage_decision_latency_seconds_count{door="socket"}': 2,
        'tokentriage_decision_latency_seconds_count{door="http"}': 2,
        'tokentriage_decision_latency_seconds_count{door="grpc"}': 4,
        'tokentriage_requests_total{door="grpc",op="decide"}': 4,
        'tokentriage_requests_total{door="socket",op="decide"}': 2,
    }
    for name, value in want.items():
        check(m.get(name) == value, f"/metrics {name} {value} ({m.get(name)})")


def as_nobody(*curl):
    """curl as uid 65534: (HTTP status or 0, body)."""
    out = subprocess.run(NOBODY + ["curl", "-sS", "-m", "10", "-w", "\n%{http_code}", *curl],
                         capture_output=True, text=True)
    body, _, code = out.stdout.rpartition("\n")
    return int(code or 0), body


GRPC_AS_NOBODY = """
import sys, grpc
sys.path.insert(0, sys.argv[2])
import rls_pb2 as pb
r = pb.RateLimitRequest(domain="edge")
r.descriptors.add().entries.add(key="key", value="root")
with grpc.insecure_channel("unix:" + sys.argv[1]) as ch:
    try:
        ch.unary_unary("%s", request_serializer=pb.RateLimitRequest.SerializeToString)(r, timeout=10)
        print("OK")
    except grpc.RpcError as e:
        print(e.code().name)
""" % RLS


def uids_hold_on_every_door(sock, port, gsock, pydir, Client):
    """Issue 34 item 4: uid 65534, refused on the socket (allow_uids: [0]), is refused on every
    unix door and spends nothing over loopback TCP: neither decide nor settle root's
    reservation."""
    with Client(sock) as c:
        d = c.decide({"key": "root"}, tokens=50000)
        left = d["tokens"][1]
    check(d["admit"] and d.get("reservation") and left == 50000,
          f"root reserves 50000 of key_tpm on the socket (remaining {left})")
    status, _ = as_nobody("--unix-socket", sock, "http://tt/v1/decide?key=root&tokens=1")
    check(status != 200, f"uid 65534 on the socket: refused ({status})")
    status, body = as_nobody(f"http://127.0.0.1:{port}/v1/decide?key=root&tokens=20000")
    check(status in (401, 403), f"uid 65534 over 127.0.0.1 /v1/decide: refused ({status} {body})")
    status, body = as_nobody("-X", "POST", f"http://127.0.0.1:{port}/v1/settle?"
                             f"reservation={d['reservation']}&actual=100000")
    check(status in (401, 403), f"uid 65534 over 127.0.0.1 /v1/settle of root's reservation: "
          f"refused ({status} {body})")
    status, body = as_nobody("-X", "POST", "-H", f"Authorization: Bearer {PROXY}",
                             f"http://127.0.0.1:{port}/v1/settle?"
                             f"reservation={d['reservation']}&actual=100000")
    check(status == 404, f"even with a token, the socket's reservation is not a token's to settle "
          f"({status} {body})")
    out = subprocess.run(NOBODY + [sys.executable, "-c", GRPC_AS_NOBODY, gsock, pydir],
                         capture_output=True, text=True, timeout=30)
    check(out.stdout.strip() == "PERMISSION_DENIED",
          f"uid 65534 on the gRPC unix socket: PERMISSION_DENIED ({out.stdout.strip()} "
          f"{out.stderr.strip()[-200:]})")
    with Client(sock) as c:
        after = c.decide({"key": "root"}, tokens=0)["tokens"][1]
        s = c.settle(d["reservation"], 50000)
    check(after == left, f"key_tpm's counter is as root left it ({after}, want {left})")
    check(s.get("settled") == 1 and not s.get("already_settled"),
          f"root's reservation is still root's to settle ({s})")


def grpc_over_tcp(port, pb, health_pb2):
    """gRPC on TCP decides only for a token of server.tokens_file, and only its subjects; the
    health check needs none (the kubelet's probe carries no token)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        call = ch.unary_unary(RLS, request_serializer=pb.RateLimitRequest.SerializeToString,
                              response_deserializer=pb.RateLimitResponse.FromString)

        def code(team, token):
            r = pb.RateLimitRequest(domain="edge")
            r.descriptors.add().entries.add(key="team", value=team)
            md = [("authorization", f"Bearer {token}")] if token else []
            try:
                return call(r, timeout=5, metadata=md).overall_code
            except grpc.RpcError as e:
                return e.code()

        OK = pb.RateLimitResponse.OK
        check(code("a", None) == grpc.StatusCode.UNAUTHENTICATED,
              "gRPC over TCP without a token: UNAUTHENTICATED")
        check(code("a", "not-a-token-of-this-daemon-1234") == grpc.StatusCode.UNAUTHENTICATED,
              "gRPC over TCP with an unknown token: UNAUTHENTICATED")
        check(code("b", TEAM_A) == grpc.StatusCode.PERMISSION_DENIED,
              "team a's token for team b: PERMISSION_DENIED")
        check(code("a", TEAM_A) == OK, "team a's token for team a: OK")
        check(code("b", PROXY) == OK, "the proxy's token for team b: OK")
        hc = ch.unary_unary(HEALTH, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        check(hc(health_pb2.HealthCheckRequest(), timeout=5).status ==
              health_pb2.HealthCheckResponse.SERVING, "the health check needs no token: SERVING")


# uid 65534 fills the reservation pool with large subjects, pipelined: a tpm decide each on a
# subject of 16 levels of 250-byte ids (~4 KiB a reservation; 16 MiB hold ~4,000)
FLOOD = """
import socket, sys
import msgpack
sock, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock)
pad = {f"l{k}": chr(97 + k) * 250 for k in range(1, 16)}
unp = msgpack.Unpacker(raw=False)
got = admitted = 0
for i in range(0, n, 100):
    batch = b"".join(msgpack.packb({"op": "decide", "seq": j, "v": 2, "tokens": 1,
                                    "subject": dict(pad, key=f"flood-{j}")}) for j in range(i, i + 100))
    s.sendall(batch)
    while got < i + 100:
        unp.feed(s.recv(1 << 20))
        for a in unp:
            got += 1
            admitted += bool(a.get("reservation"))
print(admitted)
"""


def one_client_cannot_flush_the_others(sock, Client):
    """Issue 34 item 9: a client (uid 65534) filling the reservation pool with large subjects
    must not evict another client's (root's) open reservation: a full pool takes from the
    client holding the most."""
    with Client(sock) as c:
        d = c.decide({"key": "keep"}, tokens=1000)
    check(bool(d.get("reservation")), "root holds a reservation")
    out = subprocess.run(NOBODY + [sys.executable, "-c", FLOOD, sock, "5000"],
                         capture_output=True, text=True, timeout=120)
    check(out.stdout.strip() == "5000", f"uid 65534's 5000 decides each reserved "
          f"({out.stdout.strip()} {out.stderr.strip()[-200:]})")
    m = metrics(sock)
    evicted = m.get('tokentriage_reservations_ended_total{reason="evicted"}', 0)
    check(evicted > 500, f"the pool was full: {evicted:.0f} evicted")
    with Client(sock) as c:
        try:
            s = c.settle(d["reservation"], 10)
        except Exception as e:  # noqa: BLE001
            s = {"error": str(e)}
    check(s.get("settled") == 1, f"root's reservation survived the flood and settles ({s})")


def start(tt, work, name, config, **where):
    """A daemon on the server section `config` (formatted with where) and LIMITS; (Popen, its
    log)."""
    cfg, log = os.path.join(work, f"{name}.yaml"), os.path.join(work, f"{name}.log")
    with open(cfg, "w") as f:
        f.write(config.format(**where) + LIMITS)
    return subprocess.Popen([tt, "serve", "-c", cfg], stdout=subprocess.DEVNULL,
                            stderr=open(log, "w")), log


def main():
    tt, proto_dir, clients = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    sys.path.insert(0, clients)
    from tokentriage_client import Client  # noqa: E402

    work = tempfile.mkdtemp(prefix="tt-doors-")
    os.chmod(work, 0o755)
    pb, health_pb2 = load_messages(proto_dir, work)
    tokens = os.path.join(work, "tokens.yaml")
    with open(tokens, "w") as f:
        f.write(TOKENS)
    sock, gsock = os.path.join(work, "tt.sock"), os.path.join(work, "grpc.sock")
    port = free_port()
    daemons = []
    channel = None
    try:
        daemons.append(start(tt, work, "unix", UNIX, sock=sock, port=port, grpc=gsock,
                             tokens=tokens))
        wait_for("the daemon's listeners",
                 lambda: connectable(sock) and connectable(gsock) and
                 connectable(("127.0.0.1", port)), procs=[daemons[0][0]])
        channel = grpc.insecure_channel("unix:" + gsock)
        call = channel.unary_unary(RLS, request_serializer=pb.RateLimitRequest.SerializeToString,
                                   response_deserializer=pb.RateLimitResponse.FromString)
        one_engine_call(sock, port, call, pb, Client)
        uids_hold_on_every_door(sock, port, gsock, os.path.join(work, "py"), Client)
        sock2, gport = os.path.join(work, "tcp.sock"), free_port()
        daemons.append(start(tt, work, "tcp", TCP, sock=sock2, grpc=gport, tokens=tokens))
        wait_for("the gRPC TCP listener", lambda: connectable(("127.0.0.1", gport)),
                 procs=[daemons[1][0]])
        grpc_over_tcp(gport, pb, health_pb2)
        sock3 = os.path.join(work, "pool.sock")
        daemons.append(start(tt, work, "pool", POOL, sock=sock3))
        wait_for("the pool daemon", lambda: connectable(sock3), procs=[daemons[-1][0]])
        one_client_cannot_flush_the_others(sock3, Client)
        m = metrics(sock2)
        name = 'tokentriage_request_errors_total{door="grpc",code="unauthenticated"}'
        check(m.get(name) == 2, f"/metrics {name} 2 ({m.get(name)})")
    except Exception as e:  # noqa: BLE001
        check(False, f"unexpected {type(e).__name__}: {e}")
    finally:
        if channel:
            channel.close()
        for daemon, log in daemons:
            stop(daemon, log)
        shutil.rmtree(work, ignore_errors=True)
    return summary("server doors")


if __name__ == "__main__":
    sys.exit(main())
