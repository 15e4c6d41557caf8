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
set -euo pipefail
cd "$(dirname "$0")/.."
build=build runs=5 duration=2000
while (($#)); do
  case $1 in
  --runs) runs=$2; shift ;;
  --duration) duration=$2; shift ;;
  --build) build=$2; shift ;;
  -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
  *) echo "bench/bench_http.sh: unknown argument $1" >&2; exit 64 ;;
  esac
  shift
done
for bin in "$build/bench/loadgen" "$build/cmd/tokentriage"; do
  [ -x "$bin" ] || { echo "bench/bench_http.sh: $bin missing: run scripts/build.sh $build first" >&2; exit 69; }
done
tmp=$(mktemp -d /tmp/tt-bench-http.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# bench/bench.yaml's limit, with the socket and a loopback HTTP listener
{ echo "server: { socket: $tmp/tt.sock, http: \"127.0.0.1:$port\" }"; sed -n '/^governance:/,$p' bench/bench.yaml; } > "$tmp/tt.yaml"
"$build/cmd/tokentriage" serve -c "$tmp/tt.yaml" 2>"$tmp/serve.log" & pid=$!
for _ in $(seq 100); do [ -S "$tmp/tt.sock" ] && break; sleep 0.1; done
[ -S "$tmp/tt.sock" ] || { cat "$tmp/serve.log"; exit 69; }
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
cases=()
for c in 1 8; do for p in 1 16 64; do
  cases+=("msgpack $tmp/tt.sock $c $p" "http $tmp/tt.sock $c $p" "http tcp:$port $c $p")
done; done
for ((r = 1; r <= runs; r++)); do
  for cs in "${cases[@]}"; do
    read -r proto target c p <<<"$cs"
    out=$("$build/bench/loadgen" --proto "$proto" --socket "$target" -c "$c" -p "$p" -k 10000 \
      -d "$duration" -w 300 --pid "$pid")
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
