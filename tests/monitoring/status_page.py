#!/usr/bin/env python3
"""The /status page of a real fleet, in a real browser (issue 30 item 7).

Three replicas run in network namespaces on a bridge (tests/share/fleet.c through fleetctl,
fleet_monitoring.py's Fleet), with a share limit, a local limit and a redis limit (redis-server in
the bridge's namespace), decisions flowing to each.
Debian's chromium, headless and with JavaScript off, driven by playwright-core
(status_page.cjs, run in the bridge's namespace where the listeners are), loads r0's page:

  healthy   it renders (styled: the policy lets its style in), names r0, r1 and r2 alive,
            N = 3, both limits with their charts drawn, and the browser fetched nothing but
            the page, with no policy violation; Redis up;
  redis     redis-server stopped: the page shows Redis down;
  killed    r2 SIGKILLed: the page shows r2 suspect, then dead (N = 2); a screenshot of each.

usage: status_page.py SOURCE_DIR TOKENTRIAGE FLEETCTL CHROMIUM SHOTS_DIR   (as root; NODE_PATH
holds playwright-core). The screenshot docs/status-page.png is the `suspect` one of a run with
TT_STATUS_WARMUP_S=90 (traffic that long before the kill, so the charts have a history).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import fleet_monitoring as fm  # noqa: E402
from ttcheck import check, summary, wait_for  # noqa: E402

fm.LIMITS = """\
    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 600, period: 1m, burst: 30, store: share }
    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 120, period: 1m, burst: 10 }
    - { id: app_rpm, attach: { level: app }, type: rpm, amount: 600, period: 1m, store: redis }
