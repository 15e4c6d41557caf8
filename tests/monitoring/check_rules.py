#!/usr/bin/env python3
"""The alert rules as shipped (k8s/components/monitoring), beyond what promtool parses:

  - every alert has a severity label (critical or warning), a summary, a description and a
    runbook_url, and every runbook_url is the one base followed by an anchor that
    docs/operators.md has (its runbook: one heading per alert);
  - prometheusrule.yaml (the PrometheusRule) holds exactly the plain file's groups;
  - tests/k8s/alerts_test.yaml, the hand-written cases for what a fleet in the suite cannot
    easily show, passes `promtool test rules` on the rules without their annotations;
  - k8s/ rendered with the component (an overlay `components: [components/monitoring]`) holds the
    PodMonitor, the PrometheusRule and the dashboard's ConfigMap in the tokentriage namespace, and
    the PodMonitor selects the DaemonSet's pods on a port the container declares;
  - the runbook's base is one value to change, as docs/operators.md ("The runbook's address")
    says: its kustomize overlay, rendered with another base, and its sed command on the plain
    file give every alert a runbook_url of that base and the alert's own anchor.

usage: check_rules.py SOURCE_DIR PROMTOOL KUBECTL
"""

import os
import re
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
import rulefile  # noqa: E402
from ttcheck import check, summary  # noqa: E402

BASE = "https://github.com/tokentriage/tokentriage/blob/main/docs/operators.md#"
OTHER_BASE = "https://runbooks.example.test/tt"  # what the docs' recipes are tried with
DOCS_BASE = "https://wiki.example.com/tokentriage/runbook"  # what they say


def moved(rules, base):
    """The alerts whose runbook_url is not base#<their anchor>."""
    return [r["alert"] for r in rules
            if (r.get("annotations") or {}).get("runbook_url") != f"{base}#{r['alert'].lower()}"]


def check_runbook_base(src, kubectl, work, rel, rules):
    """docs/operators.md's two ways to give the runbook another address, as written there."""
    with open(os.path.join(src, "docs", "operators.md")) as f:
        doc = f.read()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "name: tokentriage-runbook" in b]
    sed = re.findall(r"`(sed '[^`]*' prometheus-rules.yaml) > rules.yaml`", doc)
    if not check(len(blocks) == 1 and DOCS_BASE in blocks[0] and len(sed) == 1 and DOCS_BASE in sed[0],
                 "docs/operators.md gives one kustomize overlay and one sed command for the runbook's base"):
        return
    ov = os.path.join(work, "runbook")
    os.mkdir(ov)
    with open(os.path.join(ov, "kustomization.yaml"), "w") as f:
        f.write(blocks[0].replace("../k8s", rel).replace(DOCS_BASE, OTHER_BASE))
    p = subprocess.run([kubectl, "kustomize", ov], capture_output=True, text=True)
    objs = [o for o in yaml.safe_load_all(p.stdout) if o] if p.returncode == 0 else []
    prule = next((o for o in objs if o["kind"] == "PrometheusRule"), {})
    rendered = rulefile.alerts(prule.get("spec", {"groups": []}))
    wrong = moved(rendered, OTHER_BASE)
    check(p.returncode == 0 and len(rendered) == len(rules) and not wrong,
          f"the docs' overlay gives every alert's runbook_url the base it sets, anchor kept"
          + (f": {p.stderr.strip()}" if p.returncode else f" (not: {wrong})" if wrong else ""))
    check(not any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == "tokentriage-runbook" for o in objs),
          "and its ConfigMap stays out of what is applied (local-config)")
    p = subprocess.run(["sh", "-c", sed[0].replace(DOCS_BASE, OTHER_BASE)], capture_output=True, text=True,
                       cwd=os.path.join(src, "k8s", "components", "monitoring"))
    wrong = moved(rulefile.alerts(yaml.safe_load(p.stdout) or {"groups": []}), OTHER_BASE) if p.returncode == 0 else ["sed failed"]
    check(not wrong, f"the docs' sed command does the same on the plain rule file (not: {wrong})")


