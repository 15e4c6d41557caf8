#!/usr/bin/env python3
"""The cluster in namespaces: a tokentriage fleet started the way the DaemonSet starts it.

Each node is a network namespace on a private bridge (itself inside a namespace of its own, so
nothing touches the host's network), with an address from 198.18.0.0/24 (RFC 2544's benchmarking
range; it exists only on that bridge). Each replica runs what extract_deploy.cjs read from the
rendered manifests, nothing else:
  - the init container's command on the node's socket directory, as root;
  - the container's command and env, the downward API resolved as the kubelet does (NODE_NAME =
    the node's name, POD_IP = its address), as the pod's user and group, without capabilities;
  - its mounts: the node's socket directory (hostPath) and the projected config and keyring, at
    the same paths, in the node's own mount namespace;
  - the seed name tokentriage-peers.tokentriage.svc.cluster.local resolving, as the headless
    Service with publishNotReadyAddresses does, to every replica's address (the node's
    /etc/netns/<ns>/hosts, which `ip netns exec` mounts on /etc/hosts).
Readiness is the DaemonSet's readiness probe, from inside the node's network.

The test then
  1. waits for every replica to be ready and to count the whole fleet;
  2. runs the client Pod example's command on every node, as that Pod runs it (its user, the
     daemon's group, the socket directory mounted read-only);
  3. checks the division: `fleet` shows N and the local share of each share limit, and a burst of
     decisions on one node is cut at burst / N;
  4. restarts every replica in turn (SIGTERM, graceful leave, start again, ready), one at a time
     as maxUnavailable allows on a small fleet, while a monitor samples `fleet` on every live
     replica: no armed replica may divide by fewer than the replicas that are live and have been
     ready for longer than the gossip propagation allowance, and none may hold.

usage: fleet_e2e.py TOKENTRIAGE DEPLOY.json CLIENTS_DIR PLACEHOLDER_DEPLOY.json
(as root; exits 77 when it cannot run). PLACEHOLDER_DEPLOY.json is k8s/ rendered unchanged, with
the placeholder keyring: the first check is that such a replica refuses to start.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from ttcheck import check, failed, summary, wait_for  # noqa: E402

REPLICAS = 4
SUBNET = "198.18.0."
SEED_NAME = "tokentriage-peers.tokentriage.svc.cluster.local"
# How long a joiner may take to reach every replica: share.md puts the dissemination at a few
# gossip rounds (200 ms each), about 1 s; twice that leaves room for a loaded CI machine.
PROPAGATION_S = 2.0
START_DEADLINE_S = 20.0


def log(msg):
    print(msg, flush=True)


def run(*cmd, check_rc=True, **kw):
    return subprocess.run(cmd, check=check_rc, capture_output=True, text=True, **kw)


class Node:
    """One node: a network namespace, a directory standing for its filesystem, one replica."""

    def __init__(self, fleet, i):
        self.fleet, self.i = fleet, i
        self.name = f"node-{i}"
        self.ns = f"{fleet.tag}-n{i}"
        self.ip = f"{SUBNET}{i}"
        self.root = os.path.join(fleet.work, self.name)
        self.proc = None
        self.ready_at = None  # monotonic time of the first ready probe of the current replica
        self.signaled = False
        self.log_path = os.path.join(fleet.work, f"{self.name}.log")

    def host_dir(self, path):
        """Where a hostPath of this node lives on the test host."""
        return os.path.join(self.root, "host", path.lstrip("/"))

    def setup_network(self):
        sw = self.fleet.switch
        run("ip", "netns", "add", self.ns)
        run("ip", "-n", sw, "link", "add", f"v{self.i}", "type", "veth", "peer", "name", "eth0", "netns", self.ns)
        run("ip", "-n", sw, "link", "set", f"v{self.i}", "master", "br0", "up")
        run("ip", "-n", self.ns, "addr", "add", f"{self.ip}/24", "dev", "eth0")
        run("ip", "-n", self.ns, "link", "set", "eth0", "up")
        run("ip", "-n", self.ns, "link", "set", "lo", "up")
        etc = f"/etc/netns/{self.ns}"
        os.makedirs(etc, exist_ok=True)
        with open(f"{etc}/hosts", "w") as f:
            f.write("127.0.0.1 localhost\n")
            for j in range(1, REPLICAS + 1):
                f.write(f"{SUBNET}{j} {SEED_NAME}\n")

    def mount_script(self, mounts, root_dir):
        """Shell lines that mount `mounts` (extract_deploy.cjs's form) in the current mount
        namespace; projected files are written under root_dir as the kubelet would."""
        d = self.fleet.deploy
        lines = []
        for k, m in enumerate(mounts):
            if "hostPath" in m:
                src = self.host_dir(m["hostPath"])
                os.makedirs(src, exist_ok=True)
            else:
                src = os.path.join(root_dir, f"vol{k}")
                os.makedirs(src, exist_ok=True)
                for name, f in m["files"].items():
                    p = os.path.join(src, name)
                    with open(p, "w") as fh:
                        fh.write(f["content"])
                    if d.get("fsGroup") is not None:  # the kubelet's fsGroup handling
                        os.chown(p, 0, d["fsGroup"])
                        os.chmod(p, f["mode"] | 0o440)
                    else:
                        os.chmod(p, f["mode"])
            self.fleet.mountpoint(m["path"])
            ro = ",ro" if m["readOnly"] else ""
            lines.append(f"mount --bind{' -o ro' if ro else ''} '{src}' '{m['path']}'")
        return lines

    def start(self):
        d = self.fleet.deploy
        values = {"spec.nodeName": self.name, "status.podIP": self.ip}
        env = []
        for e in d["env"]:
            if "fieldPath" in e:
                env.append(f"{e['name']}={values[e['fieldPath']]}")
            else:
                env.append(f"{e['name']}={e['value']}")
        lines = self.mount_script(d["mounts"], os.path.join(self.root, "pod"))
        lines += [subprocess.list2cmdline(c) for c in d["initCommands"]]
        cmd = [self.fleet.tt] + d["command"]
        lines.append(
            "exec setpriv --reuid={u} --regid={g} --clear-groups --inh-caps=-all --bounding-set=-all "
            "--no-new-privs env -i {env} {cmd}".format(
                u=d["runAsUser"], g=d["runAsGroup"], env=" ".join(env), cmd=subprocess.list2cmdline(cmd)))
        with open(self.log_path, "a") as logf:
            logf.write(f"--- start {time.strftime('%H:%M:%S')}\n")
            logf.flush()
            # ip netns exec gives the replica its own mount namespace (propagation: slave).
            self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "sh", "-ec", "\n".join(lines)],
                                         stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        self.ready_at = None
        self.signaled = False

    def probe(self, which):
        p = self.fleet.deploy[which]
        r = run("ip", "netns", "exec", self.ns, "curl", "-fsS", "-m", "1", "-o", "/dev/null",
                f"http://{self.ip}:{p['port']}{p['path']}", check_rc=False)
        return r.returncode == 0

    def wait_ready(self):
        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self.tail()}")
            return self.probe("readiness")
        wait_for(f"{self.name} to be ready", ready, START_DEADLINE_S)
        self.ready_at = time.monotonic()

    def stop(self):
        """SIGTERM, as the kubelet sends it; waits up to the grace period. Returns the exit code."""
        self.signaled = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(self.fleet.deploy["terminationGracePeriodSeconds"])
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def socket(self):
        return os.path.join(self.host_dir(self.fleet.socket_dir), self.fleet.socket_name)

    def cli(self, *args, timeout=5):
        r = run(self.fleet.tt, *args, "-s", self.socket(), "--json", check_rc=False, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"{self.name}: tokentriage {' '.join(args)}: rc {r.returncode}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def tail(self):
        try:
            with open(self.log_path) as f:
                return "".join(f.readlines()[-15:])
        except OSError:
            return ""


def share_rows(fleet_answer):
    """The share limits' rows of a `fleet --json` answer."""
    return [row for row in fleet_answer["limits"] if row.get("store") == "share"]


class Fleet:
    def __init__(self, tt, deploy, clients_dir):
        self.tt, self.deploy, self.clients_dir = tt, deploy, clients_dir
        self.tag = f"tt{os.getpid()}"
        self.switch = f"{self.tag}-sw"
        self.work = tempfile.mkdtemp(prefix="tt-fleet-")
        os.chmod(self.work, 0o755)
        self.created_mountpoints = []
        self.nodes = [Node(self, i) for i in range(1, REPLICAS + 1)]
        config = next(f["content"] for m in deploy["mounts"] if "files" in m
                      for name, f in m["files"].items() if name.endswith(".yaml"))
        sock = next(line.split(":", 1)[1].strip() for line in config.splitlines()
                    if line.strip().startswith("socket:"))
        self.socket_dir, self.socket_name = os.path.split(sock)

    def mountpoint(self, path):
        if not os.path.isdir(path):
            os.makedirs(path)
            self.created_mountpoints.append(path)

    def setup(self):
        run("ip", "netns", "add", self.switch)
        run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.switch, "link", "set", "br0", "up")
        for n in self.nodes:
            n.setup_network()

    def cleanup(self):
        for n in self.nodes:
            if n.proc and n.proc.poll() is None:
                n.proc.kill()
                n.proc.wait()
        for n in self.nodes:
            run("ip", "netns", "del", n.ns, check_rc=False)
            shutil.rmtree(f"/etc/netns/{n.ns}", ignore_errors=True)
        run("ip", "netns", "del", self.switch, check_rc=False)
        for path in reversed(self.created_mountpoints):
            try:
                os.rmdir(path)
            except OSError:
                pass
        try:
            os.rmdir("/etc/netns")  # only if empty, i.e. created for this test
        except OSError:
            pass
        if failed():
            for n in self.nodes:
                log(f"--- {n.name} log (last lines)\n{n.tail()}")
        shutil.rmtree(self.work, ignore_errors=True)

    def converged(self, nodes, n_expected):
        for node in nodes:
            rows = share_rows(node.cli("fleet"))
            if not rows or any(r["n"] != n_expected or r.get("state") != "armed" for r in rows):
                return False
        return True


