#!/usr/bin/env python3
"""The shipped alert rules against a real fleet, not hand-written fixtures.

Three replicas run in network namespaces on a bridge (tests/share/fleet.c through fleetctl), each
with a state directory, a share rpm and tpm limit, a local limit and a redis limit on a
redis-server in the bridge's namespace; a thread sends decisions to every live replica all along.
The fleet goes through the troubles an operator meets, and at each the test scrapes every
replica's /metrics twice, a few seconds apart, from inside its namespace (as the kubelet's network
would; a partitioned replica is still scraped):

  healthy      all three converged;
  killed       r2 SIGKILLed, r0 and r1 have declared it dead, and again a minute on, when their
               views have dropped it (a dead member leaves the table 60 s after its death);
  partitioned  r2 back, then its link cut: each side has declared the other dead;
  udp blocked  r2's gossip datagrams dropped both ways (a policy rule in its namespace: UDP 7946
               only; TCP, so push-pull, passes), until its probes have failed;
  restarted    r1 stopped (SIGTERM), its snapshot overwritten with garbage, started again;
  redis down   redis-server stopped, decisions on the redis limit going on.

Each scenario becomes one `promtool test rules` case. Its input series are the scrapes, stretched
over minutes of rule time so that every `for:` and every range can elapse: a gauge keeps the value
of the second scrape, a counter grows at the rate the two scrapes measured, and
process_start_time_seconds keeps the process's age at the scrape (rebased on rule time, which
starts at the epoch). Every series gets the target labels a PodMonitor gives (pod, namespace,
instance, job); kube-state-metrics' DaemonSet series are written from what the replicas' /readyz
answered. A scenario that follows a healthy stretch starts with 10 minutes of the healthy scrapes;
a replica gone in a scenario (killed, or a restarted process, which is a new pod) is marked stale
where it stops, as Prometheus marks a target that went.

At chosen instants the test asserts exactly which alerts fire, with their labels, and that every
other alert of the rule file is quiet. The rules are read from the shipped rule file; their
annotations are dropped for promtool (it compares annotations too; check_rules.py checks them and
`promtool check rules` their templates).

usage: fleet_monitoring.py SOURCE_DIR TOKENTRIAGE FLEETCTL PROMTOOL PROMETHEUS   (as root)
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import rulefile  # noqa: E402
from exposition import parse  # noqa: E402
from ttcheck import check, summary, wait_for  # noqa: E402

REPLICAS = 3
NAMESPACE = "tokentriage"
HUB_IP = "10.77.0.254"  # the bridge's own address (fleet.c gives the replicas 10.77.0.1..)
REDIS = f"{HUB_IP}:6379"

DEADLINE_S = 30.0
SECOND_SCRAPE_S = 2.0  # the two scrapes of an instant: far enough apart to measure rates

LIMITS = """\
    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 600, period: 1m, burst: 30, store: share }
    - { id: org_tpm, attach: { level: org }, type: tpm, amount: 1200000, period: 1m, burst: 60000, store: share }
    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 120, period: 1m, burst: 10 }
    - { id: app_rpm, attach: { level: app }, type: rpm, amount: 600, period: 1m, store: redis }
