#!/usr/bin/env bash
# ctest k8s_alerts: the Prometheus rules in k8s/monitoring/ parse (promtool check rules) and
# fire on the series of the trouble they name, staying quiet on a healthy fleet
# (promtool test rules tests/k8s/alerts_test.yaml).
# promtool: the one on PATH, else the one in Debian's prometheus package, unpacked (not
# installed: that would set up a Prometheus service) into the build tree's cache.
# usage: alerts.sh SOURCE_DIR CACHE_DIR
set -euo pipefail
src=$1 cache=$2
promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
  promtool="$cache/promtool/usr/bin/promtool"
  mkdir -p "$cache"
  exec 9>"$cache/.lock-promtool"
  flock 9
  if [ ! -x "$promtool" ]; then
    tmp=$(mktemp -d)
    # (the package lists may be missing on a fresh machine: update them once and retry)
    (cd "$tmp" && { apt-get download -qq prometheus || { apt-get update -qq && apt-get download -qq prometheus; }; } >/dev/null 2>&1) \
      || { rm -rf "$tmp"; echo "SKIP: promtool not on PATH and apt-get download prometheus failed" >&2; exit 77; }
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
    mkdir -p "$cache/promtool/usr/bin" && mv "$tmp/x/usr/bin/promtool" "$promtool"
    rm -rf "$tmp"
  fi
  flock -u 9
fi
"$promtool" check rules "$src/k8s/monitoring/prometheus-rules.yaml"
"$promtool" test rules "$src/tests/k8s/alerts_test.yaml"