def test_placeholder_refused(fleet, placeholder_deploy):
    """k8s/ applied unchanged: the placeholder keyring must stop the replica, naming the file."""
    n = fleet.nodes[0]
    saved, fleet.deploy = fleet.deploy, placeholder_deploy
    try:
        n.start()
        rc = n.proc.wait(START_DEADLINE_S)
    finally:
        fleet.deploy = saved
    check(rc == 78 and "keyring_file" in n.tail(),
          f"with the placeholder Secret a replica refuses to start (exit {rc}, 78 expected) and names keyring_file")


def test_start(fleet):
    for n in fleet.nodes:
        n.start()
    for n in fleet.nodes:
        n.wait_ready()
    check(True, f"{REPLICAS} replicas started with the DaemonSet's command, env, user and mounts are ready")
    wait_for("every replica to count the whole fleet", lambda: fleet.converged(fleet.nodes, REPLICAS),
             START_DEADLINE_S)
    check(True, f"every replica's fleet shows N = {REPLICAS}, armed, for every share limit")
    for n in fleet.nodes:
        check(n.probe("liveness"), f"{n.name} answers the liveness probe")


def run_client_pod(fleet, node, groups):
    """Runs the client Pod example's command on `node` as that Pod would run it, with the given
    supplementary groups."""
    c = fleet.deploy["client"]
    lines = []
    for m in c["mounts"]:
        src = node.host_dir(m["hostPath"])
        fleet.mountpoint(m["path"])
        lines.append(f"mount --bind {'-o ro ' if m['readOnly'] else ''}'{src}' '{m['path']}'")
    env = " ".join(f"{e['name']}={e['value']}" for e in c["env"])
    cmd = [fleet.tt] + c["command"][1:]  # the image's tokentriage is the binary under test
    grouping = f"--groups={groups}" if groups else "--clear-groups"
    lines.append(f"exec setpriv --reuid={c['runAsUser']} --regid={c['runAsGroup']} {grouping} "
                 f"--inh-caps=-all --bounding-set=-all --no-new-privs env -i {env} "
                 f"{subprocess.list2cmdline(cmd)}")
    return run("unshare", "-m", "--propagation", "private", "sh", "-ec", "\n".join(lines), check_rc=False)