"""
SUBJECT = {"team": "t-1", "org": "o-1", "key": "k-1", "app": "a-1"}
# Alerts whose firing is not asserted either way, and why.
UNASSERTED = {
    "TokentriageSlowDecisions": "its p99 measures this shared machine's load (speed is measured in bench/)",
}


def log(msg):
    print(msg, flush=True)


class Fleet:
    """fleetctl's replicas: one command line, one answer line."""

    def __init__(self, fleetctl, tt, clients_dir, work):
        self.tt_bin, self.work = tt, work
        limits = os.path.join(work, "limits.yaml")
        with open(limits, "w") as f:
            f.write(LIMITS)
        self.p = subprocess.Popen([fleetctl, limits], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)
        self.lock = threading.Lock()
        self.info = []
        sys.path.insert(0, clients_dir)

    def cmd(self, line):
        with self.lock:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
            answer = self.p.stdout.readline().strip()
        if not answer.startswith("ok"):
            raise RuntimeError(f"fleetctl {line}: {answer or 'no answer'}")
        return answer[3:]

    def setup(self, options=f"state redis={REDIS}"):
        mode, hub = self.cmd(f"setup {REPLICAS} {options}").split()
        self.netns, self.hub = mode == "netns", hub
        for i in range(REPLICAS):
            name, ip, http, d, sock, ns = self.cmd(f"info {i}").split()
            self.info.append({"name": name, "ip": ip, "http": http, "dir": d, "sock": sock, "ns": ns})

    def block_udp(self, i, blocked):
        """Drops (or lets through again) every UDP datagram to or from port 7946 in replica i's
        namespace, both ways, as a NetworkPolicy or a firewall that admits TCP 7946 only would:
        a policy-routing rule ahead of the local table blackholes them (no iptables needed)."""
        ns = self.info[i]["ns"]
        if blocked:
            steps = [["add", "pref", "10", "ipproto", "udp", "dport", "7946", "blackhole"],
                     ["add", "pref", "20", "lookup", "local"], ["del", "pref", "0"]]
        else:
            steps = [["add", "pref", "0", "lookup", "local"], ["del", "pref", "20"],
                     ["del", "pref", "10"]]
        for s in steps:
            subprocess.run(["ip", "-n", ns, "rule", *s], check=True)

    def hub_exec(self, *argv):
        return ["ip", "netns", "exec", self.hub, *argv]

    def scrape(self, i):
        r = self.info[i]
        p = subprocess.run(["ip", "netns", "exec", r["ns"], "curl", "-sf", "-m", "2",
                            f"http://{r['http']}/metrics"], capture_output=True, text=True)
        return p.stdout if p.returncode == 0 else None

    def ready(self, i):
        return self.cmd(f"ready {i}") == "1"

    def tt(self, i, *args):
        """`tokentriage ARGS -s SOCK` in replica i's namespace on its socket, as `kubectl exec` runs
        it in a pod: (exit code, stdout, stderr)."""
        r = self.info[i]
        p = subprocess.run(["ip", "netns", "exec", r["ns"], self.tt_bin, *args, "-s", r["sock"]],
                           capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout, p.stderr

    def members(self, i):
        """{member id: state} in replica i's view."""
        p = subprocess.run([self.tt_bin, "members", "-s", self.info[i]["sock"], "--json"],
                           capture_output=True, text=True, timeout=5)
        if p.returncode != 0:
            return {}
        import json
        return {m["id"]: m["state"] for m in json.loads(p.stdout).get("members", [])}

    def sees(self, i, expected):
        """True when replica i's view gives each member named in `expected` that state."""
        view = self.members(i)
        return all(view.get(m) == s for m, s in expected.items())

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
            self.p.wait(30)
        except Exception:
            self.p.kill()
            self.p.wait()


class Traffic(threading.Thread):
    """Decisions on every limit, on every replica that answers, about 20 a second each."""

    def __init__(self, fleet):
        super().__init__(daemon=True)
        self.fleet, self.stop_flag, self.sent = fleet, threading.Event(), 0

    def run(self):
        from tokentriage_client import Client
        clients = {}
        while not self.stop_flag.is_set():
            for i, r in enumerate(self.fleet.info):
                try:
                    if i not in clients:
                        clients[i] = Client(r["sock"], timeout=0.5)
                    clients[i].decide(SUBJECT, tokens=500)
                    self.sent += 1
                except Exception:
                    c = clients.pop(i, None)
                    if c:
                        c.close()
            self.stop_flag.wait(0.05)
        for c in clients.values():
            c.close()


class Scenario:
    """One stretch of the fleet in one state: per pod, two (wall time, /metrics) scrapes, and
    the number of replicas whose /readyz answered."""

    def __init__(self, name, scrapes, ready):
        self.name, self.scrapes, self.ready = name, scrapes, ready


def take(fleet, name, pods):
    """Scrapes each of `pods` ({pod label: replica index}) twice, SECOND_SCRAPE_S apart."""
    first = {}
    for pod, i in pods.items():
        text = fleet.scrape(i)
        if text is None:
            raise RuntimeError(f"{name}: {pod} did not answer /metrics")
        first[pod] = (time.time(), text)
    time.sleep(SECOND_SCRAPE_S)  # a measuring interval for the counters' rates, not a wait
    scrapes = {}
    for pod, i in pods.items():
        text = fleet.scrape(i)
        if text is None:
            raise RuntimeError(f"{name}: {pod} did not answer /metrics the second time")
        scrapes[pod] = [first[pod], (time.time(), text)]
    ready = sum(1 for i in range(REPLICAS) if fleet.ready(i))
    log(f"     {name}: scraped {', '.join(pods)}; {ready} ready")
    return Scenario(name, scrapes, ready)


# ---- scrapes to promtool input -----------------------------------------------------------------

def target_labels(fleet, pod, i):
    return {"pod": pod, "namespace": NAMESPACE, "instance": fleet.info[i]["http"],
            "job": f"{NAMESPACE}/tokentriage"}


def series_key(name, labels):
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def fmt(v):
    return repr(float(v)) if v != int(v) or abs(v) >= 1e15 else str(int(v))


class Timeline:
    """Series over rule time (1 minute steps), built segment by segment."""

    def __init__(self):
        self.values = {}    # series key -> list of value terms, one per minute
        self.counter = {}   # series key -> (last raw, last written value), for counters
        self.minutes = 0

    def add(self, series, n):
        """Adds n minutes. series: {key: (kind, raw first, raw second, dt, extra)} where kind is
        gauge, counter or timestamp."""
        for key, (kind, v1, v2, dt, age) in series.items():
            terms = self.values.setdefault(key, ["_"] * self.minutes)
            if len(terms) < self.minutes:  # absent meanwhile
                terms += ["_"] * (self.minutes - len(terms))
            if kind == "counter":
                last = self.counter.get(key)
                start = last[1] + (v1 - last[0]) if last and v1 >= last[0] else v1
                step = max(0.0, (v2 - v1) / dt * 60.0) if dt > 0 else 0.0
                terms += [fmt(start + step * k) for k in range(n)]
                self.counter[key] = (v2, start + step * (n - 1))
            elif kind == "timestamp":  # the process's start, as old at this segment's start
                last = self.counter.get(key)  # as the scrape said; the same process keeps it
                start = last[1] if last and last[0] == v2 else self.minutes * 60 - age
                terms += [fmt(start)] * n
                self.counter[key] = (v2, start)
            else:
                terms += [fmt(v2)] * n
        for key, terms in self.values.items():
            if key not in series and len(terms) == self.minutes:
                if self.minutes and terms[-1] not in ("_", "stale"):
                    terms += ["stale"] + ["_"] * (n - 1)
                else:
                    terms += ["_"] * n
        self.minutes += n

    def input_series(self):
        return [{"series": k, "values": " ".join(v)} for k, v in sorted(self.values.items())]


def scenario_series(fleet, sc, pods):
    """The series of a scenario: {key: (kind, v1, v2, dt, age)}."""
    out = {}
    for pod, ((t1, text1), (t2, text2)) in sc.scrapes.items():
        tl = target_labels(fleet, pod, pods[pod])
        types, s1 = parse(text1)
        _, s2 = parse(text2)
        first = {series_key(n, {**l, **tl}): v for n, l, v in s1}
        for name, labels, v in s2:
            key = series_key(name, {**labels, **tl})
            fam_type = types.get(name)
            if fam_type is None:  # a histogram's or summary's _bucket/_sum/_count
                base = name.rsplit("_", 1)[0]
                fam_type = "counter" if types.get(base) in ("histogram", "summary") else "gauge"
            if name == "process_start_time_seconds":
                out[key] = ("timestamp", v, v, 0, t2 - v)
            else:
                out[key] = ("counter" if fam_type == "counter" else "gauge", first.get(key, v), v, t2 - t1, 0)
    ksm = {"namespace": NAMESPACE, "daemonset": "tokentriage", "job": "kube-state-metrics",
           "instance": "kube-state-metrics:8080"}
    for name, v in (("kube_daemonset_status_desired_number_scheduled", REPLICAS),
                    ("kube_daemonset_status_number_ready", sc.ready),
                    ("kube_daemonset_status_number_available", sc.ready)):
        out[series_key(name, ksm)] = ("gauge", v, v, 0, 0)
    return out


def build_case(fleet, segments, pods, evals, alertnames, severities, only=None):
    """One promtool test: segments [(scenario, minutes)], evals [(minute, {alert: [labels]})
    or (minute, {...}, only at that minute)]; every alert of the rule file is asserted, or those
    of `only`."""
    tl = Timeline()
    for sc, minutes in segments:
        tl.add(scenario_series(fleet, sc, pods), minutes)
    tests = []
    for minute, expected, *at in evals:
        scope = at[0] if at else only
        asserted = [n for n in alertnames if n not in UNASSERTED and (scope is None or n in scope)]
        # the asserted alerts of the rule file, and any expected one it lacks (which then fails)
        for name in asserted + [n for n in expected if n not in alertnames]:
            sev = {"severity": severities[name]} if severities.get(name) else {}
            exp = [{"exp_labels": {**labels, **sev}} for labels in expected.get(name, [])]
            tests.append({"eval_time": f"{minute}m", "alertname": name, "exp_alerts": exp})
    return {"interval": "1m", "input_series": tl.input_series(), "alert_rule_test": tests}


def run_promtool(promtool, work, rules, name, case):
    """promtool test rules on one scenario's case (a file each, so a failure names it)."""
    path = os.path.join(work, f"test_{name.replace(' ', '_')}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({"rule_files": [rules], "evaluation_interval": "1m", "tests": [case]}, f,
                       sort_keys=False, width=1 << 20)
    p = subprocess.run([promtool, "test", "rules", path], capture_output=True, text=True)
    out = "\n".join(l for l in (p.stdout + p.stderr).splitlines() if l.strip())
    return p.returncode, out


# ---- the dashboard -----------------------------------------------------------------------------

DASHBOARD = "k8s/components/monitoring/grafana-dashboard.json"
# Grafana's variables as a dashboard with every replica and limit selected would send them
VARIABLES = {"$__rate_interval": "30s", "$pod": ".*", "$limit": ".*"}


def dashboard_queries(src):
    """[(panel title, PromQL)] of every panel target, Grafana's variables replaced; and the
    template variables' label_values() queries as the metric and label they read."""
    import json
    with open(os.path.join(src, DASHBOARD)) as f:
        dash = json.load(f)
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            expr = t["expr"]
            for k, v in VARIABLES.items():
                expr = expr.replace(k, v)
            out.append((p["title"], expr))
    for v in dash["templating"]["list"]:
        q = v.get("definition", "")
        if q.startswith("label_values("):
            metric, label = [x.strip() for x in q[len("label_values("):-1].split(",")]
            out.append((f"variable {v['name']}", f"count by ({label}) ({metric})"))
    return out


def prometheus_config(fleet, work, rules_path):
    targets = "\n".join(
        f"      - targets: ['{r['http']}']\n        labels: {{ pod: tokentriage-{r['name']}, namespace: {NAMESPACE} }}"
        for r in fleet.info)
    path = os.path.join(work, "prometheus.yml")
    with open(path, "w") as f:
        f.write(f"""global: {{ scrape_interval: 1s, evaluation_interval: 1s }}
rule_files: ['{rules_path}']
scrape_configs:
  - job_name: {NAMESPACE}/tokentriage
    static_configs:
{targets}
""")
    return path


def query(fleet, expr):
    """An instant query to the Prometheus in the hub; the result list, or None on an error."""
    import json
    p = subprocess.run(fleet.hub_exec("curl", "-s", "-m", "5", "-G", "--data-urlencode", f"query={expr}",
                                      "http://127.0.0.1:9090/api/v1/query"), capture_output=True, text=True)
    try:
        answer = json.loads(p.stdout)
    except ValueError:
        return None
    return answer["data"]["result"] if answer.get("status") == "success" else None


def check_dashboard(fleet, promtool, src, work):
    """Every panel's query parses (promtool check rules on them as recording rules) and returns
    data from the Prometheus scraping the healthy fleet."""
    queries = dashboard_queries(src)
    check(len(queries) >= 30, f"the dashboard has {len(queries)} queries (panels' targets and variables)")
    path = os.path.join(work, "dashboard-rules.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:query{i}", "expr": e} for i, (_, e) in enumerate(queries)]}]}, f)
    p = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
    check(p.returncode == 0, "every dashboard query parses (promtool check rules)"
          + ("" if p.returncode == 0 else ":\n" + (p.stdout + p.stderr)[-3000:]))
    empty = {}

    def all_answer():
        empty.clear()
        for title, e in queries:
            if not query(fleet, e):
                empty[title] = e
        return not empty
    try:
        wait_for("every dashboard query to return data", all_answer, DEADLINE_S)
    except TimeoutError:
        pass
    check(not empty, f"all {len(queries)} dashboard queries return data from a real Prometheus scraping the fleet"
          + ("" if not empty else ": empty: " + "; ".join(f"{t}: {e}" for t, e in list(empty.items())[:8])))


