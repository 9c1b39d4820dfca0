"""The ledger's DynamoDB attribute values convert as boto3's TypeSerializer and TypeDeserializer
convert them (ferry.pipeline.ledger.attribute_values, which the workers use instead of
importing boto3): the same attribute values from the same Python values, the same Python
values back, the same errors."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

from ferry.pipeline.ledger.attribute_values import deserialize, serialize

VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -7,
    2**63,
    10**37,
    Decimal("0.1"),
    Decimal("-1.5E+10"),
    Decimal("12345678901234567890123456789012345678"),
    "",
    "JOB#a/b c",
    "ünïcödé ✓",
    b"\x00\xff",
    bytearray(b"abc"),
    {"a", "b"},
    {1, 2, Decimal("3.5")},
    {b"x", b"y"},
    [],
    [1, "two", None, [True, {"k": Decimal("1.25")}]],
    ("tuple", 1),
    {},
    {"pk": "JOB#1", "sk": "BATCH#0001", "counts": {"copied": 999, "failed": 1}, "done": True, "note": None},
    {"nested": {"deeper": [{"n": 10**20}, {"s": "x"}]}},
]


@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ + str(i) for i, v in enumerate(VALUES)])
def test_serialize_and_deserialize_agree_with_boto3(value: Any) -> None:
    ours = serialize(value)
    theirs = TypeSerializer().serialize(value)
    assert _sorted_sets(ours) == _sorted_sets(theirs)
    back, boto3_back = deserialize(ours), TypeDeserializer().deserialize(theirs)
    assert back == _unwrapped(boto3_back)


@pytest.mark.parametrize(
    "value",
    [
        1.5,
        {1.5},
        [1, 2.0],
        {"a": float("nan")},
        Decimal("Infinity"),
        Decimal("NaN"),
        10**40,
        Decimal("1E+200"),
        object(),
    ],
)
def test_what_boto3_refuses_is_refused_with_the_same_error(value: Any) -> None:
    with pytest.raises(Exception) as boto3_error:
        TypeSerializer().serialize(value)
    with pytest.raises(type(boto3_error.value)) as ours:
        serialize(value)
    assert str(ours.value) == str(boto3_error.value)


def test_an_unknown_or_empty_attribute_value_is_refused_as_boto3_refuses_it() -> None:
    for attribute in ({}, {"X": 1}):
        with pytest.raises(TypeError) as boto3_error:
            TypeDeserializer().deserialize(attribute)
        with pytest.raises(TypeError, match=str(boto3_error.value).split(".")[0]):
            deserialize(attribute)


def _sorted_sets(node: Any) -> Any:
    """Attribute values with the members of each set in one order (sets have none)."""
    if isinstance(node, dict):
        return {k: sorted(v) if k in ("SS", "NS", "BS") else _sorted_sets(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_sorted_sets(v) for v in node]
    return node


def _unwrapped(value: Any) -> Any:
    """boto3's values with its Binary wrapper taken off (ours are plain bytes)."""
    if isinstance(value, Binary):
        return value.value
    if isinstance(value, dict):
        return {k: _unwrapped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrapped(v) for v in value]
    if isinstance(value, set):
        return {_unwrapped(v) for v in value}
    return value