def main():
    src, promtool, kubectl = sys.argv[1:4]
    doc = rulefile.load(src)
    rules = rulefile.alerts(doc)
    check(len(rules) >= 20, f"the rule file has {len(rules)} alerts")
    anchors = rulefile.anchors(os.path.join(src, "docs", "operators.md"))
    for r in rules:
        name, labels, ann = r["alert"], r.get("labels") or {}, r.get("annotations") or {}
        missing = [k for k in ("summary", "description", "runbook_url") if not ann.get(k)]
        sev_ok = labels.get("severity") in ("critical", "warning")
        url = ann.get("runbook_url", "")
        anchor = url[len(BASE):] if url.startswith(BASE) else None
        ok = sev_ok and not missing and anchor in anchors and anchor == name.lower()
        if not ok:
            check(False, f"{name}: severity {labels.get('severity')!r}, missing {missing}, runbook_url "
                         f"{url!r} ({'no such anchor in docs/operators.md' if anchor not in anchors else 'anchor not the alert name'})")
    check(all(r.get("labels", {}).get("severity") in ("critical", "warning") and
              (r.get("annotations") or {}).get("runbook_url", "")[len(BASE):] in anchors for r in rules),
          "every alert has severity, summary, description and a runbook_url to its heading in docs/operators.md")

    with open(os.path.join(src, rulefile.PROMETHEUSRULE)) as f:
        pr = yaml.safe_load(f)
    check(pr.get("apiVersion") == "monitoring.coreos.com/v1" and pr.get("kind") == "PrometheusRule"
          and pr.get("spec", {}).get("groups") == doc["groups"],
          "prometheusrule.yaml is a PrometheusRule holding exactly prometheus-rules.yaml's groups "
          "(else run k8s/components/monitoring/prometheusrule.sh)")

    with tempfile.TemporaryDirectory() as work:
        stripped, _, _ = rulefile.stripped(src, work)
        with open(os.path.join(src, "tests", "k8s", "alerts_test.yaml")) as f:
            t = yaml.safe_load(f)
        t["rule_files"] = [stripped]
        severity = {r["alert"]: r["labels"]["severity"] for r in rules if (r.get("labels") or {}).get("severity")}
        for case in t["tests"]:  # the cases name the labels that matter; severity is the rule's
            for a in case.get("alert_rule_test", []):
                for e in a.get("exp_alerts") or []:
                    e.setdefault("exp_labels", {}).setdefault("severity", severity.get(a["alertname"]))
        path = os.path.join(work, "alerts_test.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(t, f, sort_keys=False)
        p = subprocess.run([promtool, "test", "rules", path], capture_output=True, text=True)
        check(p.returncode == 0, "promtool test rules tests/k8s/alerts_test.yaml"
              + ("" if p.returncode == 0 else ":\n" + (p.stdout + p.stderr)[-4000:]))

        ov = os.path.join(work, "ov")
        os.mkdir(ov)
        rel = os.path.relpath(os.path.join(src, "k8s"), ov)
        with open(os.path.join(ov, "kustomization.yaml"), "w") as f:
            f.write(f"resources: [{rel}]\ncomponents: [{rel}/components/monitoring]\n")
        p = subprocess.run([kubectl, "kustomize", ov], capture_output=True, text=True)
        if not check(p.returncode == 0, "k8s/ renders with components/monitoring" + ("" if p.returncode == 0 else ": " + p.stderr)):
            return summary("check_rules")
        objs = [o for o in yaml.safe_load_all(p.stdout) if o]
        find = lambda kind: next((o for o in objs if o["kind"] == kind), None)  # noqa: E731
        pm, prule, ds = find("PodMonitor"), find("PrometheusRule"), find("DaemonSet")
        check(pm is not None and prule is not None and pm["metadata"].get("namespace") == "tokentriage"
              and prule["metadata"].get("namespace") == "tokentriage",
              "the render has the PodMonitor and the PrometheusRule, in the tokentriage namespace")
        cm = next((o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "tokentriage-dashboard"), None)
        with open(os.path.join(src, "k8s", "components", "monitoring", "grafana-dashboard.json")) as f:
            dashboard = f.read()
        check(cm is not None and cm["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
              and cm["metadata"].get("namespace") == "tokentriage"
              and cm.get("data", {}).get("grafana-dashboard.json") == dashboard,
              "the render has the dashboard as a ConfigMap labelled grafana_dashboard: \"1\" for Grafana's sidecar")
        if pm and ds:
            pod_labels = ds["spec"]["template"]["metadata"]["labels"]
            sel = pm["spec"]["selector"]["matchLabels"]
            ports = {p.get("name") for c in ds["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
            eps = pm["spec"]["podMetricsEndpoints"]
            check(all(pod_labels.get(k) == v for k, v in sel.items()) and all(e.get("port") in ports for e in eps),
                  f"the PodMonitor selects the DaemonSet's pods ({sel}) on a declared port "
                  f"({[e.get('port') for e in eps]} of {sorted(ports)})")
        check_runbook_base(src, kubectl, work, rel, rules)
    return summary("check_rules")


if __name__ == "__main__":
    sys.exit(main())
