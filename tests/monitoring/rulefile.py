"""The shipped alert rules as the monitoring tests read them (k8s/components/monitoring)."""

import os
import re

import yaml

RULES = "k8s/components/monitoring/prometheus-rules.yaml"
PROMETHEUSRULE = "k8s/components/monitoring/prometheusrule.yaml"


def load(src, path=RULES):
    with open(os.path.join(src, path)) as f:
        return yaml.safe_load(f)


def alerts(doc):
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def stripped(src, work):
    """Writes the rule file without annotations into work (promtool test rules compares
    annotations too, and the tests assert labels); returns its path, the alert names in order
    and each alert's severity."""
    doc = load(src)
    for r in alerts(doc):
        r.pop("annotations", None)
    path = os.path.join(work, "rules-stripped.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return path, [r["alert"] for r in alerts(doc)], {r["alert"]: (r.get("labels") or {}).get("severity") for r in alerts(doc)}


def anchors(markdown_path):
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped,
    spaces as hyphens, repeats numbered."""
    seen, out = {}, set()
    with open(markdown_path) as f:
        for line in f:
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out
