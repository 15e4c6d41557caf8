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
import socket
import subprocess
import sys
import tempfile
import time

from serve import Serve, free_port, wait

LIMITS = """governance:
  limits:
    - id: team_rpm
      attach: { level: team }
      type: rpm
      amount: 300
      period: 1m
"""


class Replica(Serve):
    def __init__(self, build, root, name, seed, keys):
        super().__init__(build, root, name)
        seeds = f'    seeds: ["127.0.0.1:{seed}"]\n' if seed else ""
        for _ in range(5):  # the port was free for UDP; TCP may have it taken: another one
            self.port = free_port(socket.SOCK_DGRAM)
            self.spawn(f"server:\n  socket: {self.socket}\n  http: 127.0.0.1:0\n"
                       f"shared_state:\n  share:\n    node_id: {name}\n"
                       f"    bind: 127.0.0.1:{self.port}\n{seeds}"
                       f"    keyring_file: {keys}\n    cluster: bench\n" + LIMITS)
            if wait(lambda: self.proc.poll() is not None or self.started(), 10) \
                    and self.proc.poll() is None:
                return
            self.stop()
        sys.exit(f"membership_join: {name} did not start:\n{self.log_text()[-1500:]}")

    def started(self):
        return "msg=serving" in self.log_text()

    def members(self):
        r = subprocess.run([self.cli, "members", "-s", self.socket, "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None


def sees(r, names, want):
    """True when r's view has every name in `names` in state want[name]."""
    v = r.members()
    if not v:
        return False
    states = {m["id"]: m["state"] for m in v["members"]}
    return all(states.get(n) == want(n) for n in names)


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
                print(f"{j.name} (exit {j.proc.poll()}):", j.log_text()[-2000:])
                sys.exit(f"membership_join: join {k} not in every view after 60 s")
            times.append(ms)
            print(f"join {k}: {ms:.0f} ms")
            j.stop(grace=10)
            if not wait(lambda: all(sees(r, [j.name], lambda n: "left") for r in fleet), 30):
                sys.exit(f"membership_join: the leave of join {k} was not seen")
        print(f"join to every view over {len(times)} joins: median {pct(times, 50):.0f} ms, "
              f"p90 {pct(times, 90):.0f} ms, p99 {pct(times, 99):.0f} ms, "
              f"worst {max(times):.0f} ms")
    finally:
        for r in fleet:
            r.stop(grace=10)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
