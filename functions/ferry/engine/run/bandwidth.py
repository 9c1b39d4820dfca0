"""`--bwlimit`: the object bytes this process moves, held to a rate across every thread.

One token bucket for the whole run: each body byte a client receives (GET) or sends (PUT,
UploadPart) takes a token; tokens come back at the rate, and the bucket holds at most one
second's worth (the burst), so a run never moves more than `rate * seconds + burst` bytes.
A take larger than what the bucket holds is granted on credit: the bucket goes below empty
and the taker sleeps until the rate has paid it back, so the next taker (of any thread)
waits behind it. Sleeping happens outside the lock; the books are kept under it.

The limiter sits on the clients (`metered`), not in each copy path, so every path that moves
bytes through this machine (a streamed copy's GETs and PUTs, an upload, a download, the
reading that proves a version) is limited without its own call, and none can forget it. A
server-side copy (CopyObject, UploadPartCopy) moves its bytes inside the store: none pass
here, so none are limited. Bytes botocore sends again on a retry are not counted twice: the
rate is of bytes asked to move, which is what a user sets it for.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from typing import Any


class Bandwidth:
    """A token bucket of `rate` bytes per second, at most `burst` (default: one second's
    worth) saved while idle; thread-safe. `clock` and `sleep` are injectable for tests."""

    def __init__(
        self,
        rate: int,
        *,
        burst: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"a bandwidth limit must be above 0 bytes per second, not {rate}")
        self.rate = rate
        self.burst = burst if burst is not None else rate
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._last = clock()
        self.taken = 0  # bytes accounted for, over the run

    def take(self, n: int) -> None:
        """Account for `n` bytes moved (or about to be), sleeping as long as the rate needs."""
        if n <= 0:
            return
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= n
            self.taken += n
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)


class _MeteredBody:
    """A response body whose every byte read takes its tokens (after the read: the bytes are
    then in hand, and the sleep holds the next read back, and with it the sender)."""

    def __init__(self, body: Any, bandwidth: Bandwidth) -> None:
        self._body = body
        self._bandwidth = bandwidth

    def read(self, amt: int | None = None) -> bytes:
        data: bytes = self._body.read() if amt is None else self._body.read(amt)
        self._bandwidth.take(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._body, name)


def _body_length(body: Any) -> int:
    """Bytes a request body will send from where it stands (it is left there)."""
    if body is None:
        return 0
    if isinstance(body, (bytes, bytearray, memoryview)):
        return memoryview(body).nbytes
    if isinstance(body, str):
        return len(body.encode("utf-8"))
    position = body.tell()
    end = body.seek(0, io.SEEK_END)
    body.seek(position)
    return int(end - position)


class _MeteredClient:
    """An S3 client whose object bodies, either way, pass `bandwidth`; everything else is the
    client's own (attributes, events, every other operation)."""

    def __init__(self, client: Any, bandwidth: Bandwidth) -> None:
        self._client = client
        self._bandwidth = bandwidth

    def get_object(self, **kwargs: Any) -> Any:
        response = self._client.get_object(**kwargs)
        if "Body" in response:
            response["Body"] = _MeteredBody(response["Body"], self._bandwidth)
        return response

    def put_object(self, **kwargs: Any) -> Any:
        self._bandwidth.take(_body_length(kwargs.get("Body")))
        return self._client.put_object(**kwargs)

    def upload_part(self, **kwargs: Any) -> Any:
        self._bandwidth.take(_body_length(kwargs.get("Body")))
        return self._client.upload_part(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def metered(client: Any, bandwidth: Bandwidth | None) -> Any:
    """`client`, its bodies limited by `bandwidth`; the client itself when there is no limit."""
    return client if bandwidth is None else _MeteredClient(client, bandwidth)