# ---- the scenarios -----------------------------------------------------------------------------

def converged(fleet, replicas, n):
    names = {fleet.info[j]["name"]: "alive" for j in replicas}
    return all(fleet.sees(i, names) and len([s for s in fleet.members(i).values() if s in ("alive", "suspect")]) == n
               for i in replicas)


def main():
    src, tt, fleetctl, promtool, prometheus = sys.argv[1:6]
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces", file=sys.stderr)
        return 77
    work = tempfile.mkdtemp(prefix="tt-monitoring-")
    fleet = Fleet(fleetctl, tt, os.path.join(src, "clients", "python"), work)
    procs = {}
    traffic = None
    blocked = False
    try:
        fleet.setup()
        if not fleet.netns:
            print("SKIP: no network namespaces here: a partition cannot be made", file=sys.stderr)
            return 77
        subprocess.run(["ip", "-n", fleet.hub, "addr", "add", f"{HUB_IP}/24", "dev", "br0"], check=True)
        subprocess.run(["ip", "-n", fleet.hub, "link", "set", "lo", "up"], check=True)  # Prometheus' API
        procs["redis"] = subprocess.Popen(fleet.hub_exec(
            "redis-server", "--bind", HUB_IP, "--port", "6379", "--save", "", "--appendonly", "no",
            "--protected-mode", "no"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.makedirs(os.path.join(work, "tsdb"))
        procs["prometheus"] = subprocess.Popen(fleet.hub_exec(
            prometheus, f"--config.file={prometheus_config(fleet, work, os.path.join(src, rulefile.RULES))}",
            f"--storage.tsdb.path={work}/tsdb", "--web.listen-address=127.0.0.1:9090"),
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "prometheus.log"), "w"))
        all3 = range(REPLICAS)
        for i in all3:
            fleet.cmd(f"start {i}")
        for i in all3:
            wait_for(f"r{i} to be ready", lambda i=i: fleet.ready(i), DEADLINE_S)
        wait_for("every replica to see the three alive", lambda: converged(fleet, all3, 3), DEADLINE_S)
        traffic = Traffic(fleet)
        traffic.start()
        wait_for("decisions on every replica", lambda: traffic.sent > 30, DEADLINE_S)
        pods = {f"tokentriage-r{i}": i for i in all3}
        healthy = take(fleet, "healthy", pods)
        # the real Prometheus has loaded the shipped rules and scraped the healthy fleet
        wait_for("Prometheus to scrape the three replicas",
                 lambda: (query(fleet, 'count(up{job="tokentriage/tokentriage"} == 1) == 3') or None), DEADLINE_S,
                 [procs["prometheus"]])
        rules_loaded = query(fleet, "count(ALERTS) or vector(0)")
        check(rules_loaded is not None, "Prometheus runs with the shipped rule file loaded")
        check_dashboard(fleet, promtool, src, work)

        fleet.cmd("signal 2 9")
        wait_for("r0 and r1 to declare r2 dead",
                 lambda: fleet.sees(0, {"r2": "dead"}) and fleet.sees(1, {"r2": "dead"}), DEADLINE_S)
        killed = take(fleet, "killed", {p: i for p, i in pods.items() if i != 2})
        wait_for("r0 and r1 to drop r2 from their views (60 s after its death)",
                 lambda: "r2" not in fleet.members(0) and "r2" not in fleet.members(1), 90)
        killed_later = take(fleet, "killed, a minute on", {p: i for p, i in pods.items() if i != 2})

        fleet.cmd("start 2")
        wait_for("r2 to be ready again", lambda: fleet.ready(2), DEADLINE_S)
        wait_for("every replica to see the three alive again", lambda: converged(fleet, all3, 3), DEADLINE_S)
        fleet.cmd("link 2 down")
        wait_for("each side of the partition to declare the other dead",
                 lambda: fleet.sees(0, {"r2": "dead"}) and fleet.sees(1, {"r2": "dead"})
                 and fleet.sees(2, {"r0": "dead", "r1": "dead"}), DEADLINE_S)
        # and the rest of what the cut does to r2: its probes fail (Lifeguard's score climbs past
        # 2), and it has lost Redis, on the other side of the cut
        def cut_off(text):
            score = next((float(l.split()[1]) for l in text.splitlines()
                          if l.startswith("tokentriage_membership_health_score ")), 0)
            return score > 2 and "tokentriage_redis_up 0\n" in text
        wait_for("r2 to find itself cut off (health score above 2, Redis down)",
                 lambda: cut_off(fleet.scrape(2) or ""), DEADLINE_S)
        partitioned = take(fleet, "partitioned", pods)
        fleet.cmd("link 2 up")
        wait_for("the partition to heal", lambda: converged(fleet, all3, 3), 90)
        # Lifeguard lowers r2's health score by one per answered probe, its probes slowed by
        # that score: a few seconds more before the fleet is healthy again
        wait_for("r2's local health to recover (Lifeguard score 0)",
                 lambda: "tokentriage_membership_health_score 0\n" in (fleet.scrape(2) or ""), 60)

        # UDP 7946 blocked for r2 alone, TCP open: push-pull over TCP keeps bringing its peers
        # back into its view (and it into theirs) while every probe fails, so the views flap;
        # scraped once its own probes have failed (a peer suspect or dead in its view)
        fleet.block_udp(2, True)
        blocked = True
        wait_for("r2's probes to fail (a peer suspect or dead in its view)",
                 lambda: any(s != "alive" for m, s in fleet.members(2).items() if m != "r2"), DEADLINE_S)
        udp_blocked = take(fleet, "udp blocked", pods)
        fleet.block_udp(2, False)
        blocked = False
        wait_for("the fleet to heal once UDP passes", lambda: converged(fleet, all3, 3), 90)
        wait_for("r2's local health to recover again",
                 lambda: "tokentriage_membership_health_score 0\n" in (fleet.scrape(2) or ""), 60)

        before = take(fleet, "before the restart", pods)
        fleet.cmd("signal 1 15")
        snap = os.path.join(fleet.info[1]["dir"], "state", "counters.snap")
        check(os.path.exists(snap), "r1 wrote its snapshot when it stopped")
        with open(snap, "r+b") as f:  # garbage over the header: corrupt, not missing
            f.write(b"\xde\xad\xbe\xef" * 8)
        fleet.cmd("start 1")
        wait_for("r1 to be ready again", lambda: fleet.ready(1), DEADLINE_S)
        wait_for("every replica to see the three alive after the restart", lambda: converged(fleet, all3, 3), DEADLINE_S)
        restarted = take(fleet, "restarted", {"tokentriage-r0": 0, "tokentriage-r1-new": 1, "tokentriage-r2": 2})

        procs["redis"].terminate()
        procs["redis"].wait(10)
        wait_for("every replica to count fallbacks on the redis limit",
                 lambda: all("tokentriage_redis_up 0" in (fleet.scrape(i) or "") for i in all3), DEADLINE_S)
        redis_down = take(fleet, "redis down", {"tokentriage-r0": 0, "tokentriage-r1-new": 1, "tokentriage-r2": 2})

        traffic.stop_flag.set()
        traffic.join()
        rules, names, severities = rulefile.stripped(src, work)
        pods_all = {**pods, "tokentriage-r1-new": 1}

        def T(pod, **extra):
            return {**target_labels(fleet, pod, pods_all[pod]), **extra}
        share = ("team_rpm", "org_tpm")
        later = ["tokentriage-r0", "tokentriage-r1-new", "tokentriage-r2"]  # after r1's restart
        everyone = [{"pod": p} for p in pods]
        cases = {
            "healthy": ([(healthy, 30)], [(25, {})]),
            # r2 killed: the survivors declare it dead; the DaemonSet is a replica short
            # (a minute of rule time per real minute until their views drop it)
            "killed": ([(healthy, 10), (killed, 1), (killed_later, 29)], [
                (11, {"TokentriageMembersDead": [{"pod": "tokentriage-r0"}, {"pod": "tokentriage-r1"}]},
                 {"TokentriageMembersDead"}),
                (35, {"TokentriageNotReady": [{"namespace": NAMESPACE, "daemonset": "tokentriage",
                                               "job": "kube-state-metrics",
                                               "instance": "kube-state-metrics:8080"}]}),
            ]),
            # r2 cut off: every replica declares members dead as it is cut (minute 10), the views
            # split; r2 holds its share limits (it lost more than half its view), so it is not
            # converged; its probes all fail (Lifeguard's health), it has lost Redis too, and it
            # hears no gossip while its seeds name its peers
            "partitioned": ([(healthy, 10), (partitioned, 30)], [
                (11, {"TokentriageMembersDead": everyone}, {"TokentriageMembersDead"}),
                (35, {
                    "TokentriageGossipSilent": [{"pod": "tokentriage-r2"}],
                    "TokentriageMembershipSplit": [{}],
                    "TokentriageShareHeld": [T("tokentriage-r2", limit=l, state="held") for l in share],
                    "TokentriageShareNotConverged": [T("tokentriage-r2", limit=l) for l in share],
                    "TokentriageMembershipUnhealthy": [T("tokentriage-r2")],
                    "TokentriageStoreErrors": [{"pod": "tokentriage-r2"}],
                    "TokentriageRedisDown": [T("tokentriage-r2")],
                }),
            ]),
            # r1 restarted onto a corrupt snapshot, as a new pod: fires, then resolves
            "restarted": ([(before, 10), (restarted, 30)], [
                (15, {"TokentriageStateNotRestored": [T("tokentriage-r1-new", reason="not_a_snapshot")]}),
                (38, {}),
            ]),
            # r2's UDP blocked, TCP open: it hears no datagram (and only it); the views flap as
            # push-pull revives what failed probes kill, so only this alert is asserted here
            "udp blocked": ([(healthy, 10), (udp_blocked, 30)], [(35, {
                "TokentriageGossipSilent": [{"pod": "tokentriage-r2"}],
            })], {"TokentriageGossipSilent"}),
            # Redis gone: every replica's redis limit falls back to its local limiter
            "redis down": ([(healthy, 10), (redis_down, 30)], [(35, {
                "TokentriageStoreErrors": [{"pod": p} for p in later],
                "TokentriageRedisDown": [T(p) for p in later],
            })]),
        }
        for name, (segments, evals, *only) in cases.items():
            scenario_pods = dict(pods_all)
            rc, out = run_promtool(promtool, work, rules, name,
                                   build_case(fleet, segments, scenario_pods, evals, names, severities,
                                              *only))
            check(rc == 0, f"{name}: promtool test rules on the fleet's scrapes: exactly the expected "
                           "alerts fire" + ("" if rc == 0 else ":\n" + out[-5000:]))
    except Exception as e:  # a deadline, or a process that died
        check(False, f"{type(e).__name__}: {e}")
        for r in fleet.info:
            try:
                with open(os.path.join(r["dir"], "log")) as f:
                    log(f"--- {r['name']} log (last lines)\n" + "".join(f.readlines()[-12:]))
            except OSError:
                pass
    finally:
        if blocked:
            fleet.block_udp(2, False)
        if traffic:
            traffic.stop_flag.set()
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait(10)
        fleet.close()
        if os.environ.get("TT_KEEP"):
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return summary("monitoring_fleet")


if __name__ == "__main__":
    sys.exit(main())
