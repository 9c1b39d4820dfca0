"""Part buffers: reused, never more than the memory limit kept, and read back exactly as written."""

from __future__ import annotations

import io

from ferry.engine.run.buffers import BufferPool, BufferReader, request_body

MiB = 1024 * 1024


def test_a_returned_buffer_is_reused_for_a_part_of_about_its_size() -> None:
    pool = BufferPool(64 * MiB)
    first = pool.take(8 * MiB)
    pool.give(first)
    assert pool.take(7 * MiB) is first  # a last, shorter part reuses it
    pool.give(first)
    assert pool.take(1 * MiB) is not first  # far smaller: not worth holding 8 MiB for
    assert pool.allocated == 9 * MiB


def test_the_pool_keeps_no_more_than_its_capacity() -> None:
    pool = BufferPool(16 * MiB)
    buffers = [pool.take(8 * MiB) for _ in range(2)]
    for buffer in buffers:
        pool.give(buffer)
    assert pool.allocated == 16 * MiB
    big = pool.take(12 * MiB)  # no free buffer fits: free ones are dropped to make room
    assert pool.allocated <= 16 * MiB + 12 * MiB - 8 * MiB
    pool.give(big)
    assert pool.allocated <= 16 * MiB


def test_a_part_larger_than_the_limit_is_given_and_not_kept() -> None:
    pool = BufferPool(4 * MiB)
    huge = pool.take(6 * MiB)
    pool.give(huge)
    assert pool.allocated == 0


def test_the_request_body_reads_seeks_and_reads_again() -> None:
    data = bytearray(range(256)) * 4096  # 1 MiB
    view = memoryview(data)[: 1000 * 1000]
    body = request_body(view)
    assert body.read() == bytes(view)
    body.seek(0)  # botocore rewinds the body to retry a request
    assert body.read(10) == bytes(view[:10])
    assert body.tell() == 10
    assert body.seek(0, io.SEEK_END) == len(view)
    raw = BufferReader(view)
    target = bytearray(7)
    assert raw.readinto(target) == 7 and bytes(target) == bytes(view[:7])