def test_client_pod(fleet):
    c = fleet.deploy["client"]
    groups = ",".join(str(g) for g in c["supplementalGroups"])
    for n in fleet.nodes:
        r = run_client_pod(fleet, n, groups)
        ok = r.returncode == 0
        if ok:
            answer = json.loads(r.stdout)
            ok = answer.get("verdict") == "admit" and bool(answer.get("headers"))
        check(ok, f"{n.name}: the client Pod's `{' '.join(c['command'])}` (uid {c['runAsUser']}, group "
                  f"{groups}, socket directory read-only) is admitted with headers"
                  + ("" if ok else f": rc {r.returncode} {r.stdout.strip()} {r.stderr.strip()}"))
    r = run_client_pod(fleet, fleet.nodes[0], "")
    check(r.returncode != 0, "without the daemon's group the same client cannot reach the socket "
                             f"(rc {r.returncode}: {r.stderr.strip()[:80]})")


def test_division(fleet):
    sys.path.insert(0, fleet.clients_dir)
    from tokentriage_client import Client

    rows = share_rows(fleet.nodes[0].cli("fleet"))
    for r in rows:
        check(r["n"] == REPLICAS, f"fleet: {r['id']} divides by N = {REPLICAS} (shows {r['n']})")
    # A burst on one node is cut at burst / N: rpm limits present cost 1.
    rpm = next((r for r in rows if r.get("type") == "rpm"), None)
    if not check(rpm is not None, "the deployed config has a share rpm limit"):
        return
    expected = rpm["burst"] // REPLICAS
    rate_per_s = rpm["amount"] / REPLICAS / rpm["period_s"]
    admitted = 0
    t0 = time.monotonic()
    with Client(fleet.nodes[0].socket()) as tt:
        for _ in range(rpm["burst"] + 1):  # a whole-fleet burst would all pass without division
            d = tt.decide({"team": "t-division"}, tokens=1)
            if not d["admit"]:
                break
            admitted += 1
        elapsed = time.monotonic() - t0
    refill = int(rate_per_s * elapsed) + 1
    check(expected <= admitted <= expected + refill,
          f"a burst on one node admits burst/N = {expected} (+ at most {refill} refilled in "
          f"{elapsed:.2f} s): admitted {admitted}, denied the next")


