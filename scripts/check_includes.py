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
     names a header by its base name only, so the name must say which);
  6. with --objects BUILD: source files call each other in a circle. Includes cannot show this
     inside a folder (engine/'s files all include one engine_int.h), so the calls are read from
     the compiler's own output: BUILD's compile_commands.json names each source's object, `nm`
     says which symbols each object defines and which it references, and x.c -> y.c when x's
     object references a symbol y's defines (a function or a variable). Inside a folder the
     files must look down to each other as the folders do: a helper two files share lives
     below both, a layer reaches up only through a handler it is given. A circle listed in
     CALL_CIRCLES_PENDING is reported without failing until its owner breaks it; an entry that
     is no circle any more fails, so it is removed when the work lands.

Usage: check_includes.py [--graph] [--objects BUILD] [ROOT]   (ROOT: the repository, default:
this script's parent's parent). --graph prints each folder's includes, layer by layer (the map
in docs/architecture.md is drawn from it); --objects BUILD adds the call check (6) over that
build tree (ctest passes its own).
"""
import collections
import json
import os
import re
import shlex
import subprocess
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

# Circles of calls known and being broken elsewhere (issue 33): reported, not failed on. Each
# entry is the set of files the circle may span; a circle found inside one is this one.
CALL_CIRCLES_PENDING = {}

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


def product_objects(root, build, findings):
    """{source path relative to root: its object} from BUILD's compile_commands.json, for the
    layered folders' sources."""
    layer_of = {f for fs in LAYERS for f in fs}
    try:
        with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
            commands = json.load(f)
    except (OSError, ValueError) as e:
        findings.append(f"{build}: no compile_commands.json to read the calls from ({e})")
        return {}
    objects = {}
    for entry in commands:
        rel = os.path.relpath(os.path.realpath(entry["file"]), os.path.realpath(root))
        if rel.split("/")[0] not in layer_of or not rel.endswith(".c"):
            continue
        args = shlex.split(entry["command"])
        if "-o" not in args:
            continue
        obj = os.path.join(entry["directory"], args[args.index("-o") + 1])
        objects.setdefault(rel, obj)  # a source built into two targets: one object tells
    return objects


def calls(root, build, findings):
    """{source: {source it calls: a symbol it calls there}} from the objects' symbol tables."""
    defined, used = {}, collections.defaultdict(set)
    for src, obj in sorted(product_objects(root, build, findings).items()):
        if not os.path.exists(obj):
            findings.append(f"{src}: its object {obj} is not built; the call check reads it")
            continue
        out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) < 2:
                continue
            name, kind = fields[0], fields[1]
            if kind == "U":
                used[src].add(name)
            elif kind.isupper():  # a global definition (lower case: file-local)
                defined.setdefault(name, src)
    edges = collections.defaultdict(dict)
    for src, names in used.items():
        for name in sorted(names):
            dst = defined.get(name)
            if dst and dst != src:
                edges[src].setdefault(dst, name)
    return edges


def check_calls(root, build, findings):
    edges = calls(root, build, findings)
    found = circles({a: set(b) for a, b in edges.items()})
    known = set()
    for comp in found:
        path = "; ".join(f"{a} -> {b} ({edges[a][b]})" for a in comp for b in comp if b in edges[a])
        owner = next((why for files, why in CALL_CIRCLES_PENDING.items() if set(comp) <= files), None)
        if owner:
            known |= {files for files in CALL_CIRCLES_PENDING if set(comp) <= files}
            print(f"known, not failed on ({owner}): files call each other in a circle: {path}")
        else:
            findings.append(f"files call each other in a circle: {path}")
    for files, why in sorted(CALL_CIRCLES_PENDING.items(), key=lambda kv: sorted(kv[0])):
        if files not in known:
            findings.append(f"{', '.join(sorted(files))}: no circle of calls any more ({why}): "
                            "remove the entry from CALL_CIRCLES_PENDING, so a new one fails")


def check(root, graph=False, build=None):
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
    if build:
        check_calls(root, build, findings)
    return findings


def main():
    args = sys.argv[1:]
    graph = "--graph" in args
    args = [a for a in args if a != "--graph"]
    build = None
    if "--objects" in args:
        i = args.index("--objects")
        build = args[i + 1] if i + 1 < len(args) else None
        if not build:
            print("check_includes: --objects takes the build directory")
            return 2
        del args[i:i + 2]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    findings = check(root, graph, build)
    for line in findings:
        print(line)
    if findings:
        print(f"check_includes: {len(findings)} finding(s); the layers: docs/architecture.md")
        return 1
    print("check_includes: no include circle, every folder includes only its layer and below"
          + (", no circle of calls" if build else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
