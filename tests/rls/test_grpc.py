#!/usr/bin/env python3
"""ctest rls_grpc: Envoy's rate limit service on a real daemon, with Debian's python3-grpcio as
the client (not ours). The message classes come from the project's .proto files through protoc
--python_out at test time (python3-protobuf runs them); no stub generator is needed.

Then examples/proxy/envoy-grpc.yaml against examples/envoy-grpc.yaml: every descriptor the route's
rate_limits actions produce meets a limit of the example config.

usage: test_grpc.py TOKENTRIAGE PROTO_DIR CLIENTS_DIR EXAMPLES_DIR
"""

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import grpc
import yaml
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from rlspb import load_messages  # noqa: E402
from ttcheck import check, connectable, stop, summary, wait_for  # noqa: E402

DEADLINE_S = 15.0
RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH = "/grpc.health.v1.Health/Check"

CONFIG = """\
server:
  socket: {sock}
  http: ""
  grpc: {grpc}
  grpc_domains: [edge, tokens]
  grpc_charge_domains: [tokens]
governance:
  limits:
    - {{ id: team_rpm, attach: {{ level: team }}, type: rpm, amount: 3, period: 1m }}
    - {{ id: pair_rpm, attach: {{ levels: [generic_key, team] }}, type: rpm, amount: 2,
        period: 1m }}
    - {{ id: key_rpm, attach: {{ level: key }}, type: rpm, amount: 5000, period: 24h }}
    - {{ id: user_rpm, attach: {{ level: user }}, type: rpm, amount: 30, period: 1m }}
    - {{ id: tenant_tpm, attach: {{ level: tenant }}, type: tpm, amount: 100000, period: 1m,
        burst: 20000 }}
"""