"""
fm.SUBJECT = {"team": "t-1", "key": "k-1", "app": "a-1"}
DEADLINE_S = 60.0


def running_fleet(src, tt, fleetctl, work, options, limits=fm.LIMITS):
    """fleet_monitoring's Fleet with `limits` (the text under governance.limits), every replica
    started and seeing the others alive (fleet_all.py's too); None where network namespaces
    cannot be made. With redis= in the options, a redis-server on the bridge (fleet.redis)."""
    fm.LIMITS = limits  # what Fleet writes for fleetctl
    fleet = fm.Fleet(fleetctl, tt, os.path.join(src, "clients", "python"), work)
    fleet.setup(options)
    if not fleet.netns:
        fleet.close()
        return None
    # the bridge's own address: a browser or a redis-server in the bridge's namespace
    subprocess.run(["ip", "-n", fleet.hub, "addr", "add", f"{fm.HUB_IP}/24", "dev", "br0"],
                   check=True)
    if "redis=" in options:
        fleet.redis = subprocess.Popen(fleet.hub_exec(
            "redis-server", "--bind", fm.HUB_IP, "--port", "6379", "--save", "", "--appendonly",
            "no", "--protected-mode", "no"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for i in range(fm.REPLICAS):
        fleet.cmd(f"start {i}")
    every = {r["name"]: "alive" for r in fleet.info}
    wait_for("every replica ready, seeing the others alive",
             lambda: all(fleet.ready(i) and fleet.sees(i, every) for i in range(fm.REPLICAS)),
             DEADLINE_S, every_s=0.2)
    return fleet


class Browser:
    """status_page.cjs: one JSON line per command."""

    def __init__(self, fleet, chromium, url, work):
        ud = tempfile.mkdtemp(prefix="chromium-", dir=work)
        self.p = subprocess.Popen(fleet.hub_exec("node", os.path.join(HERE, "status_page.cjs"),
                                                 chromium, url, ud),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  bufsize=1)

    def answer(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"status_page.cjs ended ({self.p.wait()})")
        return json.loads(line)

    def poll(self, member, state, shot=""):
        self.p.stdin.write(f"poll {member} {state} {int(DEADLINE_S * 1000)} {shot}\n")
        self.p.stdin.flush()
        return self.answer()

    close = fm.Fleet.close  # quit, then a bounded wait


def only_the_page(view, url):
    return view.get("requests") == [url] and not view.get("violations")


def main():
    src, tt, fleetctl, chromium, shots = sys.argv[1:6]
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces", file=sys.stderr)
        return 77
    work = tempfile.mkdtemp(prefix="tt-status-page-")
    os.makedirs(shots, exist_ok=True)
    fleet = traffic = browser = None
    try:
        fleet = running_fleet(src, tt, fleetctl, work, f"state redis={fm.REDIS}")
        if not fleet:
            print("SKIP: no network namespaces here", file=sys.stderr)
            return 77
        every = {r["name"]: "alive" for r in fleet.info}
        traffic = fm.Traffic(fleet)
        traffic.start()
        url = f"http://{fleet.info[0]['http']}/status"
        browser = Browser(fleet, chromium, url, work)
        view = browser.answer()
        if view.get("event") == "loaded":
            # the ring's first sample is a baseline: a line needs the next one, 5 s later
            def drawn():
                v = browser.poll("r0", "alive")
                lims = v.get("limits") or []
                return v if lims and all(lim["charts"] == 2 for lim in lims) else None
            try:
                view = {**wait_for("both limits charted on the page", drawn, 20.0, every_s=0.5),
                        "csp": view["csp"], "status": view["status"]}
            except TimeoutError as e:
                check(False, str(e))
        check(view.get("event") in ("loaded", "seen") and view.get("status", 200) == 200,
              f"r0's /status renders in chromium ({view.get('event')}, {view.get('message', '')})")
        check("default-src 'none'" in view.get("csp", "default-src 'none'"),
              "it is served with a policy that forbids fetching anything")
        check(only_the_page(view, url),
              f"the browser fetched nothing but the page, no policy violation ({view.get('requests')}, "
              f"{view.get('violations')})")
        check(view.get("styled") == "collapse", "the page's own style applies (its hash is allowed)")
        check(view.get("members") == every, f"r0, r1 and r2 are alive on the page ({view.get('members')})")
        check(view.get("n") == 3, f"N = 3 ({view.get('n')})")
        ids = [lim["id"] for lim in view.get("limits", [])]
        check(ids == ["team_rpm", "key_rpm", "app_rpm"], f"the three limits are listed ({ids})")
        check(all(lim["charts"] == 2 for lim in view.get("limits", [])),
              "each limit has its admissions and denials drawn")
        share = next((lim for lim in view.get("limits", []) if lim["id"] == "team_rpm"), None)
        check(share is not None and "share" in share["cells"][1] and share["cells"][5] == "200",
              f"team_rpm's share here is 600 / 3 = 200 ({share and share['cells']})")

        warmup = float(os.environ.get("TT_STATUS_WARMUP_S", "0"))  # for the docs' screenshot
        if warmup:  # not a wait for a state: history for the picture (off in the suite)
            time.sleep(warmup)
        up = browser.poll("redis", "up")
        check(up["event"] == "seen", f"Redis is up on the page ({up['states']})")
        fleet.redis.terminate()
        fleet.redis.wait(10)
        down = browser.poll("redis", "down")
        check(down["event"] == "seen", f"redis-server stopped, the page shows Redis down "
              f"({down['states']})")

        fleet.cmd("signal 2 9")
        suspect = browser.poll("r2", "suspect", os.path.join(shots, "status-suspect.png"))
        check(suspect["event"] == "seen",
              f"after r2 is killed the page shows it suspect (states seen: {suspect['states']})")
        dead = browser.poll("r2", "dead", os.path.join(shots, "status-dead.png"))
        check(dead["event"] == "seen", f"then dead (states seen: {dead['states']})")
        check(dead.get("n") == 2, f"N = 2 once r2 is dead ({dead.get('n')})")
        check(only_the_page(dead, url), "still nothing fetched but the page")
    except (RuntimeError, TimeoutError) as e:
        check(False, str(e))
    finally:
        if browser:
            browser.close()
        if traffic:
            traffic.stop_flag.set()
            traffic.join(5)
        if fleet and getattr(fleet, "redis", None) and fleet.redis.poll() is None:
            fleet.redis.kill()
            fleet.redis.wait()
        if fleet:
            fleet.close()
        shutil.rmtree(work, ignore_errors=True)
    return summary("status_page")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
