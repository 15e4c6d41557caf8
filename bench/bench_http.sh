#!/usr/bin/env bash
# bench/bench_http.sh: decisions per second over the HTTP front door (SPEC §12) beside the msgpack
# socket, one daemon, one load generator (bench/loadgen), the same keys and depths.
#
#   bench/bench_http.sh [--runs N] [--duration MS] [--build DIR]
#
# Starts `tokentriage serve` with bench/bench.yaml's limit (one local gcra limit per key) plus a
# loopback HTTP listener, then drives it with loadgen --proto msgpack (the
# socket), --proto http over the socket and --proto http over TCP (keep-alive connections, GET
# /v1/decide?key=..., pipelined to the depth), at depths 1, 16 and 64 on 1 and 8 connections over
# 10k keys. Runs are interleaved (run 1 of every case, then run 2, ...); the table gives the
# median decisions/s and the daemon's CPU ns per decision (what a decision costs it, which other
# load on the machine does not change much), and each HTTP case against msgpack.
. "$(dirname "$0")/lib.sh"
build=build runs=5 duration=2000
bench_args "runs duration build" "" "$@"
bench_need "$build" "$build/bench/loadgen" "$build/cmd/tokentriage"
tmp=$bench_tmp
port=$(bench_free_port)
# bench/bench.yaml's limit, with the socket and a loopback HTTP listener that decides for a bearer
# token (SPEC §9), each request carrying it
token=bench-token-0123456789abcdef
echo "tokens: [{ name: bench, token: $token, subjects: { key: [\"*\"] } }]" > "$tmp/tokens.yaml"
{ echo "server: { socket: $tmp/tt.sock, http: \"127.0.0.1:$port\", http_decide: on,"
  echo "          tokens_file: $tmp/tokens.yaml }"
  sed -n '/^governance:/,$p' bench/bench.yaml; } > "$tmp/tt.yaml"
bench_serve "$tmp/tt.sock" "$tmp/serve.log" "$build/cmd/tokentriage" serve -c "$tmp/tt.yaml"
pid=$bench_pid
bench_load
cases=()
for c in 1 8; do for p in 1 16 64; do
  cases+=("msgpack $tmp/tt.sock $c $p" "http $tmp/tt.sock $c $p" "http tcp:$port $c $p")
done; done
for ((r = 1; r <= runs; r++)); do
  for cs in "${cases[@]}"; do
    read -r proto target c p <<<"$cs"
    out=$("$build/bench/loadgen" --proto "$proto" --socket "$target" -c "$c" -p "$p" -k 10000 \
      -d "$duration" -w 300 --pid "$pid" --token "$token")
    where=$([[ $target == tcp:* ]] && echo tcp || echo socket)
    echo "$proto $where $c $p $out" >> "$tmp/raw"
  done
done
python3 - "$tmp/raw" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    proto, where, c, p, js = line.split(" ", 4)
    d = json.loads(js)
    if d["errors"] or d["unexpected"]:
        print("errors in a run:", line.strip()); sys.exit(1)
    rows.setdefault((int(c), int(p), proto, where), []).append(d)
print(f"{'conns':>5} {'depth':>5} {'front door':<14} {'decisions/s':>12} {'CPU ns/decision':>16} {'vs msgpack':>10}")
for (c, p, proto, where), ds in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "msgpack", kv[0][3])):
    rate = statistics.median(d["per_s"] for d in ds)
    cpu = statistics.median(d.get("cpu_ns_per_answer", 0) for d in ds)
    base = statistics.median(d["per_s"] for d in rows[(c, p, "msgpack", "socket")])
    print(f"{c:>5} {p:>5} {proto + ' ' + where:<14} {rate:>12.0f} {cpu:>16.0f} {rate / base:>9.2f}x")
print(f"medians of {len(next(iter(rows.values())))} runs")
PY