def frame(ftype, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


def hpack_literal(headers):
    """Literal header fields without indexing, no Huffman: enough for short names and values."""
    out = b""
    for name, value in headers:
        out += b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()
    return out


def read_frame(s, buf):
    while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buf += chunk
    n = int.from_bytes(buf[:3], "big")
    return buf[3], buf[4], buf[9:9 + n], buf[9 + n:]


def reset_mid_call(path, message):
    """20 calls on one connection, each with headers and half its message, then RST_STREAM
    (CANCEL) on every one, then a PING: its ACK comes after the server has read the resets."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(DEADLINE_S)
    s.connect(path)
    body = b"\x00" + len(message).to_bytes(4, "big") + message
    out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0)
    head = hpack_literal([(":method", "POST"), (":scheme", "http"), (":path", RLS),
                          (":authority", "tt"), ("content-type", "application/grpc"),
                          ("te", "trailers")])
    ids = range(1, 41, 2)
    for sid in ids:
        out += frame(1, 4, sid, head) + frame(0, 0, sid, body[:len(body) // 2])
    for sid in ids:
        out += frame(3, 0, sid, (8).to_bytes(4, "big"))
    out += frame(6, 0, 0, b"resets!!")
    s.sendall(out)
    buf, answered = b"", 0
    while True:
        ftype, flags, payload, buf = read_frame(s, buf)
        if ftype == 1:
            answered += 1
        if ftype == 6 and flags & 1 and payload == b"resets!!":
            break
    s.close()
    check(answered == 0, f"20 calls reset mid-call: none answered ({answered})")


def envoy_descriptors(bootstrap):
    """(domain, [descriptor entries]) for every rate_limits entry of every route, with the
    values a request with x-team: t-1 gives the actions used there."""
    hcm = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    rl = next(f for f in hcm["http_filters"] if f["name"] == "envoy.filters.http.ratelimit")
    out = []
    for vh in hcm["route_config"]["virtual_hosts"]:
        for route in vh["routes"]:
            for limit in route["route"].get("rate_limits", []):
                entries = []
                for action in limit["actions"]:
                    if "generic_key" in action:
                        g = action["generic_key"]
                        entries.append((g.get("descriptor_key", "generic_key"), g["descriptor_value"]))
                    elif "request_headers" in action:
                        entries.append((action["request_headers"]["descriptor_key"], "t-1"))
                    else:
                        raise ValueError(f"an action the check does not know: {action}")
                out.append(entries)
    return rl["typed_config"]["domain"], out


def check_envoy_example(tt, pb, examples, work):
    with open(os.path.join(examples, "envoy-grpc.yaml")) as f:
        conf = yaml.safe_load(f)
    sock, gsock = os.path.join(work, "ex.sock"), os.path.join(work, "ex-grpc.sock")
    # http off: the example keeps the default 127.0.0.1:9464, which another daemon on the
    # machine (a test beside this one, an operator's) may hold; this check is about gRPC
    conf["server"].update(socket=sock, grpc=gsock, http="")
    cfg = os.path.join(work, "ex.yaml")
    with open(cfg, "w") as f:
        yaml.safe_dump(conf, f)
    with open(os.path.join(examples, "proxy", "envoy-grpc.yaml")) as f:
        domain, descs = envoy_descriptors(yaml.safe_load(f))
    daemon = subprocess.Popen([tt, "serve", "-c", cfg], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for("the example daemon", lambda: daemon.poll() is None and connectable(gsock))
        with grpc.insecure_channel("unix:" + gsock) as ch:
            call = ch.unary_unary(RLS, request_serializer=pb.RateLimitRequest.SerializeToString,
                                  response_deserializer=pb.RateLimitResponse.FromString)
            r = pb.RateLimitRequest(domain=domain)
            for entries in descs:
                d = r.descriptors.add()
                for k, v in entries:
                    d.entries.add(key=k, value=v)
            resp = call(r, timeout=5)
            names = [st.current_limit.name for st in resp.statuses]
            check(len(descs) >= 3 and all(names),
                  f"examples/envoy: each of the {len(descs)} descriptors meets a limit ({names})")
    finally:
        daemon.terminate()
        rc = daemon.wait(30)
        check(rc == 0, f"the example daemon stops cleanly (exit {rc})")


def main():
    tt, proto_dir, clients = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    examples = sys.argv[4]
    sys.path.insert(0, clients)
    from tokentriage_client import Client  # noqa: E402

    work = tempfile.mkdtemp(prefix="tt-grpc-")
    rls_pb2, health_pb2 = load_messages(proto_dir, work)
    pb = rls_pb2
    sock, gsock = os.path.join(work, "tt.sock"), os.path.join(work, "grpc.sock")
    cfg = os.path.join(work, "tt.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(sock=sock, grpc=gsock))
    daemon = subprocess.Popen([tt, "serve", "-c", cfg], stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(work, "serve.log"), "w"))
    channel = None
    try:
        wait_for("the daemon's sockets",
                 lambda: daemon.poll() is None and connectable(sock) and connectable(gsock))
        channel = grpc.insecure_channel("unix:" + gsock)
        call = channel.unary_unary(RLS, request_serializer=pb.RateLimitRequest.SerializeToString,
                                   response_deserializer=pb.RateLimitResponse.FromString)
        raw = channel.unary_unary(RLS)  # bytes in, bytes out
        OK, OVER = pb.RateLimitResponse.OK, pb.RateLimitResponse.OVER_LIMIT

        def req(domain, *descs, hits=0):
            """descs: (entries, per-descriptor hits_addend or None)"""
            r = pb.RateLimitRequest(domain=domain, hits_addend=hits)
            for entries, per in descs:
                d = r.descriptors.add()
                for k, v in entries:
                    d.entries.add(key=k, value=v)
                if per is not None:
                    d.hits_addend.value = per
            return r

        def code_of(fn):
            try:
                fn()
                return grpc.StatusCode.OK
            except grpc.RpcError as e:
                return e.code()

        def remaining(domain, entries):
            r = call(req(domain, (entries, 0)), timeout=5)
            return r.statuses[0].limit_remaining

        # health
        hc = channel.unary_unary(HEALTH, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                                 response_deserializer=health_pb2.HealthCheckResponse.FromString)
        check(hc(health_pb2.HealthCheckRequest(), timeout=5).status ==
              health_pb2.HealthCheckResponse.SERVING, "grpc.health.v1 Check: SERVING")
        check(code_of(lambda: hc(health_pb2.HealthCheckRequest(service="nope"), timeout=5)) ==
              grpc.StatusCode.NOT_FOUND, "an unknown health service: NOT_FOUND")

        # one entry, hits unset
        r = call(req("edge", ([("team", "t1")], None)), timeout=5)
        st = r.statuses[0]
        check(r.overall_code == OK and st.code == OK and st.current_limit.name == "team_rpm" and
              st.current_limit.requests_per_unit == 3 and
              st.current_limit.unit == pb.RateLimitResponse.RateLimit.MINUTE and
              st.limit_remaining == 2 and st.duration_until_reset.seconds == 20,
              f"one entry: OK, team_rpm 3/MINUTE, remaining 2, reset 20 s")
        hdrs = {h.key: h.value for h in r.response_headers_to_add}
        check("RateLimit" in hdrs and "Ratelimit-Policy" in hdrs,
              f"the disclosure headers travel in response_headers_to_add ({hdrs})")

        # compound: a combination
        r = call(req("edge", ([("generic_key", "chat"), ("team", "t1")], None)), timeout=5)
        check(r.statuses[0].current_limit.name == "pair_rpm" and r.statuses[0].limit_remaining == 1,
              "compound descriptor: pair_rpm, remaining 1")
        r = call(req("edge", ([("generic_key", "chat"), ("team", "t2")], None)), timeout=5)
        check(r.statuses[0].limit_remaining == 1, "another pair: its own counter")

        # several descriptors, one matching nothing
        r = call(req("edge", ([("team", "t3")], None), ([("path", "/x")], None),
                     ([("key", "k1")], None)), timeout=5)
        check(len(r.statuses) == 3 and r.overall_code == OK and
              not r.statuses[1].HasField("current_limit") and
              r.statuses[0].limit_remaining == 2 and r.statuses[2].limit_remaining == 4999,
              "several descriptors: a status each; no limit matched: OK without current_limit")

        # hits_addend 0 (= 1), 2, large
        call(req("edge", ([("team", "t4")], None), hits=0), timeout=5)
        check(remaining("edge", [("team", "t4")]) == 2, "hits_addend 0 costs one")
        call(req("edge", ([("team", "t5")], None), hits=2), timeout=5)
        check(remaining("edge", [("team", "t5")]) == 1, "hits_addend 2 costs two")
        r = call(req("edge", ([("team", "t6")], None), hits=2**32 - 1), timeout=5)
        check(r.overall_code == OVER and remaining("edge", [("team", "t6")]) == 3,
              "hits_addend 2^32-1: OVER_LIMIT, nothing spent")

        # OVER_LIMIT with statuses and headers, consuming nothing anywhere
        r = call(req("edge", ([("key", "k2")], None), ([("team", "t5")], None), hits=2), timeout=5)
        hdrs = {h.key: h.value for h in r.response_headers_to_add}
        check(r.overall_code == OVER and r.statuses[0].code == OK and r.statuses[1].code == OVER
              and r.statuses[1].limit_remaining == 0 and "Retry-After" in hdrs,
              f"OVER_LIMIT: per-descriptor codes, remaining 0 as envoy ratelimit answers an "
              f"OVER_LIMIT status, Retry-After ({list(hdrs)})")
        check(remaining("edge", [("key", "k2")]) == 5000, "the OVER_LIMIT spent nothing in key_rpm")

        # the token flow: check, then charge, including an overrun
        check(remaining("tokens", [("tenant", "a")]) == 20000, "check (hits_addend 0): 20000")
        r = call(req("tokens", ([("tenant", "a")], 18000)), timeout=5)
        check(r.overall_code == OK and r.statuses[0].limit_remaining == 2000, "charge 18000: OK")
        r = call(req("tokens", ([("tenant", "a")], 18000)), timeout=5)
        check(r.overall_code == OVER and r.statuses[0].limit_remaining == 0,
              "charge 18000 more: OVER_LIMIT, and charged")
        r = call(req("tokens", ([("tenant", "a")], 0)), timeout=5)
        check(r.overall_code == OVER, "the next check is OVER_LIMIT: the overrun was kept")

        # malformed calls: an error status each, nothing spent
        before = remaining("edge", [("team", "t7")])
        bad = [
            ("unknown domain", lambda: call(req("other", ([("team", "t7")], None)), timeout=5),
             grpc.StatusCode.NOT_FOUND),
            ("no descriptors", lambda: call(req("edge"), timeout=5), grpc.StatusCode.INVALID_ARGUMENT),
            ("an empty descriptor", lambda: call(req("edge", ([("team", "t7")], None), ([], None)),
                                                 timeout=5), grpc.StatusCode.INVALID_ARGUMENT),
            ("an empty value", lambda: call(req("edge", ([("team", "t7")], None), ([("team", "")], None)),
                                            timeout=5), grpc.StatusCode.INVALID_ARGUMENT),
            ("not protobuf", lambda: raw(b"\xff\xff\xff", timeout=5), grpc.StatusCode.INVALID_ARGUMENT),
            ("an oversized message",
             lambda: call(req("edge", ([("team", "t7")], None), ([("team", "x" * 70000)], None)),
                          timeout=5), grpc.StatusCode.RESOURCE_EXHAUSTED),
            ("an unknown method", lambda: channel.unary_unary("/x.Y/Z")(b"", timeout=5),
             grpc.StatusCode.UNIMPLEMENTED),
        ]
        for what, fn, want in bad:
            got = code_of(fn)
            check(got == want, f"{what}: {want.name} ({got.name})")
        check(remaining("edge", [("team", "t7")]) == before, "the malformed calls spent nothing")

        # a deadline that expires before the request is complete
        stream = channel.stream_unary(RLS, request_serializer=pb.RateLimitRequest.SerializeToString,
                                      response_deserializer=pb.RateLimitResponse.FromString)
        late = threading.Event()

        def slow():
            late.wait(2)
            yield req("edge", ([("team", "t8")], None))
        got = code_of(lambda: stream(slow(), timeout=0.2))
        late.set()
        check(got == grpc.StatusCode.DEADLINE_EXCEEDED, f"an expired deadline: DEADLINE_EXCEEDED ({got.name})")

        # a client that resets its streams mid-call: raw HTTP/2, so the order is certain
        reset_mid_call(gsock, req("edge", ([("team", "t8")], None)).SerializeToString())
        check(remaining("edge", [("team", "t8")]) == 3, "the expired and reset calls spent nothing")

        # 1,000 concurrent streams on one connection
        futs = [call.future(req("edge", ([("key", "k3")], None)), timeout=30) for _ in range(1000)]
        codes = [f.result().overall_code for f in futs]
        check(codes.count(OK) == 1000, f"1,000 concurrent calls: all OK ({codes.count(OK)})")
        check(remaining("edge", [("key", "k3")]) == 4000, "and each counted once: 5000 - 1000")

        # the socket and gRPC agree decision for decision on one arrival sequence
        rng = random.Random(7)
        seq = [rng.choice([1, 1, 200, 800, 2500]) for _ in range(60)]
        agree, rounds = True, {"admit": 0, "deny": 0}
        with Client(sock) as c:
            for i, tokens in enumerate(seq):
                s = c.decide({"tenant": "sock", "user": "sock"}, tokens=tokens)
                # the socket presents rpm limits cost 1 and tpm limits the tokens: so do these
                g = call(req("edge", ([("tenant", "grpc")], tokens), ([("user", "grpc")], 1)),
                         timeout=5)
                g_admit = g.overall_code == OK
                rounds["admit" if g_admit else "deny"] += 1
                if s["admit"] != g_admit:
                    agree = False
                    print(f"  arrival {i} ({tokens}): socket {s['verdict']} grpc {g.overall_code}")
        check(agree and rounds["admit"] and rounds["deny"],
              f"socket and gRPC agree on {len(seq)} arrivals ({rounds})")

        check_envoy_example(tt, pb, examples, work)
    except Exception as e:  # noqa: BLE001
        check(False, f"unexpected {type(e).__name__}: {e}")
    finally:
        if channel:
            channel.close()
        stop(daemon, os.path.join(work, "serve.log"))
        shutil.rmtree(work, ignore_errors=True)
    return summary("rls grpc")


if __name__ == "__main__":
    sys.exit(main())
