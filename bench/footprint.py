#!/usr/bin/env python3
"""bench/footprint.py: what the daemon costs besides decisions. Real processes, measured.

  bench/footprint.py memory  [--build DIR] [--keys 1000000,10000000]
  bench/footprint.py reclaim [--build DIR] [--keys 1000000]
  bench/footprint.py gossip  [--build DIR] [--sizes 8,32,64] [--window 60]

memory: one daemon, one local limit whose counters stay live for an hour (1 request per hour
per key), server.max_counters 12M. bench/loadgen sends every key once; the resident set
(VmRSS) is read before and after, and the table's own count from /metrics. Bytes per counter
= RSS growth / counters (what the process really took, allocator slack included).

reclaim: a limit of one request per 5 s per key, so a counter is idle 5 s after its request. A
million keys are touched once; then bench/loadgen measures 10k of the same keys (8 connections, depth
16) in 1 s windows: while the million counters are still live, while they are reclaimed (per
operation and by the housekeeping tick), and after. The cost of reclaiming is the difference
in throughput, p99 latency and the daemon's CPU time per decision.

gossip: N replicas of `tokentriage serve` on loopback, sealed with one keyring, seeded from the
first. Once every replica sees N alive, each replica's gossip is read over a window: UDP bytes
from its own /metrics (tokentriage_gossip_bytes_total), push-pull TCP bytes from the kernel's
count of the process's write() bytes (/proc/PID/io wchar; datagrams go through sendmsg and are
not in it) minus the /metrics answers and log lines it wrote meanwhile, and CPU time from
/proc/PID/stat. Prints per-replica means and maxima.

Every process started is stopped (SIGTERM, then SIGKILL after 5 s) and every file removed.
"""
import argparse
import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from serve import Serve, free_port, wait

TICK = os.sysconf("SC_CLK_TCK")


