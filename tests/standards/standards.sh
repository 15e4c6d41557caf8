#!/usr/bin/env bash
# ctest standards: what tokentriage discloses and exports, read by tools nobody here wrote.
#  - every header of the shared vector table (tests/vectors/headers.txt) and of a live daemon's
#    decisions (rpm, tpm, denials, unfittable, several limits, both windows, token_bucket, the
#    largest amounts, periods that are not whole seconds, a share fleet) through an RFC 9651
#    parser, npm's structured-headers (sf_check.cjs says what else is checked);
#  - /metrics of a local daemon and of each replica of a two-replica share fleet through
#    `promtool check metrics` (Prometheus' own linter).
# The daemons run on loopback with private sockets and ephemeral ports; everything they leave
# is removed on exit.
# usage: standards.sh SOURCE_DIR CACHE_DIR TOKENTRIAGE
set -euo pipefail
src=$1 cache=$2 bin=$3
. "$src/tests/standards/tools.sh"
tt_sf_parser "$cache"
tt_promtool "$cache"

work=$(mktemp -d /tmp/tt-standards-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

sf_check() { NODE_PATH="$SF_NODE_PATH" node "$src/tests/standards/sf_check.cjs" "$@"; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# until DEADLINE_S CMD...: runs CMD every 100 ms until it succeeds, or fails after the deadline.
until_ok() {
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || { echo "FAIL: timed out waiting for: $*" >&2; return 1; }
    sleep 0.1
  done
}
# serve NAME CONFIG_BODY: starts a daemon on $work/NAME.{yaml,sock,log}, HTTP on a free port
# (in $port), and waits until /readyz answers.
serve() {
  local name=$1 body=$2
  port=$(free_port)
  printf 'server:\n  socket: %s\n  http: 127.0.0.1:%s\n%s' "$work/$name.sock" "$port" "$body" \
    >"$work/$name.yaml"
  "$bin" serve -c "$work/$name.yaml" 2>"$work/$name.log" &
  pids+=($!)
  until_ok 20 curl -sf "http://127.0.0.1:$port/readyz" \
    || { cat "$work/$name.log" >&2; return 1; }
}
# decide SOCK CASE_LINE ARGS...: one decision; its headers go to $work/headers under CASE_LINE.
decide() {
  local sock=$1 line=$2; shift 2
  echo "## $line" >>"$work/headers"
  "$bin" decide -s "$sock" "$@" >>"$work/headers"
}
# times N SOCK ARGS...: N decisions whose headers are not kept.
times() {
  local n=$1 sock=$2; shift 2
  for _ in $(seq "$n"); do "$bin" decide -s "$sock" "$@" >/dev/null; done
}
lint_metrics() {
  curl -sf "http://127.0.0.1:$1/metrics" >"$work/metrics"
  "$PROMTOOL" check metrics <"$work/metrics" || { echo "FAIL: promtool check metrics on $2" >&2; return 1; }
  echo "promtool check metrics: $2 OK"
}

status=0
sf_check vectors "$src/tests/vectors/headers.txt" || status=1

# ---- a local daemon: one limit per subject level, so each case is its own
limit() { # ID LEVEL TYPE AMOUNT PERIOD [EXTRA...]
  printf '    - id: %s\n      attach: { level: %s }\n      type: %s\n      amount: %s\n      period: %s\n' \
    "$1" "$2" "$3" "$4" "$5"
  shift 5
  for kv in "$@"; do printf '      %s\n' "$kv"; done
}
serve local "governance:
  limits:
$(limit key_rpm key rpm 5 1m 'burst: 3')
$(limit team_tpm team tpm 1000000 1m 'burst: 100000')
$(limit app_tpm app tpm 60000 1m 'burst: 16384')
$(limit win win rpm 10 8s 'algorithm: fixed_window')
$(limit slide slide rpm 100 1m 'algorithm: sliding_window')
$(limit bucket bucket rpm 10 1s 'algorithm: token_bucket' 'burst: 20')
$(limit big_tpm big tpm 999999999999999 8760h)
$(limit sub sub rpm 3 1500ms)
$(limit quick quick rpm 5 250ms)
"
s=$work/local.sock
decide "$s" "rpm id=key_rpm q=5 w=60 qu=- t=12" --subject key=a
times 3 "$s" --subject key=b
decide "$s" "rpm_denied r=0 t=12" --subject key=b
decide "$s" "tpm id=team_tpm q=1000000 w=60 qu=tokens" --subject team=t --tokens 1000
decide "$s" "tpm_unfittable id=app_tpm qu=tokens" --subject app=a --tokens 20000
times 1 "$s" --subject app=b --tokens 16384
decide "$s" "tpm_denied id=app_tpm t=1" --subject app=b --tokens 5000
decide "$s" "several" --subject key=c --subject team=c --tokens 10
decide "$s" "fixed_window id=win q=10 w=8" --subject win=a
times 10 "$s" --subject win=b
decide "$s" "fixed_window_after_ten id=win" --subject win=b
decide "$s" "sliding_window id=slide q=100 w=60" --subject slide=a
decide "$s" "token_bucket id=bucket q=10 w=1" --subject bucket=a
times 20 "$s" --subject bucket=b
decide "$s" "token_bucket_drained id=bucket t=1" --subject bucket=b
decide "$s" "huge id=big_tpm q=999999999999999 w=31536000 qu=tokens" --subject big=a --tokens 1000
decide "$s" "sub_second id=sub q=6 w=3" --subject sub=a
decide "$s" "quarter_second id=quick q=20 w=1" --subject quick=a
lint_metrics "$port" "a local daemon" || status=1

# ---- a share fleet of two on loopback: each replica discloses its own share (docs/share.md)
g0=$(free_port) g1=$(free_port)
share_limits="governance:
  limits:
$(limit fleet_rpm team rpm 300 1m 'burst: 60' 'store: share')
$(limit fleet_tpm org tpm 1200000 1m 'burst: 40000' 'store: share')
"
for i in 0 1; do
  me=$([ $i = 0 ] && echo "$g0" || echo "$g1") peer=$([ $i = 0 ] && echo "$g1" || echo "$g0")
  serve "r$i" "$share_limits
shared_state:
  share:
    node_id: r$i
    bind: 127.0.0.1:$me
    advertise: 127.0.0.1:$me
    seeds: [127.0.0.1:$peer]
    join_timeout: 2s
"
  eval "http$i=$port"
done
sees_two() { "$bin" fleet -s "$1" | grep -q "sees 2 replicas"; }
for i in 0 1; do until_ok 20 sees_two "$work/r$i.sock"; done
decide "$work/r0.sock" "share id=fleet_rpm q=150 w=60" --subject team=t
decide "$work/r1.sock" "share_tpm id=fleet_tpm q=600000 w=60 qu=tokens" --subject org=o --tokens 100
lint_metrics "$http0" "share replica r0" || status=1
lint_metrics "$http1" "share replica r1" || status=1

sf_check headers "$work/headers" || { status=1; cat "$work/headers" >&2; }
exit $status
