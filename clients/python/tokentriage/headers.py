"""The rate headers of a decision, rendered from its numbers (protocol 2) byte for byte as
tests/vectors/headers.txt says: the table every renderer of the project (the daemon, the C
library, this client, the CLI, the HTTP and gRPC doors) is checked against."""

import math

SF_INT_MAX = 999_999_999_999_999  # RFC 9651 Integers: 15 digits


def go_duration(ms):
    """Whole milliseconds as Go's time.Duration prints them: 0s, 250ms, 1.5s, 1m0s, 1h0m0s."""
    if ms <= 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    s, frac = divmod(ms, 1000)
    out = ""
    if s >= 3600:
        out += f"{s // 3600}h"
    if s >= 60:
        out += f"{s % 3600 // 60}m"
    out += str(s % 60)
    if frac:
        out += "." + f"{frac:03d}".rstrip("0")
    return out + "s"


def _sf_int(v):
    return min(max(v, 0), SF_INT_MAX)


def render_headers(answer):
    """The rate headers of a protocol 2 decision, from its numbers, in the order of
    tests/vectors/headers.txt: a dict of name to value (empty when nothing is disclosed).

    policy   [id, "rpm"|"tpm", period_ms, quota, remaining, t_s]: Ratelimit-Policy, RateLimit
    requests [quota, remaining, reset_ms]: X-Ratelimit-*-Requests (likewise tokens)
    retry    seconds: Retry-After, never before RateLimit's t"""
    headers = {}
    retry = answer.get("retry")
    policy = answer.get("policy")
    if policy:
        pid, kind, period_ms, quota, remaining, t = policy
        g = math.gcd(period_ms, 1000) if period_ms > 0 else 1000
        w, scale = (period_ms // g, 1000 // g) if period_ms > 0 else (0, 1)
        unit = ';qu="tokens"' if kind == "tpm" else ""
        headers["Ratelimit-Policy"] = f'"{pid}";q={_sf_int(quota * scale)}{unit};w={_sf_int(w)}'
        headers["RateLimit"] = f'"{pid}";r={_sf_int(remaining)};t={_sf_int(t)}'
        if retry is not None and retry >= 0:
            retry = max(retry, min(t, SF_INT_MAX))
    for key, unit in (("requests", "Requests"), ("tokens", "Tokens")):
        trio = answer.get(key)
        if trio:
            headers[f"X-Ratelimit-Limit-{unit}"] = str(trio[0])
            headers[f"X-Ratelimit-Remaining-{unit}"] = str(trio[1])
            headers[f"X-Ratelimit-Reset-{unit}"] = go_duration(trio[2])
    if retry is not None and retry >= 0:
        headers["Retry-After"] = str(retry)
    return headers
