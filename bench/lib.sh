# bench/lib.sh: what the bench scripts share. Sourced, never run: `. "$(dirname "$0")/lib.sh"`
# as a script's first line after its opening comment. It sets -euo pipefail, moves to the
# repository's root, makes the temporary directory $bench_tmp, and on exit, whatever happens,
# stops every process started with bench_spawn and removes $bench_tmp.
# shellcheck shell=bash
set -euo pipefail
cd "$(dirname "$0")/.."
bench_name=bench/$(basename "$0")

# The script's opening comment (its usage), for -h / --help.
bench_help() {
  sed -n '2,/^[^#]/{/^#/p}' "$0"
}

# An argument the script does not take: says so and exits 64 (EX_USAGE).
bench_bad_arg() {
  echo "$bench_name: unknown argument $1" >&2
  exit 64
}

# bench_args "NAME..." "SWITCH..." ARG...: the options of a script. `--NAME VALUE` sets the
# variable NAME to VALUE, `--SWITCH` sets SWITCH to 1, -h / --help prints the usage and exits;
# anything else is refused (bench_bad_arg). Defaults are the variables' values before the call.
bench_args() {
  local names=" $1 " switches=" $2 " name
  shift 2
  while (($#)); do
    name=${1#--}
    case $1 in
    -h | --help) bench_help; exit 0 ;;
    --*) if [[ $names == *" $name "* ]] && (($# > 1)); then
        printf -v "$name" '%s' "$2"
        shift
      elif [[ $switches == *" $name "* ]]; then
        printf -v "$name" 1
      else
        bench_bad_arg "$1"
      fi ;;
    *) bench_bad_arg "$1" ;;
    esac
    shift
  done
}

# bench_need BUILD BIN...: exits 69 (EX_UNAVAILABLE) naming the first BIN that is not there.
bench_need() {
  local build=$1 bin
  shift
  for bin; do
    [ -x "$bin" ] || { echo "$bench_name: $bin missing: run scripts/build.sh $build first" >&2; exit 69; }
  done
}

bench_tmp=$(mktemp -d "/tmp/tt-${bench_name#bench/}.XXXXXX")
bench_pids=()
bench_cleanup() {
  local p
  for p in "${bench_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${bench_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$bench_tmp"
}
trap bench_cleanup EXIT
trap 'exit 130' INT # an interrupted script ends (through the EXIT trap) rather than going on
trap 'exit 143' TERM

# bench_spawn LOG CMD...: starts CMD in the background, stdout and stderr to LOG; its pid is in
# $bench_pid and it is stopped on exit.
bench_spawn() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  bench_pid=$!
  bench_pids+=("$bench_pid")
}

# bench_poll SECONDS CMD...: runs CMD (quietly) every 50 ms until it succeeds, for at most
# SECONDS; 1 if it never did. No blind sleep stands in for a server being up.
bench_poll() {
  local end=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || return 1
    sleep 0.05
  done
}

# bench_wait_socket PATH [SECONDS]: polls until something accepts connections on the unix socket
# PATH (10 s at most); 1 if nothing did.
bench_wait_socket() {
  bench_poll "${2:-10}" python3 -c \
    'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$1"
}

# A loopback TCP port the kernel hands out.
bench_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The machine's load, for the head of every result.
bench_load() {
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
}

# bench_cpu_ticks PID: the process's CPU time (user + system) in clock ticks (getconf CLK_TCK).
bench_cpu_ticks() {
  awk '{print $14+$15}' "/proc/$1/stat"
}

# bench_serve SOCKET LOG CMD...: bench_spawn LOG CMD... (a server), then waits until
# SOCKET accepts connections; when it does not, prints LOG and exits 69.
bench_serve() {
  local sock=$1 log=$2
  shift 2
  bench_spawn "$log" "$@"
  bench_wait_socket "$sock" || {
    echo "$bench_name: nothing accepts connections on $sock (log follows)" >&2
    sed 's/^/  /' "$log" >&2
    exit 69
  }
}
