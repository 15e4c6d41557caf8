#!/usr/bin/env python3
"""bench/report.py RAW.jsonl: the median tables of bench/run.sh as Markdown.

One row per (keys, connections, depth). The first table: the median answers/s of each target
over its runs, and the ratios the targets of docs/performance.md are stated in. The second:
the median CPU time the target's process spent per answer (its threads' schedstat), and the
same ratios taken as answers per CPU-second: on a machine other work shares, wall-clock
throughput says how much CPU a target was given, CPU per answer what an answer costs it.
A target whose runs saw error answers is flagged: its rate is not a rate of decisions. The
third: at depth 1 (one request in flight per connection), the median p99 round trip in us.
"""
import json
import statistics
import sys
from collections import defaultdict

ORDER = ["ceiling", "redis", "tt", "tt_redis"]


def table(runs, errors, targets, cases, fmt_value, better):
    """better(a, b): how much better a is than b (>1: a is better)."""
    def med(case, t):
        v = runs.get((case, t))
        return statistics.median(v) if v else None

    ratios = [("tt/ceiling", "tt", "ceiling"), ("tt/redis", "tt", "redis"),
              ("tt_redis/redis", "tt_redis", "redis")]
    ratios = [r for r in ratios if r[1] in targets and r[2] in targets]
    head = ["keys", "conns", "depth"] + targets + [r[0] for r in ratios]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for case in cases:
        cells = [f"{case[0]:,}", str(case[1]), str(case[2])]
        for t in targets:
            m = med(case, t)
            flag = " (errors!)" if errors[case, t] else ""
            cells.append("-" if m is None else fmt_value(m) + flag)
        for _, a, b in ratios:
            ma, mb = med(case, a), med(case, b)
            if not ma or not mb:
                cells.append("-")
            else:
                x = better(ma, mb)
                cells.append(f"{x:.0%}" if b == "ceiling" else f"{x:.1f}x")
        print("| " + " | ".join(cells) + " |")


def main(path):
    rate = defaultdict(list)
    cpu = defaultdict(list)
    p99 = defaultdict(list)
    errors = defaultdict(int)
    for line in open(path):
        r = json.loads(line)
        key = (r["keys"], r["connections"], r["depth"])
        rate[key, r["target"]].append(r["per_s"])
        if "cpu_ns_per_answer" in r:
            cpu[key, r["target"]].append(r["cpu_ns_per_answer"])
        if r["depth"] == 1 and "p99_us" in r:
            p99[key, r["target"]].append(r["p99_us"])
        errors[key, r["target"]] += r["errors"] + r["unexpected"]
    targets = [t for t in ORDER if any(t == k[1] for k in rate)]
    cases = sorted({k[0] for k in rate})
    n = max(len(v) for v in rate.values())
    print(f"Answers per second (median of {n} runs, wall clock):\n")
    table(rate, errors, targets, cases, lambda m: f"{m:,.0f}", lambda a, b: a / b)
    if cpu:
        print("\nTarget CPU time per answer, ns (median; ratios as answers per CPU-second):\n")
        table(cpu, errors, targets, cases, lambda m: f"{m:,.0f}", lambda a, b: b / a)
    if p99:
        print("\nUnpipelined (depth 1) p99 round trip, us (median of the runs' p99s; ratios: how "
              "much shorter):\n")
        table(p99, errors, targets, [c for c in cases if c[2] == 1], lambda m: f"{m:,.1f}",
              lambda a, b: b / a)


if __name__ == "__main__":
    main(sys.argv[1])
