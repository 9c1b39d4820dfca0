"""`--bwlimit`'s accounting, with an injected clock: the token bucket every copy thread shares
is charged exactly the body bytes the clients move, and asks to sleep exactly as long as the
rate needs, whichever thread asks. No wall clock is read: each sleep asked for is recorded."""

from __future__ import annotations

import io
import threading
from typing import Any

import pytest

from ferry.engine.run.bandwidth import Bandwidth, metered
from ferry.engine.run.buffers import request_body


class FakeTime:
    """A clock that moves only when told, and records each sleep asked for (moving the clock
    by it when `advance` is set)."""

    def __init__(self, *, advance: bool) -> None:
        self.now = 0.0
        self.advance = advance
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            if self.advance:
                self.now += seconds


def bucket(rate: int, burst: int, time: FakeTime) -> Bandwidth:
    return Bandwidth(rate, burst=burst, clock=time.clock, sleep=time.sleep)


def test_a_full_bucket_lets_a_burst_through_then_each_byte_waits_its_turn_at_the_rate() -> None:
    time = FakeTime(advance=True)
    limit = bucket(1000, 1000, time)

    limit.take(1000)  # the burst: no wait
    limit.take(500)  # half a second's worth
    limit.take(2000)  # more than the bucket holds: two seconds, borrowed

    assert time.sleeps == [0.5, 2.0]
    assert limit.taken == 3500
    assert time.now == pytest.approx((3500 - 1000) / 1000)


def test_idle_time_refills_no_more_than_the_burst() -> None:
    time = FakeTime(advance=True)
    limit = bucket(1000, 1000, time)
    limit.take(1000)
    time.now += 60.0  # a minute without a byte: one second's worth saved, not sixty
    limit.take(1500)
    assert time.sleeps == [0.5]
    assert limit.taken == 2500


def test_threads_sharing_one_bucket_are_each_charged_and_each_wait_for_all_before_them() -> None:
    """The clock stands still, so the n-th thousand bytes taken (by whichever thread) must be
    asked to wait (n * 1000 - burst) / rate: a lost update between threads would show."""
    time = FakeTime(advance=False)
    rate, burst, threads, takes = 10_000, 10_000, 8, 100
    limit = bucket(rate, burst, time)

    def work() -> None:
        for _ in range(takes):
            limit.take(1000)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    total = threads * takes * 1000
    assert limit.taken == total
    expected = [(n * 1000 - burst) / rate for n in range(burst // 1000 + 1, threads * takes + 1)]
    assert sorted(time.sleeps) == pytest.approx(expected)


@pytest.mark.parametrize("rate", [0, -1])
def test_a_rate_of_nothing_is_refused(rate: int) -> None:
    with pytest.raises(ValueError):
        Bandwidth(rate)


class FakeClient:
    """What the engine asks of an S3 client: bodies come back from GETs, go with PUTs."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.sent: list[bytes] = []

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        return {"Body": io.BytesIO(self.data), "ContentLength": len(self.data)}

    def put_object(self, **kwargs: Any) -> dict[str, Any]:
        body = kwargs["Body"]
        self.sent.append(body if isinstance(body, bytes) else body.read())
        return {"ETag": '"x"'}

    def upload_part(self, **kwargs: Any) -> dict[str, Any]:
        self.sent.append(kwargs["Body"].read())
        return {"ETag": '"y"'}

    def copy_object(self, **kwargs: Any) -> dict[str, Any]:
        return {"CopyObjectResult": {}}

    def head_object(self, **kwargs: Any) -> dict[str, Any]:
        return {"ContentLength": len(self.data)}


def test_a_metered_client_charges_every_body_byte_it_moves_and_nothing_else() -> None:
    time = FakeTime(advance=True)
    limit = bucket(1 << 20, 1 << 20, time)
    data = bytes(range(256)) * 4096  # 1 MiB
    client = metered(FakeClient(data), limit)

    body = client.get_object(Bucket="b", Key="k")["Body"]
    read = b""
    while chunk := body.read(100_000):
        read += chunk
    body.close()
    assert read == data and limit.taken == len(data)

    view = memoryview(data)[:300_000]
    client.put_object(Bucket="b", Key="k", Body=request_body(view))
    client.upload_part(Bucket="b", Key="k", UploadId="u", PartNumber=1, Body=request_body(view[:1000]))
    client.put_object(Bucket="b", Key="empty", Body=b"")
    assert client.sent == [bytes(view), bytes(view[:1000]), b""]  # every byte still sent
    assert limit.taken == len(data) + 300_000 + 1000

    client.copy_object(Bucket="b", Key="c", CopySource={"Bucket": "b", "Key": "k"})  # server-side
    client.head_object(Bucket="b", Key="k")
    assert limit.taken == len(data) + 301_000
    assert time.now == pytest.approx((limit.taken - (1 << 20)) / (1 << 20))
