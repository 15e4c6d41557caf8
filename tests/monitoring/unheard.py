#!/usr/bin/env python3
"""Members a restarted replica remembers but has not heard from yet, as an operator sees them.

A replica restarted with state counts in N the members it knew before (its state directory's
members file) until it hears from them or a detection window passes (issue 35, docs/share.md).
Each view of the fleet must show them, or the N it shows cannot be explained from its rows.

Four replicas in network namespaces (fleet_monitoring.py's Fleet) with a state directory and a
share limit. r0 is stopped (SIGTERM: it writes the members it knows), r1..r3 are killed, and r0
starts again alone: it remembers three members it cannot hear, so for the detection window of a
fleet of four (30 s from its start) its N is 4, one of them live. Within that window:

  members       --json: r1, r2 and r3 are rows in state "unheard", the head says 3 of them are
                counted in N and for how long; the table lists them and says why N is 4;
  fleet         --json: n 4, of which 3 unheard; the table's summary says so;
  fleet --all   asks r1..r3 too (seen "unheard"; they do not answer: exit 69) and says r0's
                N counts three unheard members;
  /status       the members table has the three unheard rows, and the N line explains 4.

After the window, N is 1 and the views list no unheard member.

usage: unheard.py SOURCE_DIR TOKENTRIAGE FLEETCTL   (as root)
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import fleet_monitoring as fm  # noqa: E402
from status_page import running_fleet  # noqa: E402
from ttcheck import check, summary, wait_for  # noqa: E402

LIMITS = """\
    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 600, period: 1m, burst: 30, store: share }
"""
UNHEARD = ["r1", "r2", "r3"]
GOSSIP_PORT = 7946  # fleet.h's FLEET_GOSSIP_PORT
WINDOW_S = 30.0  # detect_within for a fleet of 4 (docs/share.md): 6 s + 24 s


def as_json(out):
    try:
        return json.loads(out)
    except ValueError:
        return {}


def status_page(fleet):
    r = fleet.info[0]
    p = subprocess.run(["ip", "netns", "exec", r["ns"], "curl", "-sf", "-m", "5",
                        f"http://{r['http']}/status"], capture_output=True, text=True)
    return p.stdout


def main():
    src, tt_bin, fleetctl = sys.argv[1:4]
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces", file=sys.stderr)
        return 77
    work = tempfile.mkdtemp(prefix="tt-unheard-")
    fm.REPLICAS = 4
    fleet = None
    try:
        fleet = running_fleet(src, tt_bin, fleetctl, work, "state", LIMITS)
        if not fleet:
            print("SKIP: no network namespaces here", file=sys.stderr)
            return 77
        members_file = os.path.join(fleet.info[0]["dir"], "state", "members")
        fleet.cmd("signal 0 15")
        check(os.path.exists(members_file), "r0 wrote the members it knew when it stopped")
        for i in (1, 2, 3):
            fleet.cmd(f"signal {i} 9")
        fleet.cmd("start 0")
        wait_for("r0 to be ready again (alone: no seed answers)", lambda: fleet.ready(0), fm.DEADLINE_S,
                 every_s=0.1)

        rc, out, err = fleet.tt(0, "fleet", "--json")
        view = as_json(out)
        check(rc == 0 and view.get("n") == 4,
              f"r0's N is 4 while it remembers three members it has not heard from ({out.strip()}{err})")
        check(view.get("unheard") == 3, f"fleet --json says 3 of them are unheard ({view.get('unheard')})")
        rc, out, err = fleet.tt(0, "fleet")
        check(rc == 0 and "sees 4 replicas" in out and "3 unheard" in out,
              f"fleet's summary explains N = 4 with 3 unheard members:\n{out}{err}")

        rc, out, err = fleet.tt(0, "members", "--json")
        m = as_json(out)
        states = {row.get("id"): row.get("state") for row in m.get("members", [])}
        check(states == {"r0": "alive", "r1": "unheard", "r2": "unheard", "r3": "unheard"},
              f"members --json lists r1, r2 and r3 as unheard beside r0 alive ({states})")
        rows = {row.get("id"): row for row in m.get("members", [])}
        check(all(rows.get(i, {}).get("address") == f"{fleet.info[k]['ip']}:{GOSSIP_PORT}"
                  and rows[i].get("last_heard_ms") == -1 for k, i in enumerate(UNHEARD, 1)),
              "each at the address r0 remembers, never heard (last_heard_ms -1)")
        check(m.get("live") == 1 and m.get("unheard") == 3 and 0 < m.get("unheard_for_ms", 0) <= WINDOW_S * 1000,
              f"the head: 1 live, 3 unheard counted in N for at most {WINDOW_S:.0f} s more "
              f"(live {m.get('live')}, unheard {m.get('unheard')}, for {m.get('unheard_for_ms')} ms)")
        rc, out, err = fleet.tt(0, "members")
        table = [l.split() for l in out.splitlines()]
        listed = sorted(c[0] for c in table if len(c) > 2 and "unheard" in c)
        check(rc == 0 and listed == UNHEARD, f"members lists them as unheard:\n{out}{err}")
        check("N = 4" in out and "3 unheard" in out, f"and says why N is 4:\n{out}")

        rc, out, err = fleet.tt(0, "fleet", "--all", "--timeout", "1000")
        seen = sorted(l.split()[0] for l in out.splitlines() if len(l.split()) > 1 and l.split()[1] == "unheard")
        check(rc == 69 and seen == UNHEARD,
              f"fleet --all asks the unheard members too (seen unheard; down, so exit 69; rc {rc}):\n{out}{err}")
        check("3 unheard" in out, f"and says r0's N counts three unheard members:\n{out}")

        page = status_page(fleet)
        for i in UNHEARD:
            check(f'data-member="{i}"' in page and "unheard" in page[page.find(f'data-member="{i}"'):][:400],
                  f"/status lists {i} as unheard")
        check("N = <b>4</b>" in page and "3 unheard" in page, "and its N line explains 4")

        wait_for("the window to pass: r0's N back to 1",
                 lambda: as_json(fleet.tt(0, "fleet", "--json")[1]).get("n") == 1, WINDOW_S + 15, every_s=0.5)
        rc, out, err = fleet.tt(0, "members", "--json")
        m = as_json(out)
        check([row.get("id") for row in m.get("members", [])] == ["r0"] and m.get("unheard") == 0,
              f"after the window r0 lists itself alone, none unheard ({out.strip()})")
        check("unheard" not in status_page(fleet).split("<table id=\"members\"")[-1].split("</table>")[0],
              "and /status lists no unheard member")
    except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as e:
        check(False, str(e))
    finally:
        if fleet:
            fleet.close()
        shutil.rmtree(work, ignore_errors=True)
    return summary("unheard")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
