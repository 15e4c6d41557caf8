#!/usr/bin/env python3
"""ctest server_logs: the daemon's log as an operator reads it, on real daemons' stderr.

One logger for every component (common/tt_log.c): every line of `serve --log-format json` is one
JSON object (read here by Python's json module) with ts, level and msg, membership's lines too;
values are typed (an integer is a JSON number, not a string); `--log-level` and
`server.log_level` drop what is below them; each event is one line: a member joined, left or
died (member=, n=), the share store's N changed (old_n=, n=), a reload applied or refused
(reason=), the counters restored. Three replicas gossip on loopback, one SIGKILLed, one
SIGTERMed; the logfmt replica's lines are read with a logfmt reader of their own.

usage: test_logs.py TOKENTRIAGE
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import shutil
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import ttcheck  # noqa: E402
from ttcheck import check, connectable, failed, free_port, summary, wait_for  # noqa: E402

TT = sys.argv[1] if len(sys.argv) > 1 else "tokentriage"
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
LEVELS = ("debug", "info", "warn", "error")
PROCS = []


def free_gossip_port():
    """A port free for both UDP and TCP on 127.0.0.1 (gossip takes both)."""
    while True:
        port = free_port()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            u.close()


class Daemon:
    """One `tokentriage serve` in its own scratch directory, stderr to a file."""

    def __init__(self, work, name, server="", rest="", args=("--log-format", "json"),
                 limits=None, config="tokentriage.yaml"):
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.name = name
        self.sock = os.path.join(self.dir, "tt.sock")
        self.log = os.path.join(self.dir, "stderr.log")
        self.config = os.path.join(self.dir, config)
        self.args = list(args)
        self.server, self.rest = server, rest
        self.limits = limits or "    - { id: team_rpm, attach: { level: team }, type: rpm, " \
                                "amount: 100, period: 1m }\n"
        self.proc = None
        self.write()

    def write(self, server=None, limits=None):
        if server is not None:
            self.server = server
        if limits is not None:
            self.limits = limits
        with open(self.config, "w") as f:
            f.write(f"server:\n  socket: {self.sock}\n  http: \"\"\n{self.server}"
                    f"governance:\n  limits:\n{self.limits}{self.rest}")

    def start(self, wait=True):
        self.proc = subprocess.Popen([TT, "serve", "-c", self.config] + self.args,
                                     stdout=subprocess.DEVNULL, stderr=open(self.log, "ab"))
        PROCS.append(self.proc)
        if wait:
            wait_for(f"{self.name}'s socket", lambda: connectable(self.sock), procs=[self.proc])
        return self

    def lines(self):
        with open(self.log, "rb") as f:
            return [ln.decode("utf-8", "replace") for ln in f.read().split(b"\n") if ln]

    def json_lines(self):
        """Every line as a dict; a line that is not UTF-8 holding one JSON object is a None in
        its place."""
        out = []
        with open(self.log, "rb") as f:
            raw = [ln for ln in f.read().split(b"\n") if ln]
        for ln in raw:
            try:
                v = json.loads(ln.decode("utf-8"))
                out.append(v if isinstance(v, dict) else None)
            except ValueError:  # UnicodeDecodeError is one
                out.append(None)
        return out

    def events(self, msg, **fields):
        """The JSON lines with this msg whose fields have these values."""
        return [e for e in self.json_lines()
                if e and e.get("msg") == msg and all(e.get(k) == v for k, v in fields.items())]

    def decide(self, team):
        return subprocess.run([TT, "decide", "-s", self.sock, "--subject", f"team={team}"],
                              capture_output=True, timeout=10).returncode

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            ttcheck.stop(self.proc, what=self.name)


def logfmt(line):
    """One logfmt line as a dict of strings (quoted values unescaped), or None when it is not
    logfmt: key=value pairs, values bare or double-quoted with backslash escapes."""
    out, i, n = {}, 0, len(line)
    while i < n:
        m = re.match(r"([A-Za-z0-9_.]+)=", line[i:])
        if not m:
            return None
        key = m.group(1)
        i += m.end()
        if i < n and line[i] == '"':
            i += 1
            val = []
            while i < n and line[i] != '"':
                if line[i] == "\\" and i + 1 < n:
                    val.append({"n": "\n", "t": "\t", "r": "\r"}.get(line[i + 1], line[i + 1]))
                    i += 2
                else:
                    val.append(line[i])
                    i += 1
            if i >= n:
                return None
            i += 1
            out[key] = "".join(val)
        else:
            j = line.find(" ", i)
            j = n if j < 0 else j
            out[key] = line[i:j]
            i = j
        if i < n and line[i] != " ":
            return None
        i += 1
    return out


def every_line_is_a_record(d, what):
    """Every line of a JSON log: one object with a ts, a level and a msg."""
    lines = d.json_lines()
    bad = [d.lines()[k] for k, e in enumerate(lines) if e is None]
    check(lines and not bad, f"{what}: every line is one JSON object ({len(bad)} of "
                             f"{len(lines)} not: {bad[:2]})")
    ok = [e for e in lines if e]
    check(all(TS.match(str(e.get("ts", ""))) for e in ok),
          f"{what}: every JSON line has a ts (RFC 3339, UTC, milliseconds)")
    check(all(e.get("level") in LEVELS and isinstance(e.get("msg"), str) for e in ok),
          f"{what}: every JSON line has a level and a msg")
    return ok


def one_daemon(work):
    """Reloads refused and applied, the counters restored: typed values in JSON."""
    d = Daemon(work, "solo", server=f"  state_dir: {os.path.join(work, 'solo', 'state')}\n")
    d.start()
    for _ in range(3):
        d.decide("t1")
    good = d.limits
    d.write(limits="    - { id: team_rpm, attach: { level: team }, type: rpm, amount: -1, "
                   "period: 1m }\n")
    d.signal(signal.SIGHUP)
    try:
        wait_for("the refused reload's line",
                 lambda: [e for e in d.json_lines() if e and "refused" in e.get("msg", "")],
                 deadline_s=10, procs=[d.proc])
    except TimeoutError:
        pass
    refused = d.events("reload refused, old config still serving")
    check(len(refused) == 1, f"a refused reload is one line with a constant msg ({refused})")
    check(refused and "governance.limits[0].amount" in str(refused[0].get("reason")),
          "... whose reason names the field")
    check(refused and refused[0].get("generation") == 1,
          "... and the generation still serving, a number (1)")
    d.write(limits=good + "    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 5, "
                          "period: 1m }\n")
    d.signal(signal.SIGHUP)
    try:
        wait_for("the applied reload's line", lambda: d.events("reload applied"), deadline_s=10,
                 procs=[d.proc])
    except TimeoutError:
        pass
    applied = d.events("reload applied")
    check(len(applied) == 1 and applied[0].get("limits") == 2 and
          applied[0].get("generation") == 2,
          f"an applied reload is one line with limits 2 and generation 2, numbers ({applied})")
    d.stop()
    d.start()
    try:
        wait_for("the restore's line", lambda: d.events("state: restored"), deadline_s=10)
    except TimeoutError:
        pass
    restored = d.events("state: restored")
    check(len(restored) == 1 and restored[0].get("restored") == 1 and
          type(restored[0].get("restored")) is int,
          f"state: restored says restored 1, a JSON number ({restored})")
    check(restored and type(restored[0].get("age_s")) in (int, float),
          "... and the snapshot's age in seconds as a number")
    d.stop()
    every_line_is_a_record(d, "one daemon")

    # a config path with a quote, a backslash, control bytes and a byte that is not UTF-8
    odd_name = 'tt "q" \\ \t\x01\udcff.yaml'  # \udcff: the byte 0xff (surrogateescape)
    o = Daemon(work, "odd", config=odd_name).start()
    o.stop()
    lines = every_line_is_a_record(o, "a config path of odd bytes")
    serving = [e for e in lines if e.get("msg") == "serving"]
    check(serving and serving[0].get("config", "").endswith('tt "q" \\ \t\x01\ufffd.yaml'),
          f"... the serving line names it, the byte not UTF-8 as U+FFFD "
          f"({serving and serving[0].get('config')!r})")


def levels(work):
    """--log-level and server.log_level drop what is below them; a bad level is a usage error."""
    bad = subprocess.run([TT, "serve", "--log-level", "loud"], capture_output=True, timeout=10)
    check(bad.returncode == 64 and b"--log-level" in bad.stderr,
          f"--log-level loud is a usage error naming the option (exit {bad.returncode})")
    w = Daemon(work, "warn", args=("--log-format", "json", "--log-level", "warn")).start()
    w.decide("t1")
    w.write(server="  max_counters: 5000\n")  # a restart section: a warn line
    w.signal(signal.SIGHUP)
    try:
        wait_for("the warn line", lambda: w.events(
            "reload: a section changed that applies after a restart"), deadline_s=10)
    except TimeoutError:
        pass
    w.stop()
    lines = every_line_is_a_record(w, "--log-level warn")
    check(lines and all(e["level"] in ("warn", "error") for e in lines),
          f"--log-level warn: no info line ({[e['msg'] for e in lines if e['level'] == 'info']})")
    check(any(e["level"] == "warn" for e in lines), "--log-level warn: the warn line is there")

    # the config's key: warn, then debug by a reload (the flag absent)
    state = os.path.join(work, "cfg", "state")
    c = Daemon(work, "cfg", server=f"  log_level: warn\n  state_dir: {state}\n"
                                   "  snapshot_interval: 100ms\n")
    c.start()
    c.decide("t1")
    c.write(server=f"  log_level: debug\n  state_dir: {state}\n  snapshot_interval: 100ms\n")
    c.signal(signal.SIGHUP)
    try:
        wait_for("a debug line after the reload",
                 lambda: [e for e in c.json_lines() if e and e.get("level") == "debug"],
                 deadline_s=10, procs=[c.proc])
    except (TimeoutError, RuntimeError):
        pass
    c.stop()
    lines = every_line_is_a_record(c, "server.log_level")
    before = []
    for e in lines:
        if e.get("msg") == "reload applied":  # the first line the new level lets through
            break
        before.append(e)
    check(before == [] or all(e["level"] in ("warn", "error") for e in before),
          f"server.log_level warn: no info line until the reload "
          f"({[e['msg'] for e in before if e['level'] == 'info']})")
    check(any(e["level"] == "debug" for e in lines),
          "server.log_level debug by a reload: debug lines (the snapshots) follow")
    # the flag wins over the key
    f = Daemon(work, "flag", server="  log_level: error\n",
               args=("--log-format", "json", "--log-level", "info")).start()
    f.stop()
    check(any(e.get("msg") == "serving" for e in f.json_lines() if e),
          "--log-level info wins over server.log_level error: the serving line is there")


def fleet(work):
    """Three replicas: joins, a death and a leave, each one line with member= and n=."""
    ports = [free_gossip_port() for _ in range(3)]
    reps = []
    for i in range(3):
        seeds = f"    seeds: [\"127.0.0.1:{ports[0]}\"]\n" if i else ""
        rest = (f"shared_state:\n  share:\n    node_id: r{i}\n    bind: 127.0.0.1:{ports[i]}\n"
                f"{seeds}    cluster: logs\n")
        args = ("--log-format", "logfmt") if i == 1 else ("--log-format", "json")
        reps.append(Daemon(work, f"r{i}", rest=rest, args=args))
    for r in reps:
        r.start()

    def live(r):
        out = subprocess.run([TT, "members", "-s", r.sock, "--json"], capture_output=True,
                             timeout=10)
        try:
            return json.loads(out.stdout).get("live")
        except ValueError:
            return None

    wait_for("three live members everywhere", lambda: all(live(r) == 3 for r in reps),
             deadline_s=30, procs=[r.proc for r in reps])
    r0, r1, r2 = reps
    try:
        wait_for("r0's joined lines", lambda: len(r0.events("member joined")) >= 2,
                 deadline_s=10)
    except TimeoutError:
        pass
    for peer in ("r1", "r2"):
        j = r0.events("member joined", member=peer)
        check(len(j) == 1 and type(j[0].get("n")) is int and type(j[0].get("generation")) is int,
              f"r0: {peer} joined, one line with member, generation and n as numbers ({j})")
    ns = r0.events("N changed")
    check(ns and ns[-1].get("n") == 3 and type(ns[-1].get("old_n")) is int,
          f"r0: N changed, with old_n and n (3 at last) ({ns})")

    r2.proc.kill()
    r2.proc.wait()

    def r2_dead():
        out = subprocess.run([TT, "members", "-s", r0.sock, "--json"], capture_output=True,
                             timeout=10)
        try:
            rows = json.loads(out.stdout)["members"]
        except (ValueError, KeyError):
            return False
        return any(m["id"] == "r2" and m["state"] == "dead" for m in rows)

    wait_for("r0 to see r2 dead", r2_dead, deadline_s=60, procs=[r0.proc, r1.proc])
    try:
        wait_for("r0's dead line", lambda: r0.events("member dead", member="r2"), deadline_s=5)
    except TimeoutError:
        pass
    dead = r0.events("member dead", member="r2")
    check(len(dead) == 1 and dead[0].get("n") == 2 and dead[0].get("level") == "warn",
          f"r0: r2 dead, one warn line with n 2 ({dead})")
    mentions = [ln for ln in r0.lines() if "r2" in ln and "dead" in ln]
    check(len(mentions) == 1, f"r0: r2's death is told once ({len(mentions)} lines: {mentions})")
    try:
        wait_for("N 2 on r0", lambda: r0.events("N changed", old_n=3, n=2), deadline_s=5)
    except TimeoutError:
        pass
    down = [e for e in r0.events("N changed") if e.get("n") == 2 and e.get("old_n") == 3]
    check(len(down) == 1, f"r0: N changed from 3 to 2, once ({r0.events('N changed')})")

    r1.signal(signal.SIGTERM)
    r1.proc.wait(30)
    try:
        wait_for("r0's left line", lambda: r0.events("member left", member="r1"), deadline_s=10)
    except TimeoutError:
        pass
    left = r0.events("member left", member="r1")
    check(len(left) == 1 and left[0].get("n") == 1,
          f"r0: r1 left, one line with n 1 ({left})")
    r0.stop()
    every_line_is_a_record(r0, "r0 (json)")
    every_line_is_a_record(r2, "r2 (json, killed)")

    # r1 wrote logfmt: every line a logfmt record with ts first, membership's too
    recs = [(ln, logfmt(ln)) for ln in r1.lines()]
    bad = [ln for ln, r in recs if not r or list(r)[:3] != ["ts", "level", "msg"]]
    check(recs and not bad, f"r1 (logfmt): every line is ts=.. level=.. msg=.. ({bad[:2]})")
    joined = [r for _, r in recs if r and r.get("msg") == "member joined" and
              r.get("member") == "r0"]
    check(len(joined) == 1 and re.fullmatch(r"\d+", joined[0].get("n", "")),
          f"r1 (logfmt): r0 joined, one line with a bare n ({joined})")


def main():
    work = tempfile.mkdtemp(prefix="tt-logs-")
    try:
        for part in (one_daemon, levels, fleet):
            try:
                part(work)
            except (TimeoutError, RuntimeError) as e:
                check(False, f"{part.__name__}: {e}")
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        if failed():
            for name in sorted(os.listdir(work)):
                log = os.path.join(work, name, "stderr.log")
                if os.path.exists(log):
                    print(f"--- {name}'s log (tail)")
                    print(open(log, errors="replace").read()[-2500:])
        shutil.rmtree(work, ignore_errors=True)
    return summary("server_logs")


if __name__ == "__main__":
    sys.exit(main())
