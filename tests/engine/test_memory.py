"""Streaming holds at most `memory_limit` bytes of object data, whatever the object's size."""

from __future__ import annotations

import os
import tracemalloc

from ferry import Copier, CopyPolicy, SourceObject, Status, Strategy, Target

MiB = 1024 * 1024


def test_streaming_a_large_object_stays_within_the_memory_bound(versitygw, vgw_buckets) -> None:
    src, dst = vgw_buckets
    part = 5 * MiB
    bound = 2 * part
    size = 96 * MiB  # 9.6 times the bound
    data = os.urandom(size)
    versitygw.client.put_object(Bucket=src, Key="big", Body=data)
    del data  # the test's own copy must not count against the engine

    # Measured on versitygw: peak 11.0 MiB, i.e. the two granted parts plus about 1 MiB of
    # botocore and bookkeeping. The slack is less than one part, so a third buffer in memory
    # fails the test; eight part threads make sure only the budget can be holding them back.
    slack = 3 * MiB
    policy = CopyPolicy(mode="stream", part_size=part, multipart_threshold=part)
    with Copier(
        versitygw.endpoint, versitygw.endpoint, policy, memory_limit=bound, part_concurrency=8
    ) as copier:
        tracemalloc.start()
        try:
            result = copier.copy(SourceObject(src, "big"), Target(dst, "big"))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        print(f"tracemalloc peak {peak / MiB:.1f} MiB, budget peak {copier.memory_peak / MiB:.1f} MiB")

    assert result.status == Status.COPIED, result.reason
    assert result.strategy == Strategy.STREAM_MULTIPART
    assert result.bytes == size
    assert copier.memory_peak <= bound
    assert peak < bound + slack
    assert bound + slack < size / 4  # holding the whole object (or a quarter of it) cannot pass