class Monitor(threading.Thread):
    """Samples `fleet` on every live replica and compares its divisor with the live count.

    Live = started, ready and not yet signaled. A replica that just became ready is known at
    once to the seed it joined through and to the others a few gossip rounds later (share.md:
    "join ... about 1 s"), so a divisor one short of the live count is allowed only within
    PROPAGATION_S of a replica becoming ready; the shortfalls seen are reported with their lag.
    """

    def __init__(self, fleet):
        super().__init__(daemon=True)
        self.fleet = fleet
        self.stop_flag = threading.Event()
        self.samples = 0
        self.violations = []
        self.shortfall_lags = []
        self.held = []

    def live(self, t, grace):
        return [n for n in self.fleet.nodes
                if not n.signaled and n.ready_at is not None and n.ready_at + grace <= t]

    def run(self):
        while not self.stop_flag.is_set():
            for n in self.fleet.nodes:
                if n.signaled or n.ready_at is None:
                    continue
                t0 = time.monotonic()
                live_all = len(self.live(t0, 0))  # everything ready before the sample started
                try:
                    rows = share_rows(n.cli("fleet", timeout=2))
                except Exception:
                    continue  # signaled meanwhile, or momentarily busy: not a divisor reading
                t1 = time.monotonic()
                if n.signaled:
                    continue
                live_settled = len(self.live(t1, PROPAGATION_S))
                self.samples += 1
                for r in rows:
                    if r.get("state") == "held":
                        self.held.append(f"{n.name} {r['id']}")
                    if r.get("state") not in ("armed", "held") or r["n"] >= live_all:
                        continue
                    if r["n"] < live_settled:
                        self.violations.append(f"{n.name} {r['id']} divides by {r['n']} with {live_settled} live")
                    else:
                        newest = max(x.ready_at for x in self.live(t0, 0))
                        self.shortfall_lags.append(t1 - newest)
            time.sleep(0.02)


