"""SRC as one object or as a prefix (ferry.s3.listing.object_or_prefix): the one rule by which
`ferry copy`, `sync`, `check`, `copy --all-versions` and a download tell an object from a
prefix, judge the object by the filters, and say where it lands. On versitygw, with the HEADs
counted: a command's requests are counted elsewhere, so the rule must make exactly one HEAD
for a key that may name an object, and none for a folder.
"""

from __future__ import annotations

from typing import Any

import pytest

from ferry.filters import Filters, NamedKeys, marks_prefixes
from ferry.s3.listing import OneObject, Prefix, S3Url, landing_key, object_or_prefix

PHOTO = b"0123456789"  # 10 bytes


class Heads:
    """The keys of every HeadObject a client sends, in order."""

    def __init__(self, client: Any) -> None:
        self.keys: list[str] = []
        client.meta.events.register("provide-client-params.s3.HeadObject", self._seen)

    def _seen(self, params: dict[str, Any], **_: Any) -> None:
        self.keys.append(params["Key"])


@pytest.fixture
def bucket(versitygw: Any) -> str:
    """A photo, a note beside it, and one of Ferry's upload marks."""
    name = versitygw.bucket("src")
    versitygw.client.put_object(Bucket=name, Key="photos/a.jpg", Body=PHOTO)
    versitygw.client.put_object(Bucket=name, Key="photos/b.txt", Body=b"note")
    versitygw.client.put_object(Bucket=name, Key=".ferry/uploads/mark", Body=b"{}")
    return name


@pytest.fixture
def heads(versitygw: Any) -> Heads:
    return Heads(versitygw.client)


def test_a_key_naming_an_object_is_that_object_with_its_heads_evidence(
    versitygw: Any, bucket: str, heads: Heads
) -> None:
    source = object_or_prefix(versitygw.client, S3Url(bucket, "photos/a.jpg"), Filters())

    assert isinstance(source, OneObject)
    assert (source.name, source.own, source.admitted) == ("a.jpg", False, True)
    assert (source.found.bucket, source.found.key, source.found.size) == (bucket, "photos/a.jpg", len(PHOTO))
    assert source.found.etag and source.found.last_modified is not None
    assert heads.keys == ["photos/a.jpg"]


@pytest.mark.parametrize(
    ("key", "folder", "headed"),
    [
        ("photos/", "photos/", []),  # a folder: no HEAD
        ("", "", []),  # the whole bucket: no HEAD
        ("photos", "photos/", ["photos"]),  # no such object (a 404): the folder `photos/`
    ],
)
def test_a_folder_or_a_key_naming_no_object_is_a_prefix(
    versitygw: Any, bucket: str, heads: Heads, key: str, folder: str, headed: list[str]
) -> None:
    assert object_or_prefix(versitygw.client, S3Url(bucket, key), Filters()) == Prefix(folder)
    assert heads.keys == headed


@pytest.mark.parametrize(
    "filters",
    [
        Filters(exclude=("*.jpg",)),  # by its name, relative to its folder
        Filters(include=("photos/*",)),  # the name alone is judged, not the key
        Filters(min_size=len(PHOTO) + 1),  # by the size its HEAD gave
        Filters(max_size=len(PHOTO) - 1),
    ],
)
def test_an_object_the_filters_leave_out_is_still_one_object_but_not_admitted(
    versitygw: Any, bucket: str, heads: Heads, filters: Filters
) -> None:
    source = object_or_prefix(versitygw.client, S3Url(bucket, "photos/a.jpg"), filters)

    assert isinstance(source, OneObject)
    assert (source.own, source.admitted) == (False, False)
    assert heads.keys == ["photos/a.jpg"]  # never taken for a prefix and listed


@pytest.mark.parametrize(
    ("dst_key", "lands_on"),
    [
        ("backup/b.jpg", "backup/b.jpg"),  # DST's key
        ("backup/", "backup/a.jpg"),  # into DST's folder, under its own name
        ("", "a.jpg"),  # into the bucket
    ],
)
def test_an_object_lands_on_dsts_key_or_into_dsts_folder_under_its_name(
    versitygw: Any, bucket: str, dst_key: str, lands_on: str
) -> None:
    source = object_or_prefix(versitygw.client, S3Url(bucket, "photos/a.jpg"))

    assert isinstance(source, OneObject)
    assert source.key_in(dst_key) == lands_on
    assert landing_key(dst_key, "a.jpg") == lands_on  # one local file lands by the same rule


def test_one_of_ferrys_marks_is_never_admitted_and_the_filters_are_not_asked(
    versitygw: Any, bucket: str
) -> None:
    named = NamedKeys(["mark"])
    source = object_or_prefix(
        versitygw.client, S3Url(bucket, ".ferry/uploads/mark"), Filters(keys=named), marks_prefixes(None)
    )

    assert isinstance(source, OneObject)
    assert (source.own, source.admitted) == (True, False)
    assert named.unmatched() == ["mark"]  # not met: --files-from would say so


def test_without_filters_an_object_is_admitted_and_with_them_its_name_is_met(
    versitygw: Any, bucket: str
) -> None:
    """check_overlap and wildcard_source ask only whether SRC is one object: they give no
    filters, and the object counts as admitted. Judged by filters, its name is met in a
    --files-from list, as a listed key's is."""
    plain = object_or_prefix(versitygw.client, S3Url(bucket, "photos/a.jpg"))
    named = NamedKeys(["a.jpg", "z.jpg"])
    judged = object_or_prefix(versitygw.client, S3Url(bucket, "photos/a.jpg"), Filters(keys=named))

    assert isinstance(plain, OneObject) and plain.admitted
    assert isinstance(judged, OneObject) and judged.admitted
    assert named.unmatched() == ["z.jpg"]
