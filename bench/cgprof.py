#!/usr/bin/env python3
"""bench/cgprof.py [--ceiling ANSWERS] CALLGRIND.OUT: instructions per decision, and where they go.

Reads one callgrind dump of a daemon that answered only decisions while it was collecting
(bench/callgrind.sh arranges that) and prints one JSON line: the decisions (calls of gov_decide),
the total instructions per decision, and the inclusive instructions per decision of the stages:
  decode  proto_decode_first (the request, one pass)
  decide  gov_decide (lookup, step, disclosure's numbers)
  encode  proto_enc_decision (the answer) + gov_result_render (only when headers are rendered)
  rest    everything else: framing leftovers, the batch's reads and writes, libuv, the handler
The engine's tick (gov_engine_tick: the reclamation slices a timer runs every 100 ms) is not a
decision's cost and is left out of the total: it is per wall-clock second, and under valgrind,
some 50 times slower than the machine, it would be charged to 50 times fewer decisions. It is
printed apart, per decision as measured.
With --ceiling ANSWERS the dump is bench/ceiling's, which answered ANSWERS requests (the load
generator's count: proto_frame is also called once more per read, on the cut end of the
buffer); the one stage is framing (proto_frame).
Inclusive costs come from the call sites (the cost line after each calls= line), so a function
inlined into its caller is counted in the caller.
"""
import json
import re
import sys

STAGES = {"decode": ["proto_decode_first"], "decide": ["gov_decide"],
          "encode": ["proto_enc_decision", "gov_result_render"]}


def main(path, ceiling=0):
    names, calls, incl = {}, {}, {}
    total = None
    cfn = None
    pending = None  # the callee whose inclusive cost line comes next
    for line in open(path, errors="replace"):
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2).strip()
            name = names.get(m.group(1), m.group(1))
            if line.startswith("cfn="):
                cfn = name
            continue
        if line.startswith("calls="):
            n = int(line.split("=", 1)[1].split()[0])
            calls[cfn] = calls.get(cfn, 0) + n
            pending = cfn
            continue
        if pending is not None:
            parts = line.split()
            if len(parts) >= 2:
                incl[pending] = incl.get(pending, 0) + int(parts[1])
            pending = None
            continue
        if line.startswith("summary:") or line.startswith("totals:"):
            total = int(line.split()[1])
    decisions = ceiling or calls.get("gov_decide", 0)
    if not decisions or total is None:
        sys.exit(f"cgprof: no decisions in {path}")
    if ceiling:
        print(json.dumps({"answers": decisions, "instr_per_answer": round(total / decisions),
                          "frame": round(incl.get("proto_frame", 0) / decisions)}))
        return
    tick = incl.get("gov_engine_tick", 0)
    out = {"decisions": decisions, "instr_per_decision": round((total - tick) / decisions)}
    rest = total - tick
    for stage, fns in STAGES.items():
        v = sum(incl.get(f, 0) for f in fns)
        out[stage] = round(v / decisions)
        rest -= v
    out["rest"] = round(rest / decisions)
    out["tick_left_out"] = round(tick / decisions)
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--ceiling":
        main(sys.argv[3], ceiling=int(sys.argv[2]))
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit("usage: bench/cgprof.py [--ceiling ANSWERS] CALLGRIND.OUT")
