#!/usr/bin/env python3
"""How long a join takes to reach every view, on real processes (docs/membership.md, "Figures").

Starts REPLICAS `tokentriage serve` replicas on loopback ports (sealed, one keyring, seeded to
the first), waits until they agree, then JOINS times: starts one more replica seeded to a random
one of them and polls every replica's `tokentriage members --json` (the newcomer's included)
until each counts every replica alive; then stops the newcomer with SIGTERM (a graceful leave)
and waits until every view has it left before the next join. Prints every join's time (from the
newcomer's spawn, so its own start-up is included) and the median, p90, p99 and the worst.
Everything lives in a temporary directory and is stopped on exit.

Usage: bench/membership_join.py [--build build] [--replicas 5] [--joins 50]
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

LIMITS = """governance:
  limits:
    - id: team_rpm
      attach: { level: team }
      type: rpm
      amount: 300
      period: 1m
"""


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    def __init__(self, build, root, name, seed, keys):
        self.cli = os.path.join(build, "cmd", "tokentriage")
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.name = name
        self.sock = os.path.join(self.dir, "tt.sock")
        seeds = f'    seeds: ["127.0.0.1:{seed}"]\n' if seed else ""
        self.log = open(os.path.join(self.dir, "stderr.log"), "w")
        for _ in range(5):  # the port was free for UDP; TCP may have it taken: another one
            self.port = free_port()
            with open(os.path.join(self.dir, "config.yaml"), "w") as f:
                f.write(f"server:\n  socket: {self.sock}\n  http: 127.0.0.1:0\n"
                        f"shared_state:\n  share:\n    node_id: {name}\n"
                        f"    bind: 127.0.0.1:{self.port}\n{seeds}"
                        f"    keyring_file: {keys}\n    cluster: bench\n" + LIMITS)
            self.spawned = time.monotonic()
            self.proc = subprocess.Popen(
                [self.cli, "serve", "-c", os.path.join(self.dir, "config.yaml")],
                stdout=subprocess.DEVNULL, stderr=self.log)
            if wait(lambda: self.proc.poll() is not None or self.started(), 10) \
                    and self.proc.poll() is None:
                return
        with open(self.log.name) as f:
            sys.exit(f"membership_join: {name} did not start:\n{f.read()[-1500:]}")

    def started(self):
        self.log.flush()
        with open(self.log.name) as f:
            return "msg=serving" in f.read()

    def members(self):
        r = subprocess.run([self.cli, "members", "-s", self.sock, "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def sees(r, names, want):
    """True when r's view has every name in `names` in state want[name]."""
    v = r.members()
    if not v:
        return False
    states = {m["id"]: m["state"] for m in v["members"]}
    return all(states.get(n) == want(n) for n in names)


def wait(pred, deadline_s):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * len(xs) + 0.5)) - 1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--replicas", type=int, default=5)
    ap.add_argument("--joins", type=int, default=50)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="tt-bench-join-")
    keys = os.path.join(root, "gossip.keys")
    with open(keys, "w") as f:
        f.write("ERERERERERERERERERERERERERERERERERERERERERE=\n")
    fleet = []
    try:
        for i in range(a.replicas):
            fleet.append(Replica(a.build, root, f"r{i}", fleet[0].port if fleet else 0, keys))
        names = [r.name for r in fleet]
        if not wait(lambda: all(sees(r, names, lambda n: "alive") for r in fleet), 60):
            sys.exit("membership_join: the replicas did not converge")
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print(f"load average: {load}, {os.cpu_count()} CPUs; {a.replicas} replicas, {a.joins} joins")
        times = []
        for k in range(a.joins):
            j = Replica(a.build, root, f"j{k}", random.choice(fleet).port, keys)
            everyone = fleet + [j]
            all_names = names + [j.name]
            ok = wait(lambda: all(sees(r, all_names, lambda n: "alive") for r in everyone), 60)
            ms = (time.monotonic() - j.spawned) * 1000
            if not ok:
                for r in everyone:
                    v = r.members()
                    print(r.name, v and {m["id"]: m["state"] for m in v["members"]})
                j.log.flush()
                with open(j.log.name) as f:
                    print(f"{j.name} (exit {j.proc.poll()}):", f.read()[-2000:])
                sys.exit(f"membership_join: join {k} not in every view after 60 s")
            times.append(ms)
            print(f"join {k}: {ms:.0f} ms")
            j.stop()
            if not wait(lambda: all(sees(r, [j.name], lambda n: "left") for r in fleet), 30):
                sys.exit(f"membership_join: the leave of join {k} was not seen")
        print(f"join to every view over {len(times)} joins: median {pct(times, 50):.0f} ms, "
              f"p90 {pct(times, 90):.0f} ms, p99 {pct(times, 99):.0f} ms, "
              f"worst {max(times):.0f} ms")
    finally:
        for r in fleet:
            r.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
