#!/usr/bin/env bash
# bench/callgrind.sh: instructions per decision of the daemon, end to end, at several depths.
#
#   bench/callgrind.sh [--build DIR] [--daemon BIN] [--depths "1 16 64"] [--ms MS] [--v1]
#                      [--keep DIR] [--ceiling [BIN]] [--config FILE]
#
# For each depth: `tokentriage serve -c bench/bench.yaml` under valgrind's callgrind with
# instrumentation off while it starts; every key (100) is sent once; then instrumentation is
# switched on (callgrind_control -i on), bench/loadgen loads it for MS milliseconds (default
# 3000) on one connection at that depth, the counts are dumped, and bench/cgprof.py prints the instructions
# per decision in total and by stage (decode, decide, encode, rest). Instruction counts do not
# depend on the machine's load, so before/after comparisons need no repetition. --v1 sends
# protocol 1 requests (the daemon renders the headers); the default is protocol 2 (numbers).
# --daemon measures another build's tokentriage (a "before"; give it --v1 if it predates v2).
# --config serves another configuration than bench/bench.yaml (its limits must admit the
# load's requests, {"key": "kNNNNNNNN"}, as bench.yaml's do, or the figures measure denials).
# --ceiling measures bench/ceiling instead (or the ceiling binary BIN): instructions per answer,
# and those in framing (proto_frame).
. "$(dirname "$0")/lib.sh"
build=build daemon="" depths="1 16 64" ms=3000 v1="" keep="" ceiling="" config=bench/bench.yaml
while (($#)); do
  case $1 in
  --build) build=$2; shift ;;
  --daemon) daemon=$2; shift ;;
  --depths) depths=$2; shift ;;
  --ms) ms=$2; shift ;;
  --v1) v1=--v1 ;;
  --keep) keep=$2; shift ;;
  --config) config=$2; shift ;;
  --ceiling)
    ceiling=default
    if [ $# -gt 1 ] && [ "${2#-}" = "$2" ]; then ceiling=$2; shift; fi ;;
  -h | --help) bench_help; exit 0 ;;
  *) bench_bad_arg "$1" ;;
  esac
  shift
done
daemon=${daemon:-$build/cmd/tokentriage}
[ "$ceiling" = default ] && ceiling=$build/bench/ceiling
proto=2
[ -n "$v1" ] && proto=1
tmp=$bench_tmp
for d in $depths; do
  if [ -n "$ceiling" ]; then
    set -- "$ceiling" "$tmp/tt.sock"
  else
    set -- "$daemon" serve -c "$config" -s "$tmp/tt.sock"
  fi
  bench_spawn "$tmp/serve.$d.log" valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$tmp/cg.$d.%p" "$@"
  pid=$bench_pid
  bench_wait_socket "$tmp/tt.sock" 30 || { sed 's/^/  /' "$tmp/serve.$d.log" >&2; exit 69; }
  "$build/bench/loadgen" --proto msgpack --socket "$tmp/tt.sock" -k 100 -p "$d" --prefill $v1 >/dev/null
  callgrind_control -i on "$pid" >/dev/null
  "$build/bench/loadgen" --proto msgpack --socket "$tmp/tt.sock" -c 1 -p "$d" -k 100 -d "$ms" -w 0 $v1 >"$tmp/lg.$d.json"
  callgrind_control -i off "$pid" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$tmp/tt.sock"
  how=()
  [ -n "$ceiling" ] && how=(--ceiling "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["answers"])' "$tmp/lg.$d.json")")
  echo "{\"depth\":$d,\"protocol\":$proto,$(python3 bench/cgprof.py "${how[@]}" "$tmp"/cg.$d.* | sed 's/^{//')"
  if [ -n "$keep" ]; then mkdir -p "$keep" && cp "$tmp"/cg.$d.* "$keep/"; fi
done
