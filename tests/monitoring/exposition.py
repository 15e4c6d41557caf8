"""Reads Prometheus' text exposition format (0.0.4), as tokentriage's /metrics writes it: the
monitoring tests' one parser.

    types, samples = parse(text)   # {family: type}, [(name, {label: value}, float)]
    families(text)                 # {family: (type, {label names})}, le and quantile aside
"""

import re

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*')
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count", "")}


def _unescape(v):
    return v.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


def parse(text):
    """Returns ({family: type}, [(sample name, {label: value}, value)]); raises ValueError on a
    line that is not the format."""
    types, samples = {}, []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f"line {n}: not a sample: {line!r}")
        labels, rest = {}, m.group(2) or ""
        pos = 0
        while pos < len(rest):
            lm = LABEL.match(rest, pos)
            if not lm:
                raise ValueError(f"line {n}: bad labels: {rest!r}")
            labels[lm.group(1)] = _unescape(lm.group(2))
            pos = lm.end()
        samples.append((m.group(1), labels, float(m.group(3))))
    return types, samples


def family_of(name, types):
    """The family a sample belongs to (a histogram's _bucket is its family's), and its type."""
    if name in types:
        return name, types[name]
    for fam, t in types.items():
        for suffix in SUFFIXES.get(t, ()):
            if suffix and name == fam + suffix:
                return fam, t
    return name, "untyped"


def families(text):
    """{family: (type, {label names})}: every family with a TYPE line, with the labels its
    samples carry (a histogram's le and a summary's quantile aside)."""
    types, samples = parse(text)
    out = {fam: (t, set()) for fam, t in types.items()}
    for name, labels, _ in samples:
        fam, t = family_of(name, types)
        out.setdefault(fam, (t, set()))[1].update(k for k in labels if k not in ("le", "quantile"))
    return out
