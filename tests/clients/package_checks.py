"""The installed tokentriage package against a running daemon (run by test_python_package.py
with the venv's python; the daemon's limits are test_python_client.py's CONFIG: team_rpm 3 a minute,
team_tpm 100000 a minute with a burst of 20000, key_one one lease per key).

usage: package_checks.py SOCKET HEADER_VECTORS
"""

import asyncio
import os
import sys

import tokentriage as tt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from test_header_vectors import read_cases  # noqa: E402  (beside this file)
from ttcheck import check, summary  # noqa: E402


def raises(kind, fn, what):
    """fn() raises kind; returns the exception."""
    try:
        fn()
    except kind as e:
        check(True, f"{what}: {type(e).__name__} {e.code}")
        return e
    except Exception as e:  # noqa: BLE001
        check(False, f"{what}: {type(e).__name__} {e}, not {kind.__name__}")
        return None
    check(False, f"{what}: nothing raised")
    return None


async def araises(kind, coro, what):
    try:
        await coro
    except kind as e:
        check(True, f"{what}: {type(e).__name__} {e.code}")
        return e
    except Exception as e:  # noqa: BLE001
        check(False, f"{what}: {type(e).__name__} {e}, not {kind.__name__}")
        return None
    check(False, f"{what}: nothing raised")
    return None


def header_vectors(path):
    """Every case of tests/vectors/headers.txt through tt.render_headers, in order."""
    cases = read_cases(path)
    bad = [name for name, numbers, want in cases
           if list(tt.render_headers(numbers).items()) != want]
    check(len(cases) > 10 and not bad,
          f"render_headers writes the {len(cases)} cases of the header vector table ({bad or 'all'})")


def blocking(sock):
    with tt.Client(sock, timeout=5.0) as c, tt.Client(sock, timeout=5.0) as other:
        for i in range(3):
            d = c.decide({"team": "t-sync"}, tokens=100)
            check(isinstance(d, tt.Decision) and d.admit and d["admit"] and d.verdict == "admit"
                  and d.headers.get("RateLimit", "").startswith('"team_rpm"'),
                  f"decide {i + 1} of 3 admits, as attributes and as a map, with the headers")
        d = c.decide({"team": "t-sync"}, tokens=100)
        check(not d.admit and d.verdict == "deny" and d.limit == "team_rpm"
              and int(d.headers.get("Retry-After", "0")) > 0 and d.retry_after > 0,
              f"the fourth is denied by team_rpm with Retry-After ({dict(d)})")
        d = c.decide({"team": "t-big"}, tokens=50000)
        check(d.verdict == "unfittable" and d.code == "quota_cost_unfittable",
              "a cost above the burst is unfittable, code quota_cost_unfittable")

        with c.reservation({"team": "t-res"}, tokens=20000) as r:
            check(r.admit and r.decision.reservation, "reservation() decides and holds the id")
            r.actual = 5000
        again = c.settle(r.decision.reservation, 5000)
        check(again["already_settled"], "leaving the block settled it with the actual (a repeat "
              "is already settled)")
        with c.reservation({"team": "t-res"}, tokens=1000) as r:
            pass  # no actual: the estimate stays charged, nothing sent
        check(not c.settle(r.decision.reservation, 1000)["already_settled"],
              "a block that set no actual leaves the reservation to settle")
        check(c.charge({"team": "t-res"}, 100) == 1, "charge counts on the one tpm limit")

        a = c.acquire({"key": "k-sync"})
        check(a.admit and a.lease, f"acquire admits with a lease ({a.get('lease')})")
        b = other.acquire({"key": "k-sync"})
        check(not b.admit and b.limit == "key_one", "a second lease of key_one is denied")
        check(c.release(a.lease) is True, "release frees it")
        check(c.release(a.lease) is False, "a second release of the same lease is False")
        with c.lease({"key": "k-sync"}) as held:
            check(held.admit and held.lease, "lease() holds a lease in its block")
            raises(tt.LeaseDenied, lambda: other.lease({"key": "k-sync"}).__enter__(),
                   "another lease of the key is denied meanwhile")
        check(other.acquire({"key": "k-sync"}).admit, "leaving the block released it")

        e = raises(tt.UnknownReservation, lambda: c.settle(12345, 0), "a made-up reservation")
        check(isinstance(e, tt.RequestError) and isinstance(e, tt.TokentriageError),
              "UnknownReservation is a RequestError, a TokentriageError")
        e = raises(tt.RequestError, lambda: c.decide({"team": "t", "key": "k" * 300}, tokens=1),
                   "an id over 256 bytes")
        check(e is not None and e.code == "bad_value" and "256" in e.message,
              "the daemon's code and message are kept")
        raises(tt.RequestError, lambda: c.decide({"team": "t-sync"}), "tpm without tokens")
        check(c.ping().get("pong") is True, "the connection is still good after errors")
    raises(tt.Unavailable, lambda: tt.Client(sock + ".none", timeout=1.0).ping(),
           "no daemon on the path")


async def concurrent(sock):
    async with tt.AsyncClient(sock, timeout=5.0) as c, tt.AsyncClient(sock, timeout=5.0) as other:
        ds = await asyncio.gather(*[c.decide({"team": "t-async"}, tokens=10) for _ in range(20)])
        check(sum(d.admit for d in ds) == 3 and all(isinstance(d, tt.Decision) for d in ds),
              f"20 coroutines on one connection: 3 admitted, 17 denied "
              f"({sum(d.admit for d in ds)} admitted)")
        pings = await asyncio.gather(*[c.ping() for _ in range(50)])
        check(all(p.get("pong") for p in pings), "50 pipelined pings, each answered")
        async with c.reservation({"team": "t-ares"}, tokens=20000) as r:
            check(r.admit and r.decision.reservation, "async reservation() decides")
            r.actual = 10
        check((await c.settle(r.decision.reservation, 10))["already_settled"],
              "leaving the async block settled it")
        check(await c.charge({"team": "t-ares"}, 5) == 1, "async charge")
        async with c.lease({"key": "k-async"}) as held:
            check(held.lease, "async lease() holds a lease")
            await araises(tt.LeaseDenied, other.lease({"key": "k-async"}).__aenter__(),
                          "another async lease is denied meanwhile")
        a = await other.acquire({"key": "k-async"})
        check(a.admit and await other.release(a.lease), "released on leaving: acquire, release")
        await araises(tt.UnknownReservation, c.settle(999, 1), "async: a made-up reservation")
        check(render_same(await c.decide({"team": "t-async2"}, tokens=1)),
              "async answers carry the rendered headers")
    await araises(tt.Unavailable, tt.AsyncClient(sock + ".none", timeout=1.0).ping(),
                  "async: no daemon on the path")


def render_same(d):
    return d.headers == tt.render_headers(d) and "RateLimit" in d.headers


def main():
    sock, vectors = sys.argv[1], sys.argv[2]
    header_vectors(vectors)
    blocking(sock)
    asyncio.run(concurrent(sock))
    return summary("package checks")


if __name__ == "__main__":
    sys.exit(main())
