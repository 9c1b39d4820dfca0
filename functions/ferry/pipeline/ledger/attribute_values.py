"""DynamoDB attribute values to and from Python, as boto3's TypeSerializer and TypeDeserializer
convert them, without importing boto3.

boto3's package brings s3transfer, and s3transfer multiprocessing: about a tenth of
`import botocore.session`'s CPU, paid in every Lambda's (billed) init phase for two small
converters. The rules are boto3's (tests/pipeline/test_attribute_values.py holds them to
boto3's own on the same values): None, bool, int or Decimal (within DynamoDB's 38 digits,
exactly), str, bytes, sets of one of those kinds, mappings and lists; floats are refused, as
boto3 refuses them (a float does not round-trip). One difference: a binary value comes back as
bytes, not boto3's Binary wrapper (the ledger stores none).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from decimal import Clamped, Context, Decimal, Inexact, Overflow, Rounded, Underflow
from typing import Any

# DynamoDB's numbers: 38 significant digits, exponents -130 to +125; anything inexact is an error.
NUMBERS = Context(Emin=-128, Emax=126, prec=38, traps=[Clamped, Overflow, Inexact, Rounded, Underflow])
_BINARY = (bytes, bytearray)


def serialize(value: Any) -> dict[str, Any]:
    """A Python value as an attribute value ({'S': ...}, {'N': ...}, {'M': {...}}, ...)."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if _is_number(value):
        return {"N": _number(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, _BINARY):
        return {"B": value}
    if isinstance(value, Set):
        if all(_is_number(v) for v in value):
            return {"NS": [_number(v) for v in value]}
        if all(isinstance(v, str) for v in value):
            return {"SS": list(value)}
        if all(isinstance(v, _BINARY) for v in value):
            return {"BS": list(value)}
    if isinstance(value, Mapping):
        return {"M": {k: serialize(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"L": [serialize(v) for v in value]}
    raise TypeError(f'Unsupported type "{type(value)}" for value "{value}"')


def deserialize(attribute: Mapping[str, Any]) -> Any:
    """An attribute value as Python: numbers as Decimal, sets as sets, maps as dicts."""
    if not attribute:
        raise TypeError("Value must be a nonempty dictionary whose key is a valid dynamodb type.")
    kind, value = next(iter(attribute.items()))
    if kind == "S" or kind == "BOOL" or kind == "B":
        return value
    if kind == "N":
        return NUMBERS.create_decimal(value)
    if kind == "NULL":
        return None
    if kind == "M":
        return {k: deserialize(v) for k, v in value.items()}
    if kind == "L":
        return [deserialize(v) for v in value]
    if kind == "SS" or kind == "BS":
        return set(value)
    if kind == "NS":
        return {NUMBERS.create_decimal(v) for v in value}
    raise TypeError(f"Dynamodb type {kind} is not supported")


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        raise TypeError("Float types are not supported. Use Decimal types instead.")
    return isinstance(value, (int, Decimal))  # in a set, True counts as 1, as in boto3


def _number(value: int | Decimal) -> str:
    number = str(NUMBERS.create_decimal(value))
    if number in ("Infinity", "NaN"):
        raise TypeError("Infinity and NaN not supported")
    return number
