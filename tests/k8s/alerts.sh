#!/usr/bin/env bash
# ctest k8s_alerts: the Prometheus rules in k8s/monitoring/ parse (promtool check rules) and
# fire on the series of the trouble they name, staying quiet on a healthy fleet
# (promtool test rules tests/k8s/alerts_test.yaml).
# promtool: tests/standards/tools.sh finds or unpacks it into the build tree's cache.
# usage: alerts.sh SOURCE_DIR CACHE_DIR
set -euo pipefail
src=$1 cache=$2
. "$src/tests/standards/tools.sh"
tt_promtool "$cache"
"$PROMTOOL" check rules "$src/k8s/monitoring/prometheus-rules.yaml"
"$PROMTOOL" test rules "$src/tests/k8s/alerts_test.yaml"
