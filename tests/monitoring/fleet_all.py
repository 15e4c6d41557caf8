#!/usr/bin/env python3
"""`tokentriage fleet --all` and `fleet`'s columns on a real fleet (issue 30 item 8).

Three replicas in network namespaces on a bridge (fleet_monitoring.py's Fleet), a share limit and
a local limit. The command runs in r0's namespace on r0's socket, as `kubectl exec` runs it in a
pod, and gathers every member's view over its HTTP listener (GET /v1/fleet, port 9464):

  healthy   one row per replica and limit, every replica answered, N = 3 everywhere, nothing
            marked; --json holds the three views; `fleet` shows the share columns on the share
            limit only, `--wide` every column;
  a peer    r2 killed, a fake peer on its address (fakepeer.py): one whose view says N = 5 is
            marked as disagreeing; one that answers garbage, one that never answers and one that
            floods are each reported on r2's row with what was wrong, within the timeout, the
            other rows intact, exit 69.

usage: fleet_all.py SOURCE_DIR TOKENTRIAGE FLEETCTL   (as root)
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
from status_page import DEADLINE_S, fm, running_fleet  # noqa: E402  (the same fleet and limits)
from ttcheck import check, summary, wait_for  # noqa: E402


LIMITS = """\
    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 600, period: 1m, burst: 30, store: share }
    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 120, period: 1m, burst: 10 }
"""


def run(fleet, *args):
    return fleet.tt(0, "fleet", *args)


def rows(out):
    """The table's rows (after its header line) as lists of cells."""
    lines = out.splitlines()
    head = next(i for i, l in enumerate(lines) if l.startswith("REPLICA"))
    return [l.split() for l in lines[head + 1:] if l.strip()]


def main():
    src, tt, fleetctl = sys.argv[1:4]
    if os.geteuid() != 0:
        print("SKIP: needs root for network namespaces", file=sys.stderr)
        return 77
    work = tempfile.mkdtemp(prefix="tt-fleet-all-")
    fleet = peer = None
    try:
        fleet = running_fleet(src, tt, fleetctl, work, "", LIMITS)
        if not fleet:
            print("SKIP: no network namespaces here", file=sys.stderr)
            return 77

        rc, out, err = run(fleet, "--all")
        check(rc == 0, f"fleet --all answers (rc {rc}; {err.strip()})")
        got = rows(out) if "REPLICA" in out else []
        pairs = sorted((row[0], row[3]) for row in got)
        check(pairs == sorted((r, l) for r in ("r0", "r1", "r2") for l in ("team_rpm", "key_rpm")),
              f"one row per replica and limit:\n{out}")
        check(bool(got) and all(row[2] == "3" for row in got), "every replica sees N = 3")
        check(bool(got) and all(row[1] == ("self" if row[0] == "r0" else "alive") for row in got),
              "each row says how r0 sees that replica (SEEN)")
        check(bool(got) and "DISAGREE" not in out and "*" not in out,
              "nothing is marked on a healthy fleet")
        rc, out, err = run(fleet, "--all", "--json")
        try:
            views = json.loads(out)["replicas"]
        except (ValueError, KeyError):
            views = []
        check(sorted(v.get("node") for v in views) == ["r0", "r1", "r2"]
              and all(v["fleet"]["n"] == 3 for v in views), f"--all --json holds the three views: {out}")

        rc, out, err = run(fleet)
        share = out[out.find("share limits"):out.find("local limits")] if "share limits" in out else ""
        local = out[out.find("local limits"):] if "local limits" in out else ""
        check(rc == 0 and "CONVERGED" in share and "team_rpm" in share,
              f"fleet shows the share limit with the share columns:\n{out}")
        check("key_rpm" in local and "CONVERGED" not in local and "DIVISOR_MIN" not in local
              and "SUSTAINED_BOUND" in local, "and the local limit without them")
        rc, out, err = run(fleet, "--wide")
        check(rc == 0 and out.count("DIVISOR_MIN") == 1 and "key_rpm" in out,
              f"--wide: one table, every column:\n{out}")

        fleet.cmd("signal 2 9")
        wait_for("r0 and r1 see r2 dead",
                 lambda: all(fleet.sees(i, {"r2": "dead"}) for i in (0, 1)), DEADLINE_S, every_s=0.2)
        r2 = fleet.info[2]
        for mode in ("fleet", "garbage", "silent", "flood"):
            peer = subprocess.Popen(["ip", "netns", "exec", r2["ns"], sys.executable,
                                     os.path.join(HERE, "fakepeer.py"), r2["ip"], "9464", mode],
                                    stdout=subprocess.PIPE, text=True)
            check(peer.stdout.readline().strip() == "listening", f"a fake r2 ({mode}) listens")
            rc, out, err = run(fleet, "--all", "--timeout", "1000")
            r2rows = [l for l in out.splitlines() if l.startswith("r2 ")]
            others = [row for row in rows(out) if row[0] in ("r0", "r1")] if "REPLICA" in out else []
            check(len(others) == 4 and all(row[2] == "2" for row in others),
                  f"{mode}: r0's and r1's rows are whole, N = 2:\n{out}{err}")
            if mode == "fleet":
                check(rc == 0 and any(" 5*" in l for l in r2rows)
                      and "N DISAGREES" in out, f"fleet: r2's N of 5 is marked:\n{out}")
                # r2 answers while r0 holds it dead: a split view, shown on its row
                check(all(row[1] == "dead" for row in rows(out) if row[0] == "r2")
                      and all(row[1] in ("self", "alive") for row in rows(out) if row[0] != "r2"),
                      f"fleet: each row says how r0 sees that replica (r2 dead):\n{out}")
            else:
                want = {"garbage": "not a fleet answer", "silent": "no answer within 1000 ms",
                        "flood": "longer than"}[mode]
                check(rc == 69 and any(want in l for l in r2rows),
                      f"{mode}: r2's row says what was wrong ({want!r}), exit 69 (rc {rc}):\n{out}{err}")
            peer.kill()
            peer.wait()
            peer = None
    except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as e:
        check(False, str(e))
    finally:
        if peer:
            peer.kill()
            peer.wait()
        if fleet:
            fleet.close()
        shutil.rmtree(work, ignore_errors=True)
    return summary("fleet_all")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
