"""Clients of the tokentriage rate-limit decision daemon (docs/clients.md, "Python").

    import tokentriage
    with tokentriage.Client() as tt:                      # or: async with AsyncClient() as tt
        d = tt.decide({"team": "t-42", "key": "k-1"}, tokens=1200)
        if not d.admit:
            ...  # 429 (413 when d.verdict == "unfittable") with d.headers

Client is blocking (one request at a time, one per thread); AsyncClient shares one pipelined
connection among coroutines. Both: decide, settle, charge, acquire, release, reservation(),
lease(), ping, fleet, members. Errors are typed (errors.py); an unreachable daemon raises
Unavailable, which is also an OSError: the caller fails open or closed as its limit says.
"""

__version__ = "0.1.0"  # the daemon's version (CMakeLists.txt); the package test holds them equal

from ._core import DEFAULT_SOCKET, PROTOCOL, SOCKET_ENV, Decision, socket_path  # noqa: E402
from .aio import AsyncClient  # noqa: E402
from .client import Client  # noqa: E402
from .errors import (  # noqa: E402
    LeaseDenied,
    ProtocolError,
    RequestError,
    ServerError,
    TokentriageError,
    Unavailable,
    UnknownLease,
    UnknownReservation,
)
from .headers import go_duration, render_headers  # noqa: E402

__all__ = [
    "AsyncClient", "Client", "Decision", "DEFAULT_SOCKET", "PROTOCOL", "SOCKET_ENV",
    "LeaseDenied", "ProtocolError", "RequestError", "ServerError", "TokentriageError",
    "Unavailable", "UnknownLease", "UnknownReservation", "go_duration", "render_headers",
    "socket_path",
]
