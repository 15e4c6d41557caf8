"""The asyncio client, for asyncio servers (LLM gateways, FastAPI, aiohttp): one connection
shared by every coroutine of a task or an event loop. Requests are pipelined: each call writes
its request and waits for its own answer, which the daemon sends in request order, so a
hundred coroutines deciding at once cost one connection and no thread. Bound to the event loop
it first connects on."""

import asyncio
import collections

from ._core import Codec, Decision, Lease, Reservation, checked, socket_path
from .errors import ProtocolError, TokentriageError, Unavailable


class AsyncClient:
    """One connection to the daemon at `path` (None: $TOKENTRIAGE_SOCKET, then the default),
    opened on first use and again after it broke; `timeout` (seconds) bounds each call. Leases
    live as long as the connection does: a broken connection has released them."""

    def __init__(self, path=None, timeout=1.0):
        self.path = socket_path(path)
        self.timeout = timeout
        self._reader = self._writer = self._task = None
        self._codec = None
        self._waiting = collections.deque()  # (seq, op, future), in request order
        self._lock = None

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self):
        """Closes the connection: the daemon releases every lease it held."""
        writer, task = self._writer, self._task
        self._drop(Unavailable("the client was closed"))
        if task is not None:
            task.cancel()
        if writer is not None:
            try:
                await writer.wait_closed()
            except OSError:
                pass

    def _drop(self, error):
        """Forgets the connection; every call still waiting gets `error`."""
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = self._task = None
        while self._waiting:
            fut = self._waiting.popleft()[2]
            if not fut.done():
                fut.set_exception(error)

    async def _connect(self):
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_unix_connection(self.path), self.timeout)
        except (OSError, asyncio.TimeoutError) as e:
            why = getattr(e, "strerror", None) or str(e) or "no connection within the timeout"
            raise Unavailable(f"{self.path}: {why}") from e
        self._codec = Codec()
        self._task = asyncio.ensure_future(self._read_loop(self._reader))

    async def _read_loop(self, reader):
        try:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    raise Unavailable("the daemon closed the connection")
                self._codec.feed(chunk)
                for answer in self._codec.answers():
                    if not self._waiting:
                        raise ProtocolError("bad_frame", "an answer nobody asked for")
                    seq, op, fut = self._waiting.popleft()
                    if fut.done():  # its caller gave up (timeout, cancel)
                        self._abandoned(op, answer)
                        continue
                    try:
                        fut.set_result(checked(answer, seq))
                    except TokentriageError as e:
                        fut.set_exception(e)
                        if isinstance(e, ProtocolError):
                            raise
        except asyncio.CancelledError:
            raise
        except TokentriageError as e:
            if self._reader is reader:
                self._drop(e)
        except OSError as e:
            if self._reader is reader:
                self._drop(Unavailable(f"{self.path}: {e.strerror or e}"))

    def _abandoned(self, op, answer):
        """An answer whose caller stopped waiting. A lease granted meanwhile is released, so a
        timed-out acquire does not hold a slot nobody knows of."""
        if op == "acquire" and answer.get("admit") and answer.get("lease"):
            fut = self._send("release", {"lease": answer["lease"]})
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # nobody awaits it

    def _send(self, op, fields):
        """Writes one request; the future its answer will resolve."""
        seq, data = self._codec.request(op, fields)
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append((seq, op, fut))
        self._writer.write(data)
        return fut

    async def call(self, op, **fields):
        """Sends one request and returns its answer map; raises the typed error of an error
        answer (errors.py) and Unavailable when the daemon cannot be reached in time."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # a request's bytes go out whole, in the order of the queue
            if self._writer is None:
                await self._connect()
            fut = self._send(op, fields)
            try:
                await asyncio.wait_for(self._writer.drain(), self.timeout)
            except (OSError, asyncio.TimeoutError) as e:
                error = Unavailable(f"{self.path}: {getattr(e, 'strerror', None) or 'cannot write'}")
                self._drop(error)
                fut.exception()  # this call reports it: the future's copy is seen
                raise error from e
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except asyncio.TimeoutError as e:
            fut.cancel()  # its answer, when it comes, is read and dropped (_abandoned)
            raise Unavailable(f"{self.path}: no answer within {self.timeout} s") from e

    async def decide(self, subject, tokens=None):
        """As Client.decide: a Decision (admit, verdict, limit, headers, reservation, ...)."""
        return Decision(await self.call("decide", subject=subject, tokens=tokens))

    async def settle(self, reservation, actual):
        """As Client.settle: the answer map (settled, already_settled)."""
        return await self.call("settle", reservation=reservation, actual=actual)

    async def charge(self, subject, tokens):
        """As Client.charge: how many tpm limits were charged."""
        return (await self.call("charge", subject=subject, tokens=tokens))["charged"]

    async def acquire(self, subject):
        """As Client.acquire: a Decision whose lease this connection holds."""
        return Decision(await self.call("acquire", subject=subject))

    async def release(self, lease):
        """As Client.release: True when the lease was held."""
        return bool((await self.call("release", lease=lease)).get("released"))

    def reservation(self, subject, tokens):
        """`async with client.reservation(subject, tokens=estimate) as r:` as
        Client.reservation: set r.actual and the block's end settles it."""
        return Reservation(self, subject, tokens)

    def lease(self, subject):
        """`async with client.lease(subject) as d:` as Client.lease."""
        return Lease(self, subject)

    async def ping(self):
        return await self.call("ping")

    async def fleet(self):
        return await self.call("fleet")

    async def members(self):
        return await self.call("members")

