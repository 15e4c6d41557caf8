#!/usr/bin/env python3
"""The include check: the layering of docs/architecture.md, enforced (ctest: check_includes).

Reads every quoted #include of the product's C files and fails (exit 1, one line per finding)
when
  1. files include each other in a circle (header cycles);
  2. two sources need each other: x.c includes y.h and y.c includes x.h, directly or around a
     longer circle (a layer calling back up by name instead of through a handler it is given);
     a header that includes another only for its types (x.h -> y.h) is not such a need;
  3. folders include each other in a circle;
  4. a folder includes one above it in LAYERS;
  5. a folder with C files is not in LAYERS, or two product headers share a name (an include
     names a header by its base name only, so the name must say which).

Usage: check_includes.py [--graph] [ROOT]   (ROOT: the repository, default: this script's
parent's parent). --graph prints each folder's includes, layer by layer (the map in
docs/architecture.md is drawn from it).
"""
import collections
import os
import re
import sys

# Lowest first; a folder may include its own layer's folders (without a circle) and any below.
LAYERS = [
    ["common"],
    ["ratealg"],
    ["wire"],
    ["config", "client"],
    ["engine"],
    ["share", "redis", "state", "membership"],
    ["server", "rls"],
    ["cmd"],
]
# Consumers of everything, never included by the product: not checked.
OUTSIDE = {"tests", "bench", "examples", "build", "clients", "docs", "k8s", "packaging", "scripts"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def product_files(root, findings):
    """{base name: path} of every .c and .h in the layered folders."""
    layer_of = {f: i for i, fs in enumerate(LAYERS) for f in fs}
    by_name = {}
    for top in sorted(os.listdir(root)):
        path = os.path.join(root, top)
        if not os.path.isdir(path) or top.startswith(".") or top in OUTSIDE or top.startswith("build"):
            continue
        for dirpath, _, names in os.walk(path):
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if top not in layer_of:
                    findings.append(f"{rel}: folder {top}/ is in no layer of LAYERS")
                elif name in by_name:
                    findings.append(f"{rel}: {by_name[name]} has the same name")
                else:
                    by_name[name] = rel
    return by_name, layer_of


def circles(adj):
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = 0
    for start in sorted(adj):
        if start in index:
            continue
        work = [(start, iter(sorted(adj.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(adj.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def check(root, graph=False):
    findings = []
    by_name, layer_of = product_files(root, findings)
    files = collections.defaultdict(set)  # file -> files it includes
    for rel in by_name.values():
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for inc in INCLUDE.findall(f.read()):
                target = by_name.get(os.path.basename(inc))
                if target:  # others are generated (rls/*.pb-c.h) or the system's
                    files[rel].add(target)
    for comp in circles(files):
        findings.append("files include each other in a circle: " + " -> ".join(comp))

    stem = lambda p: p[:-2]  # x.c and x.h are one unit
    needs = collections.defaultdict(set)
    for src, targets in files.items():
        if src.endswith(".c"):
            needs[stem(src)] |= {stem(t) for t in targets if stem(t) != stem(src)}
    for comp in circles(needs):
        findings.append("sources need each other (each includes the other's header): "
                        + " <-> ".join(comp))

    folders = collections.defaultdict(set)
    why = {}
    for src, targets in files.items():
        for t in targets:
            a, b = src.split("/")[0], t.split("/")[0]
            if a != b:
                folders[a].add(b)
                why.setdefault((a, b), f"{src} includes {t}")
    if graph:
        for layer, names in enumerate(LAYERS):
            for a in names:
                print(f"{layer} {a:<11} -> {' '.join(sorted(folders.get(a, ()), key=lambda f: (-layer_of[f], f)))}")
    for comp in circles(folders):
        findings.append("folders include each other in a circle: " + " <-> ".join(comp))
    for (a, b), example in sorted(why.items()):
        if layer_of[b] > layer_of[a]:
            findings.append(f"{a}/ includes {b}/, a layer above it ({example})")
    return findings


def main():
    args = sys.argv[1:]
    graph = "--graph" in args
    args = [a for a in args if a != "--graph"]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    findings = check(root, graph)
    for line in findings:
        print(line)
    if findings:
        print(f"check_includes: {len(findings)} finding(s); the layers: docs/architecture.md")
        return 1
    print("check_includes: no include circle, every folder includes only its layer and below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
