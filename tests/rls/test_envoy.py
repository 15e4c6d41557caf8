#!/usr/bin/env python3
"""ctest rls_envoy: envoyproxy/ratelimit's own tests, replayed against a real daemon that reads
envoy ratelimit's config files through server.grpc_config_dir (tests/rls/envoy: our own files in
its schema, expressing its tests' rules), with Debian's python3-grpcio as the client. Each
expected answer is the one envoy ratelimit's test asserts: overall_code, every status's code,
current_limit, limit_remaining, and whether duration_until_reset is there.

  - test/integration/integration_test.go: testBasicBaseConfig (both STOP_CACHE_KEY_INCREMENT_
    WHEN_OVERLIMIT settings), testShareThreshold, testConfigReload;
  - test/config/config_test.go's rule semantics, asked over gRPC (which rule a descriptor meets,
    its name, unlimited, wildcards, shadow mode, the descriptor's own limit);
  - test/service/ratelimit_test.go: global shadow mode, the custom response headers;
  - the README's examples 1 to 7, 9 and 11;
  - the docker-compose example's scripts (integration-test/scripts), as the descriptors Envoy
    sends for their requests (examples/envoy/proxy.yaml's actions).

usage: test_envoy.py TOKENTRIAGE PROTO_DIR FIXTURES_DIR [local|redis|share] [REDIS_SERVER]
The store of the rules is server.grpc_config_store: local by default; redis with a redis-server
of our own; share with a fleet of one (divisor 1: the same answers), then a fleet of two.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

import grpc
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from rlspb import load_messages  # noqa: E402
from ttcheck import check, connectable, free_port, stop, summary, wait_for  # noqa: E402

RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH = "/grpc.health.v1.Health/Check"
U32 = 2**32 - 1

CONFIG = """\
server:
  socket: {sock}
  http: "{http}"
  grpc: {grpc}
  grpc_config_dir: {rules}
  grpc_config_store: {store}
  grpc_stop_cache_key_increment_when_overlimit: {stop}
  grpc_shadow_mode: {shadow}
{extra}
{shared}
"""


class Daemon:
    """One tokentriage serving the rules of `rules` at a unix gRPC socket."""

    def __init__(self, tt, work, name, rules, store, shared, stop=True, shadow=False, extra=""):
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir)
        self.sock = os.path.join(self.dir, "tt.sock")
        self.gsock = os.path.join(self.dir, "grpc.sock")
        self.cfg = os.path.join(self.dir, "tt.yaml")
        self.http = f"127.0.0.1:{free_port()}"
        self.settings = dict(sock=self.sock, grpc=self.gsock, http=self.http, rules=rules, store=store,
                             stop="true" if stop else "false", shadow="true" if shadow else "false",
                             extra=extra, shared=shared)
        self.write()
        self.log = os.path.join(self.dir, "serve.log")
        self.proc = subprocess.Popen([tt, "serve", "-c", self.cfg], stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "w"))
        self.channel = None

    def write(self):
        with open(self.cfg, "w") as f:
            f.write(CONFIG.format(**self.settings))

    def start(self, pb):
        wait_for(f"{self.dir}'s sockets",
                 lambda: self.proc.poll() is None and connectable(self.gsock), procs=[self.proc])
        self.channel = grpc.insecure_channel("unix:" + self.gsock)
        self.call = self.channel.unary_unary(
            RLS, request_serializer=pb.RateLimitRequest.SerializeToString,
            response_deserializer=pb.RateLimitResponse.FromString)

    def metrics(self):
        with urllib.request.urlopen(f"http://{self.http}/metrics", timeout=5) as r:
            return r.read().decode()

    def reload(self, **settings):
        self.settings.update(settings)
        self.write()
        self.proc.send_signal(signal.SIGHUP)

    def close(self):
        if self.channel:
            self.channel.close()
        stop(self.proc, self.log, os.path.basename(self.dir))


def align(unit_s, need_s):
    """Waits, if needed, so that `need_s` seconds are left in the current window of `unit_s`:
    a sequence that fills a window must not see it roll over midway (envoy's windows are
    aligned to the epoch; its own tests are exposed to this, ours wait it out)."""
    left = lambda: unit_s - time.time() % unit_s  # noqa: E731
    if left() < need_s:
        wait_for(f"the next {unit_s} s window", lambda: left() > unit_s - 0.5,
                 deadline_s=need_s + 2)


def main():
    tt, proto_dir, fixtures = sys.argv[1], sys.argv[2], sys.argv[3]
    mode = sys.argv[4] if len(sys.argv) > 4 else "local"
    work = tempfile.mkdtemp(prefix="tt-envoy-")
    pb, health_pb = load_messages(proto_dir, work)
    OK, OVER = pb.RateLimitResponse.OK, pb.RateLimitResponse.OVER_LIMIT
    U = pb.RateLimitResponse.RateLimit
    redises, redis_ports = [], []

    def shared():
        """A daemon's shared_state: in redis mode a redis-server of its own (two daemons on one
        Redis would count the same keys: each test expects its daemon's counters alone)."""
        if mode == "redis":
            port = free_port()
            redis = subprocess.Popen([sys.argv[5] if len(sys.argv) > 5 else "redis-server",
                                      "--port", str(port), "--save", "", "--appendonly", "no"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            redises.append(redis)
            redis_ports.append(port)
            wait_for("redis-server", lambda: connectable(("127.0.0.1", port)), procs=[redis])
            return f"shared_state:\n  redis: {{ address: 127.0.0.1:{port}, timeout: 2s }}"
        if mode == "share":
            return ("shared_state:\n  share: {{ node_id: solo, bind: 127.0.0.1:{}, seeds: [], "
                    "join_timeout: 100ms }}").format(free_port())
        return ""

    # The rules as a ConfigMap mounts them: ..data -> a timestamped directory, symlinks to it.
    cm = os.path.join(work, "configmap")
    os.makedirs(os.path.join(cm, "..2026_01_01"))
    for name in sorted(os.listdir(os.path.join(fixtures, "config"))):
        shutil.copy(os.path.join(fixtures, "config", name), os.path.join(cm, "..2026_01_01", name))
        os.symlink(os.path.join("..data", name), os.path.join(cm, name))
    os.symlink("..2026_01_01", os.path.join(cm, "..data"))

    daemons = []
    try:
        stop_d = Daemon(tt, work, "stop", cm, mode, shared())  # STOP_CACHE_KEY_INCREMENT: true
        daemons.append(stop_d)
        default = Daemon(tt, work, "default", cm, mode, shared(), stop=False,
                         extra="  grpc_limit_headers: { limit: A-Ratelimit-Limit, "
                               "remaining: A-Ratelimit-Remaining, reset: A-Ratelimit-Reset }")
        daemons.append(default)
        for d in daemons:
            d.start(pb)

        def req(domain, *descs, hits=0):
            """descs: lists of (key, value), or (entries, hits_addend or None, limit or None)"""
            r = pb.RateLimitRequest(domain=domain, hits_addend=hits)
            for desc in descs:
                entries, per, limit = desc if isinstance(desc, tuple) else (desc, None, None)
                d = r.descriptors.add()
                for k, v in entries:
                    d.entries.add(key=k, value=v)
                if per is not None:
                    d.hits_addend.value = per
                if limit is not None:
                    d.limit.requests_per_unit, d.limit.unit = limit
            return r

        def ask(d, domain, *descs, hits=0):
            return d.call(req(domain, *descs, hits=hits), timeout=5)

        def status(st, code, rpu=None, unit=None, remaining=0, name=None):
            """A status as envoy ratelimit's test writes it (newDescriptorStatus): with a current
            limit, a duration_until_reset is there; without, none."""
            if rpu is None:
                return (st.code == code and not st.HasField("current_limit") and
                        st.limit_remaining == remaining and not st.HasField("duration_until_reset"))
            return (st.code == code and st.HasField("current_limit") and
                    st.current_limit.requests_per_unit == rpu and st.current_limit.unit == unit and
                    (name is None or st.current_limit.name == name) and
                    st.limit_remaining == remaining and st.HasField("duration_until_reset"))

        def show(r):
            return "; ".join(f"{s.code}/{s.current_limit.requests_per_unit}/{s.current_limit.unit}"
                             f"/{s.limit_remaining}" for s in r.statuses) + f" overall {r.overall_code}"

        # ---- health, as envoy ratelimit's deployments probe it ----
        hc = stop_d.channel.unary_unary(
            HEALTH, request_serializer=health_pb.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb.HealthCheckResponse.FromString)
        for svc in ("", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"):
            check(hc(health_pb.HealthCheckRequest(service=svc), timeout=5).status ==
                  health_pb.HealthCheckResponse.SERVING, f"health {svc!r}: SERVING")

        # ---- integration_test.go: testBasicBaseConfig ----
        for d in daemons:
            tag = os.path.basename(d.dir)
            r = ask(d, "foo", [("hello", "world")])
            check(r.overall_code == OK and len(r.statuses) == 1 and status(r.statuses[0], OK),
                  f"{tag}: an unknown domain: OK, no current limit ({show(r)})")
            r = ask(d, "basic", [("key1", "foo")])
            check(r.overall_code == OK and status(r.statuses[0], OK, 50, U.SECOND, 49),
                  f"{tag}: basic key1: OK, 50/SECOND, remaining 49 ({show(r)})")
            align(60, 10)
            key2 = str(uuid.uuid4().int)
            ok = True
            for i in range(25):
                r = ask(d, "another", [("key2", key2)])
                over = i >= 20
                ok = ok and r.overall_code == (OVER if over else OK) and status(
                    r.statuses[0], OVER if over else OK, 20, U.MINUTE, 0 if over else 20 - (i + 1))
            check(ok, f"{tag}: another key2 25 times: 20 OK (remaining 19 .. 0), then OVER_LIMIT "
                      f"with remaining 0 ({show(r)})")
            align(60, 10)
            v = str(uuid.uuid4().int)
            ok = True
            for i in range(15):
                r = ask(d, "another", [("key2", v)], [("key3", v)])
                over = i >= 10
                rem1 = 20 - (i + 1)
                if over and d is stop_d:  # keys over: nothing counted, key2 stays at 10 used
                    rem1 = 10
                ok = ok and r.overall_code == (OVER if over else OK) and status(
                    r.statuses[0], OK, 20, U.MINUTE, rem1) and status(
                    r.statuses[1], OVER if over else OK, 10, U.HOUR, 0 if over else 10 - (i + 1))
            check(ok, f"{tag}: key2 and key3 15 times: key3 over after 10, key2's remaining as "
                      f"envoy's {'STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT' if d is stop_d else 'default'}"
                      f" answers ({show(r)})")
            # durRemaining: envoy's test calls twice 2 s apart; the same property, with no sleep:
            # the duration until reset is the day's rest, now as the daemon reads it
            before = 86400 - int(time.time()) % 86400
            r = ask(d, "another", [("key4", "durTest")])
            after = 86400 - int(time.time()) % 86400
            dur = r.statuses[0].duration_until_reset.seconds
            check(status(r.statuses[0], OK, 20, U.DAY, 19) and after <= dur <= before,
                  f"{tag}: key4 (DAY): duration_until_reset {dur} is the day's rest "
                  f"[{after}, {before}]")

        # ---- integration_test.go: testShareThreshold ----
        d = stop_d
        for i in range(10):
            ask(d, "share-threshold-test", [("files", "files/a.pdf")])
        r = ask(d, "share-threshold-test", [("files", "files/b.csv")])
        check(r.overall_code == OVER and status(r.statuses[0], OVER, 10, U.HOUR, 0),
              f"share_threshold: files/b.csv over after 10 of files/a.pdf ({show(r)})")
        ok = True
        for i in range(10):
            r = ask(d, "share-threshold-test", [("files_no_share", f"files_no_share/{uuid.uuid4()}")])
            ok = ok and r.overall_code == OK and status(r.statuses[0], OK, 10, U.HOUR, 9)
        check(ok, f"without share_threshold every value its own threshold: remaining 9 each "
                  f"({show(r)})")

        # ---- config_test.go: which rule a descriptor meets (TestBasicConfig, over gRPC) ----
        cases = [
            ([("key1", "something")], None),
            ([("key1", "value1")], None),
            ([("key2", "value2"), ("subkey", "subvalue")], None),
            ([("key5", "value5"), ("subkey5", "subvalue")], None),
            ([("key1", "value1"), ("subkey1", "something")], (5, U.SECOND, "")),
            ([("key1", "value1"), ("subkey1", "subvalue1")], (10, U.SECOND, "")),
            ([("key2", "something")], (20, U.MINUTE, "")),
            ([("key2", "value2")], (30, U.MINUTE, "")),
            ([("key2", "value3")], None),
            ([("key3", "foo")], (1, U.HOUR, "")),
            ([("key4", "foo")], (1, U.DAY, "key4_rate_limit")),
            ([("key5", "value5")], (15, U.DAY, "")),
            ([("key5", "value5"), ("subkey5", "subvalue5")], (25, U.DAY, "")),
            ([("key7", "unspecified_value")], (70, U.MINUTE, "")),
        ]
        for entries, want in cases:
            r = ask(d, "test-domain", entries)
            st = r.statuses[0]
            if want is None:
                good = status(st, OK)
            else:
                good = st.code == OK and st.current_limit.requests_per_unit == want[0] and \
                    st.current_limit.unit == want[1] and st.current_limit.name == want[2] and \
                    st.limit_remaining == want[0] - 1
            check(good, f"test-domain {entries}: {want or 'no limit'} ({show(r)})")
        r = ask(d, "test-domain", [("key6", "foo")])
        check(status(r.statuses[0], OK, remaining=U32),
              f"unlimited: OK, remaining 4294967295, no current limit ({show(r)})")
        r = ask(d, "test-domain", [("key1", "value1"), ("subkey1", "x")],
                ([("key1", "value1"), ("subkey1", "x")], None, (10, U.DAY)))
        check(status(r.statuses[0], OK, 5, U.SECOND, 4) and
              status(r.statuses[1], OK, 10, U.DAY, 9, name=""),
              f"a descriptor's own limit (RateLimitDescriptor.limit) replaces the rule's: "
              f"10/DAY, its own counter ({show(r)})")
        r = ask(d, "test-domain", ([("key1", "value1"), ("subkey1", "x")], None, (42, U.HOUR)))
        check(status(r.statuses[0], OK, 42, U.HOUR, 41),
              f"another unit: another counter ({show(r)})")
        r = ask(d, "nowhere", ([("k", "v")], None, (5, U.DAY)))
        check(status(r.statuses[0], OK), f"an unknown domain: the override too is unknown ({show(r)})")

        # wildcard.yaml (TestWildcardConfig)
        for entries, want in [([("wild", "foo1")], 20), ([("wild", "foo2")], 19),
                              ([("wild", "bar")], None), ([("noWild", "foo1")], None),
                              ([("noVal", "foo1")], 20), ([("midWild", "barab")], 20),
                              ([("midWild", "bar123b")], 19), ([("midWild", "barb")], 18),
                              ([("midWild", "bara")], None), ([("midWild", "xbarb")], None),
                              ([("multiWild", "foo123bar456baz")], 10),
                              ([("multiWild", "foobarbaz")], 9), ([("multiWild", "foo123baz")], None),
                              ([("nestedWild", "val1"), ("wild", "goo2")], 20)]:
            r = ask(d, "wildcard", entries)
            st = r.statuses[0]
            # the glob's values share a counter only with share_threshold: foo1 and foo2 are two
            good = status(st, OK) if want is None else (
                st.HasField("current_limit") and st.current_limit.requests_per_unit in (10, 20))
            check(good, f"wildcard {entries}: {'a rule' if want else 'no rule'} ({show(r)})")

        # shadowmode_config.yaml (TestShadowModeConfig), then over its limit
        align(60, 10)
        ok = True
        for i in range(25):
            r = ask(d, "shadow", [("key2", "something")])
            ok = ok and r.overall_code == OK and status(r.statuses[0], OK, 20, U.MINUTE,
                                                        max(0, 20 - (i + 1)))
        check(ok, f"a shadow rule over its limit: OK overall, status OK with its limit, "
                  f"remaining 0 and its reset ({show(r)})")
        r = ask(d, "shadow", [("key2", "value2")])
        check(status(r.statuses[0], OK, 30, U.MINUTE, 29), f"key2 value2 is not in shadow ({show(r)})")

        # ---- the README's examples ----
        r = ask(d, "mongo_cps", [("database", "users")], [("database", "default")],
                [("database", "other")])
        check(status(r.statuses[0], OK, 500, U.SECOND, 499) and
              status(r.statuses[1], OK, 500, U.SECOND, 499) and status(r.statuses[2], OK),
              f"example 1 ({show(r)})")
        r = ask(d, "messaging", [("message_type", "marketing"), ("to_number", "2061111111")],
                [("to_number", "2061111111")])
        check(status(r.statuses[0], OK, 5, U.DAY, 4) and status(r.statuses[1], OK, 100, U.DAY, 99),
              f"example 2: both rules, one request ({show(r)})")
        align(1, 0.6)
        ok = True
        for i in range(11):
            r = ask(d, "edge_proxy_per_ip", [("remote_address", "50.0.0.1")])
            ok = ok and status(r.statuses[0], OVER if i >= 10 else OK, 10, U.SECOND,
                               0 if i >= 10 else 10 - (i + 1))
        r2 = ask(d, "edge_proxy_per_ip", [("remote_address", "50.0.0.5")])
        check(ok and r2.overall_code == OVER and status(r2.statuses[0], OVER, 0, U.SECOND, 0),
              f"example 3: 10 per second per address, 50.0.0.5 blocked ({show(r)}; {show(r2)})")
        r = ask(d, "example4", [("key", "value"), ("subkey", "subvalue")])
        r2 = ask(d, "example4b", [("key", "value"), ("subkey", "subvalue")])
        check(status(r.statuses[0], OK) and status(r2.statuses[0], OK, 300, U.SECOND, 299),
              f"example 4: the depths must agree ({show(r)}; {show(r2)})")
        r = ask(d, "internal", [("ldap", "x")], [("azure", "x")])
        check(status(r.statuses[0], OK, remaining=U32) and
              status(r.statuses[1], OK, 100, U.MINUTE, 99), f"example 5 ({show(r)})")
        align(1, 0.6)
        for i in range(11):
            r = ask(d, "example6", [("service", "auth-service"), ("user", "user-a")])
        check(r.overall_code == OK and status(r.statuses[0], OK, 10, U.SECOND, 0),
              f"example 6: user-a in shadow: never limited ({show(r)})")
        align(1, 0.6)
        for i in range(5):
            r = ask(d, "example7", [("key_1", "value_1"), ("user", "bkthomps")],
                    [("key_2", "value_2"), ("user", "bkthomps")])
        check(status(r.statuses[0], OK) and status(r.statuses[1], OK, 10, U.SECOND, 5),
              f"example 7: replaced, then 10/s ({show(r)})")
        r = ask(d, "example7", [("key_1", "value_1"), ("user", "bkthomps")])
        check(status(r.statuses[0], OK, 5, U.SECOND, 4, name="specific_limit"),
              f"example 7: the replaced limit was not touched ({show(r)})")
        for entries, rpu in [([("key1", "value1")], 20), ([("key1", "valueXYZ")], 20),
                             ([("path", "/api/123/action")], 20), ([("path", "/api/123/other")], None),
                             ([("route", "/api/v1/resource/123/action")], 20)]:
            r = ask(d, "example9", entries)
            good = status(r.statuses[0], OK) if rpu is None else \
                r.statuses[0].current_limit.requests_per_unit == rpu
            check(good, f"example 9 {entries} ({show(r)})")
        for name in ("a.pdf", "b.csv"):
            for i in range(5):
                ask(d, "example11", [("files", f"files/{name}")])
        r = ask(d, "example11", [("files", "files/c.txt")])
        check(status(r.statuses[0], OVER, 10, U.HOUR, 0), f"example 11: shared ({show(r)})")
        for i in range(10):
            ask(d, "example11", [("files_no_share", "files_no_share/a.pdf")])
        r = ask(d, "example11", [("files_no_share", "files_no_share/b.csv")])
        check(status(r.statuses[0], OK, 10, U.HOUR, 9), f"example 11: isolated ({show(r)})")

        # ---- the docker-compose example's scripts, on both settings ----
        for d in daemons:
            tag = os.path.basename(d.dir)
            align(60, 15)

            def limited(*descs):
                return ask(d, "rl", *descs).overall_code == OVER

            def two(foo, bar=None, baz=None):  # /twoheader: (foo, bar) and (foo, baz)
                out = []
                if bar:
                    out.append([("foo", foo), ("bar", bar)])
                if baz:
                    out.append([("foo", foo), ("baz", baz)])
                return out

            def four(foo, bar, dc):  # /fourheader
                return two(foo, bar) + [[("source_cluster", "proxy"), ("destination_cluster", dc)]]

            def five(foo, bar, dc, cat):  # /fiveheader
                return four(foo, bar, dc) + [[("category", cat)]]

            # replaces.sh
            seq = [(two("bkthomps", "banned"), True),
                   (four("bkthomps", "banned", "mock"), True),
                   (four("bkthomps", "banned", "override"), False),
                   (four("bkthomps", "banned", "override"), False),
                   (four("bkthomps", "banned", "override"), True),
                   (four("my_foo", "bkthomps", "bkthomps"), False),
                   (four("my_foo", "bkthomps", "bkthomps"), False),
                   (four("my_foo", "bkthomps", "bkthomps"), True),
                   (four("my_foo", "bkthomps", "not_bkthomps"), False),
                   (four("my_foo", "bkthomps", "not_bkthomps"), True),
                   (four("my_foo", "bkthomps", "bkthomps"), True)]
            seq += [(five("my_foo", "bkthomps", "fake", "account"), False)] * 4
            seq += [(five("my_foo", "bkthomps", "fake", "account"), True),
                    (two("foo_2", "bkthomps"), False), (two("foo_2", "bkthomps"), True),
                    (four("foo_3", "bar_3", "fake"), False), (four("foo_3", "bar_3", "fake"), False),
                    (four("foo_3", "bar_3", "fake"), True),
                    (five("my_foo", "bkthomps", "fake", "account"), True)]
            got = [limited(*descs) for descs, _ in seq]
            want = [w for _, w in seq]
            check(got == want, f"{tag}: replaces.sh, step by step (limited: {got})")
            # trigger-ratelimit.sh, trigger-shadow-mode-key.sh, simple-get.sh
            got = [limited(*two("pelle", baz="not-so-shady")) for _ in range(5)]
            check(got == [False, False, False, True, True], f"{tag}: trigger-ratelimit.sh ({got})")
            rs = [ask(d, "rl", *two("pelle", baz="shady")) for _ in range(6)]
            check(all(r.overall_code == OK for r in rs) and
                  status(rs[-1].statuses[0], OK, 3, U.MINUTE, 0),
                  f"{tag}: trigger-shadow-mode-key.sh: never limited; its status says 3/MINUTE, "
                  f"0 left ({show(rs[-1])})")
            check(not limited(*two("test", baz="shady")), f"{tag}: simple-get.sh")
            # quota.sh: (service, service_1) and (service, service_2), quota_mode
            got = [limited([("service", "service_1")], [("service", "service_2")]) for _ in range(3)]
            check(got == [False, False, True], f"{tag}: quota.sh: the third is refused ({got})")
            # value-included-in-stats-key-when-unspecified.sh (its metric: rls_metrics below)
            got = [limited([("unspec", "unspecified_value")]) for _ in range(3)]
            check(got == [False, False, True], f"{tag}: unspec (detailed_metric) ({got})")
            r = ask(d, "rl", [("qux", "x")], [("foo", "a"), ("bay", "b")])
            check(status(r.statuses[0], OK, remaining=U32) and status(r.statuses[1], OK, remaining=U32),
                  f"{tag}: qux and bay are unlimited ({show(r)})")

        # value-included-in-stats-key-when-unspecified.sh's metric, and config_test.go's key7:
        # detailed_metric keys the rule's counts by the value, as envoy ratelimit's stats keys
        m = stop_d.metrics()
        want = ('tokentriage_rls_detailed_total{limit="rls_rl_unspec",'
                'key="rl.unspec_unspecified_value",verdict="deny"} 1')
        check(want in m, "detailed_metric: over_limit of rl.unspec_unspecified_value is 1")
        check('key="test-domain.key7_unspecified_value",verdict="admit"} 1' in m,
              "detailed_metric: test-domain.key7_unspecified_value counted once")
        # shadow mode's statistic: the would-be denials of a shadow rule
        check('tokentriage_decisions_total{limit="rls_rl_foo_baz_shady",verdict="soft_deny"} 3'
              in m, "shadow_mode: 3 would-be denials of foo.baz_shady counted")

        # ---- service tests: the custom response headers (LIMIT_*_HEADER), beside ours ----
        r = ask(default, "another", [("key3", "hdr")], [("nothing", "x")])
        hdrs = {h.key: h.value for h in r.response_headers_to_add}
        dur = r.statuses[0].duration_until_reset.seconds
        # ours beside them, except for a rule in Redis: a redis limit is never disclosed (it has
        # no local reading: docs/redis.md), envoy's three come from the status
        check(hdrs.get("A-Ratelimit-Limit") == "10" and hdrs.get("A-Ratelimit-Remaining") == "9"
              and hdrs.get("A-Ratelimit-Reset") == str(dur)
              and ("RateLimit" in hdrs) == (mode != "redis"),
              f"envoy's headers, named as configured, beside ours ({hdrs})")
        r = ask(stop_d, "another", [("key3", "hdr")])
        check(not any(h.key.startswith("A-") or h.key == "RateLimit-Limit"
                      for h in r.response_headers_to_add),
              "without grpc_limit_headers, only ours")

        # ---- integration_test.go: testConfigReload (a ConfigMap's ..data swapped) ----
        d = stop_d
        r = ask(d, "reload", [("block", "foo")])
        check(status(r.statuses[0], OK), f"before the reload: no domain reload ({show(r)})")
        new = os.path.join(cm, "..2026_01_02")
        shutil.copytree(os.path.join(cm, "..2026_01_01"), new)
        shutil.copy(os.path.join(fixtures, "extra", "reload.yaml"), new)
        os.symlink("..data/reload.yaml", os.path.join(cm, "reload.yaml"))
        os.symlink("..2026_01_02", os.path.join(cm, "..data_tmp"))
        os.rename(os.path.join(cm, "..data_tmp"), os.path.join(cm, "..data"))
        d.reload()
        wait_for("the reloaded rules",
                 lambda: ask(d, "reload", [("block", "foo")]).overall_code == OVER)
        r = ask(d, "reload", [("key1", "foo")])
        check(status(r.statuses[0], OK, 50, U.SECOND, 49),
              f"after the reload: key1 50/SECOND, remaining 49 ({show(r)})")
        r = ask(d, "basic", [("one_per_minute", "kept")])
        os.remove(os.path.join(cm, "reload.yaml"))
        d.reload()
        wait_for("the file's removal", lambda: ask(d, "reload", [("block", "foo")]).overall_code == OK)
        check(True, "a removed file's rules go with the next reload")

        # ---- a ConfigMap update under load: the watch's ..data swap, a bad file, a good one --
        watched = Daemon(tt, work, "watched", cm, mode, shared(),
                         extra="  config_watch: true\n  config_poll: 1s")
        daemons.append(watched)
        watched.start(pb)
        errors, answers, running = [], [0], [True]

        def load():  # decisions all along, on a domain the updates leave alone
            while running[0]:
                try:
                    ask(watched, "basic", [("key1", "load")])
                    answers[0] += 1
                except grpc.RpcError as e:
                    errors.append(e.code())

        threads = [threading.Thread(target=load) for _ in range(2)]
        for t in threads:
            t.start()

        def swap(version, files):
            """A ConfigMap update as the kubelet writes it: a new timestamped directory, then
            ..data renamed onto it; `files` {name: text or None to copy the first version's}."""
            new = os.path.join(cm, version)
            os.makedirs(new)
            for name, text in files.items():
                if text is None:
                    shutil.copy(os.path.join(cm, "..2026_01_01", name), new)
                else:
                    with open(os.path.join(new, name), "w") as f:
                        f.write(text)
                if not os.path.lexists(os.path.join(cm, name)):
                    os.symlink(os.path.join("..data", name), os.path.join(cm, name))
            os.symlink(version, os.path.join(cm, "..data_tmp"))
            os.rename(os.path.join(cm, "..data_tmp"), os.path.join(cm, "..data"))
            return time.monotonic()

        every = {name: None for name in os.listdir(os.path.join(cm, "..2026_01_01"))}
        fresh = "domain: fresh\ndescriptors: [{ key: k, rate_limit: { unit: hour, requests_per_unit: 7 } }]\n"
        t0 = swap("..2026_02_01", dict(every, **{"zz_fresh.yaml": fresh}))
        wait_for("the new rules", lambda: ask(watched, "fresh", [("k", "v")]).statuses[0]
                 .current_limit.requests_per_unit == 7, deadline_s=1.5 + 3)
        took = time.monotonic() - t0
        check(True, f"a ..data swap: the new rules answer {took:.2f} s later (the stated bound: "
                    f"config_poll + 0.5 s = 1.5 s; inotify: about 0.5 s)")
        bad = "domain: fresh\ndescriptors: [{ key: k, rate_limit: { unit: fortnight } }]\n"
        reloads = lambda: watched.metrics().count('tokentriage_reloads_total{result="failed"} 1')  # noqa: E731
        swap("..2026_02_02", dict(every, **{"zz_fresh.yaml": bad}))
        wait_for("the bad file refused", lambda: reloads() == 1, deadline_s=1.5 + 3)
        r = ask(watched, "fresh", [("k", "v")])
        check(status(r.statuses[0], OK, 7, U.HOUR, 5),
              f"a bad file changes nothing: the previous rules still answer ({show(r)})")
        with open(watched.log) as f:
            log = f.read()
        check("invalid rate limit unit 'fortnight'" in log,
              "the refusal says why (the file's finding in the log)")
        fixed = fresh.replace("7", "8")
        swap("..2026_02_03", dict(every, **{"zz_fresh.yaml": fixed}))
        wait_for("the fixed file", lambda: ask(watched, "fresh", [("k", "v")]).statuses[0]
                 .current_limit.requests_per_unit == 8, deadline_s=1.5 + 3)
        running[0] = False
        for t in threads:
            t.join()
        check(not errors and answers[0] > 0,
              f"under load through three updates: {answers[0]} calls, none failed ({errors[:3]})")

        # ---- service tests: global shadow mode ----
        default.reload(shadow="true")
        wait_for("shadow mode", lambda: ask(default, "edge_proxy_per_ip",
                                            [("remote_address", "50.0.0.5")]).overall_code == OK)
        r = ask(default, "edge_proxy_per_ip", [("remote_address", "50.0.0.5")])
        check(r.overall_code == OK and status(r.statuses[0], OVER, 0, U.SECOND, 0),
              f"global shadow mode: the status says OVER_LIMIT, the overall code OK ({show(r)})")

        if mode == "redis":
            def redis_cmd(port, cmd):
                """One inline command's reply: an integer, or a bulk string's text."""
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    c.sendall(cmd.encode() + b"\r\n")
                    got = b""
                    while b"\r\n" not in got:
                        got += c.recv(65536)
                    head, rest = got.split(b"\r\n", 1)
                    if head.startswith(b":"):
                        return int(head[1:])
                    while len(rest) < int(head[1:]):
                        rest += c.recv(65536)
                    return rest.decode()

            # the rules were counted in Redis: the stop daemon's redis-server holds their keys
            keys = redis_cmd(redis_ports[0], "DBSIZE")
            check(keys > 0, f"the rules' counters are in Redis ({keys} keys)")

            # one request's descriptors go to Redis in one round trip (one EVALSHA of a batch)
            def evalsha():
                stats = redis_cmd(redis_ports[0], "INFO commandstats")
                line = [x for x in stats.splitlines() if x.startswith("cmdstat_evalsha:")]
                return int(line[0].split("calls=")[1].split(",")[0]) if line else 0
            before = evalsha()
            r = ask(stop_d, "another", [("key2", "rt")], [("key3", "rt")], [("key4", "rt")])
            after = evalsha()
            check(r.overall_code == OK and after - before == 1,
                  f"three descriptors in Redis, one round trip ({after - before} EVALSHA)")
            # Redis gone: posture.fail (open by default), the local fallback decides
            stop(redises.pop(0), None, "the stop daemon's redis-server (taken away)")
            r = ask(stop_d, "basic", [("key1", "redis-gone")])
            check(r.overall_code == OK and status(r.statuses[0], OK, 50, U.SECOND, 49),
                  f"Redis gone: answered by the local fallback (posture.fail open) ({show(r)})")
        if mode == "share":
            # a fleet of two: each replica admits its share of a rule (amount / N), the fleet
            # the rule's amount, and every status states the rule as written
            ports = [free_port(), free_port()]
            fleet = []
            for i, name in enumerate(["fleet_a", "fleet_b"]):
                fleet.append(Daemon(tt, work, name, cm, mode,
                                    "shared_state:\n  share: {{ node_id: {}, bind: 127.0.0.1:{}, "
                                    "seeds: [127.0.0.1:{}] }}".format(name, ports[i], ports[1 - i])))
                daemons.append(fleet[-1])
            for d in fleet:
                d.start(pb)
            limit = 'limit="rls_another_key2"'
            for d in fleet:
                wait_for(f"{d.dir}: N=2, converged", lambda: (
                    f"tokentriage_share_n{{{limit}}} 2" in d.metrics() and
                    f"tokentriage_share_converged{{{limit}}} 1" in d.metrics()), deadline_s=30)
            align(60, 10)
            got = [[ask(d, "another", [("key2", "fleet")]) for _ in range(15)] for d in fleet]
            admitted = [sum(r.overall_code == OK for r in answers) for answers in got]
            check(admitted == [10, 10], f"key2 20/min over a fleet of two: 10 on each replica, "
                                        f"20 in all ({admitted})")
            last = got[0][-1]
            check(status(last.statuses[0], OVER, 20, U.MINUTE, 0),
                  f"a replica over its share states the rule as written ({show(last)})")
    finally:
        for d in daemons:
            d.close()
        for redis in redises:
            stop(redis, None, "redis-server")
        shutil.rmtree(work, ignore_errors=True)
    return summary(f"rls envoy ({mode})")


if __name__ == "__main__":
    sys.exit(main())
