#!/usr/bin/env bash
# ctest k8s_alerts: the Prometheus rules of k8s/components/monitoring parse (promtool check rules)
# and are what an operator installs (tests/monitoring/check_rules.py: severity, summary,
# description and a runbook_url whose anchor docs/operators.md has; the PrometheusRule holds the
# plain file's groups; the hand-written cases of alerts_test.yaml; the component renders).
# promtool: tests/standards/tools.sh finds or unpacks it into the build tree's cache; kubectl:
# tests/k8s/tools.sh.
# usage: alerts.sh SOURCE_DIR CACHE_DIR
set -euo pipefail
src=$1 cache=$2
. "$src/tests/standards/tools.sh"
. "$src/tests/k8s/tools.sh"
tt_promtool "$cache"
tt_k8s_tools "$cache"
"$PROMTOOL" check rules "$src/k8s/components/monitoring/prometheus-rules.yaml"
/usr/bin/python3 "$src/tests/monitoring/check_rules.py" "$src" "$PROMTOOL" "$KUBECTL"