class Daemon(Serve):
    """One `tokentriage serve` in its own directory, with HTTP on a loopback port."""

    def __init__(self, build, workdir, name, body):
        super().__init__(build, workdir, name)
        self.http = free_port()
        self.spawn(f"server:\n  socket: {self.socket}\n  http: 127.0.0.1:{self.http}\n{body}")
        self.scraped = 0  # bytes of /metrics answers this process has written

    def wait_ready(self, deadline_s=20):
        def answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited: {self.log_text()}")
            try:
                self.metrics()
                return True
            except OSError:
                return False

        if not wait(answers, deadline_s, 0.1):
            raise RuntimeError("daemon did not answer /metrics")

    def metrics(self):
        # raw HTTP, so that every byte the daemon wrote in answer is counted (see gossip)
        with socket.create_connection(("127.0.0.1", self.http), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        self.scraped += len(answer)
        out = {}
        for line in answer.split(b"\r\n\r\n", 1)[-1].decode().splitlines():
            m = re.match(r'^([a-z_]+(?:\{[^}]*\})?) (\S+)$', line)
            if m:
                out[m.group(1)] = float(m.group(2))
        return out

    def rss(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def cpu_s(self):
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime

    def wchar(self):
        for line in open(f"/proc/{self.proc.pid}/io"):
            if line.startswith("wchar:"):
                return int(line.split()[1])
        return 0


def loadgen(build, sock, *args):
    out = subprocess.run([os.path.join(build, "bench", "loadgen"), "--proto", "msgpack",
                          "--socket", sock, *map(str, args)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


COUNTERS = 'tokentriage_counters{limit="key_rpm"}'
LIMIT = """governance:
  keys: { disclose_limits: true }
  limits:
    - id: key_rpm
      attach: { level: key }
      type: rpm
"""


def memory(a, work):
    d = Daemon(a.build, work, "memory", "  max_counters: 12000000\n" + LIMIT +
               "      amount: 1\n      period: 1h\n")
    try:
        d.wait_ready()
        base = d.rss()
        print(f"resident set at start: {base / 1e6:.1f} MB")
        print("| keys | counters | RSS MB | RSS growth / counter | RSS / counter | fill s |")
        print("|---:|---:|---:|---:|---:|---:|")
        for keys in a.keys:
            t0 = time.time()
            loadgen(a.build, d.socket, "-c", 8, "-p", 64, "-k", keys, "--prefill")
            fill = time.time() - t0
            rss = d.rss()
            n = d.metrics().get(COUNTERS, 0)
            print(f"| {keys:,} | {n:,.0f} | {rss / 1e6:.1f} | {(rss - base) / n:.1f} | "
                  f"{rss / n:.1f} | {fill:.1f} |")
    finally:
        d.stop()


def reclaim(a, work):
    # one request per 5 s per key: a key's counter is idle (and reclaimable) 5 s after its request
    d = Daemon(a.build, work, "reclaim", LIMIT + "      amount: 1\n      period: 5s\n")
    try:
        d.wait_ready()
        keys = a.keys[0]
        print("| s | phase | counters | reclaimed in window | decisions/s | p99 us | daemon CPU ns/decision |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        t0 = time.time()
        loadgen(a.build, d.socket, "-c", 8, "-p", 64, "-k", keys, "--prefill")
        idle_from = time.time() + 5  # the first prefilled keys go idle from here

        def window():
            m0 = d.metrics()
            r = loadgen(a.build, d.socket, "-c", 8, "-p", 16, "-k", 10000, "-d", 1000, "-w", 100,
                        "--pid", d.proc.pid)
            m1 = d.metrics()
            freed = (m1.get("tokentriage_counters_reclaimed_total", 0) -
                     m0.get("tokentriage_counters_reclaimed_total", 0))
            phase = ("reclaiming" if freed > 0 else
                     "before (all live)" if time.time() < idle_from else "after")
            print(f"| {time.time() - t0:.0f} | {phase} | {m0.get(COUNTERS, 0):,.0f} | "
                  f"{freed:,.0f} | {r['per_s']:,.0f} | {r['p99_us']:.0f} | "
                  f"{r.get('cpu_ns_per_answer', 0):,.0f} |", flush=True)
            return freed

        while time.time() < idle_from:
            window()
        while window() > 0 or d.metrics().get(COUNTERS, 0) > 10000:
            pass
        for _ in range(3):
            window()
    finally:
        d.stop()


def gossip(a, work):
    keyring = os.path.join(work, "gossip.keys")
    with open(keyring, "w") as f:
        f.write("# primary\n" + base64.b64encode(os.urandom(32)).decode() + "\n")
    os.chmod(keyring, 0o600)
    print("| replicas | converged s | UDP tx B/s | push-pull tx B/s | total tx B/s (max) | "
          "CPU ms/s (max) | alive everywhere after |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for n in a.sizes:
        seed = free_port(socket.SOCK_DGRAM, both=True)
        ds = []
        try:
            t0 = time.time()
            for i in range(n):
                port = seed if i == 0 else free_port(socket.SOCK_DGRAM, both=True)
                share = (f"shared_state:\n  share:\n    node_id: r{i}\n"
                         f"    bind: 127.0.0.1:{port}\n    seeds: [\"127.0.0.1:{seed}\"]\n"
                         f"    keyring_file: {keyring}\n    cluster: bench\n")
                ds.append(Daemon(a.build, work, f"g{n}-{i}", LIMIT +
                                 "      amount: 600\n      period: 1m\n" + share))
            for d in ds:
                d.wait_ready()

            def alive_everywhere():
                return all(d.metrics().get('tokentriage_members{state="alive"}', 0) == n
                           for d in ds)

            if not wait(alive_everywhere, 120, 0.5):
                raise RuntimeError(f"{n} replicas did not converge in 120 s")
            converged = time.time() - t0
            time.sleep(5)

            def snap(d):
                m = d.metrics()  # first: the scrape's own bytes are then counted before wchar
                return {"udp": m.get('tokentriage_gossip_bytes_total{direction="tx"}', 0),
                        "wchar": d.wchar(), "scraped": d.scraped,
                        "log": os.path.getsize(d.log), "cpu": d.cpu_s(), "t": time.time()}

            s0 = [snap(d) for d in ds]
            time.sleep(a.window)
            s1 = [snap(d) for d in ds]
            udp, tcp, cpu = [], [], []
            for x, y in zip(s0, s1):
                dt = y["t"] - x["t"]
                udp.append((y["udp"] - x["udp"]) / dt)
                # write() bytes that were neither /metrics answers nor log lines: push-pull
                other = (y["scraped"] - x["scraped"]) + (y["log"] - x["log"])
                tcp.append(max(0, (y["wchar"] - x["wchar"]) - other) / dt)
                cpu.append((y["cpu"] - x["cpu"]) / dt * 1000)
            total = [u + t for u, t in zip(udp, tcp)]
            mean = lambda v: sum(v) / len(v)
            print(f"| {n} | {converged:.1f} | {mean(udp):,.0f} | {mean(tcp):,.0f} | "
                  f"{mean(total):,.0f} ({max(total):,.0f}) | {mean(cpu):.2f} ({max(cpu):.1f}) | "
                  f"{'yes' if alive_everywhere() else 'NO'} |", flush=True)
        finally:
            for d in ds:
                d.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["memory", "reclaim", "gossip"])
    p.add_argument("--build", default="build")
    p.add_argument("--keys", default=None)
    p.add_argument("--sizes", default="8,32,64")
    p.add_argument("--window", type=float, default=60)
    a = p.parse_args()
    a.keys = [int(k) for k in (a.keys or ("1000000,10000000" if a.what == "memory"
                                          else "1000000")).split(",")]
    a.sizes = [int(s) for s in a.sizes.split(",")]
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    work = tempfile.mkdtemp(prefix="ttfoot.")
    try:
        {"memory": memory, "reclaim": reclaim, "gossip": gossip}[a.what](a, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