def test_rolling_restart(fleet):
    mon = Monitor(fleet)
    mon.start()
    try:
        for n in fleet.nodes:
            rc = n.stop()
            check(rc == 0, f"{n.name}: SIGTERM leaves gracefully and exits 0 within the grace period (rc {rc})")
            others = [o for o in fleet.nodes if o is not n]
            t0 = time.monotonic()
            wait_for(f"the others to drop {n.name}", lambda: fleet.converged(others, REPLICAS - 1), PROPAGATION_S)
            log(f"     peers dropped {n.name} in {time.monotonic() - t0:.2f} s")
            n.start()
            n.wait_ready()
            t0 = time.monotonic()
            wait_for(f"every replica to count {n.name} again",
                     lambda: fleet.converged(fleet.nodes, REPLICAS), START_DEADLINE_S)
            log(f"     {n.name} restarted; the fleet counted it {time.monotonic() - t0:.2f} s after it was ready")
    finally:
        mon.stop_flag.set()
        mon.join()
    check(mon.samples > 0, f"the monitor sampled the divisors {mon.samples} times during the restart")
    lags = mon.shortfall_lags
    check(not mon.violations, "no live replica divided by fewer than the live count during the rolling "
                              f"restart, beyond {PROPAGATION_S:.0f} s after a replica became ready ("
          + (f"{len(lags)} readings short by a joiner, at most {max(lags):.2f} s after" if lags else "no reading short")
          + ")" + ("" if not mon.violations else ": " + "; ".join(mon.violations[:5])))
    check(not mon.held, "no replica held during the rolling restart (graceful leaves are not a partition)"
          + ("" if not mon.held else ": " + "; ".join(mon.held[:5])))


def main():
    tt, deploy_path, clients_dir, placeholder_path = sys.argv[1:5]
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces and mounts", file=sys.stderr)
        return 77
    for tool in ("ip", "setpriv", "unshare", "curl"):
        if shutil.which(tool) is None:
            print(f"SKIP: {tool} not found (scripts/deps.sh installs it)", file=sys.stderr)
            return 77
    with open(deploy_path) as f:
        deploy = json.load(f)
    fleet = Fleet(os.path.abspath(tt), deploy, os.path.abspath(clients_dir))
    try:
        fleet.setup()
        with open(placeholder_path) as f:
            test_placeholder_refused(fleet, json.load(f))
        test_start(fleet)
        test_client_pod(fleet)
        test_division(fleet)
        test_rolling_restart(fleet)
    except Exception as e:  # a deadline or a replica that died: report it as a failure
        check(False, f"{type(e).__name__}: {e}")
    finally:
        fleet.cleanup()
    return summary("cluster-in-namespaces")


if __name__ == "__main__":
    sys.exit(main())
