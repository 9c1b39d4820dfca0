"""Checksums as S3 writes them, computed locally so a copy can be proved before it is kept.

CRCs of parts combine into the CRC of the whole object (awscrt does the arithmetic), so a
multipart copy yields the same full-object value S3 stores for a single PUT: the one value
that can be compared with any source, whatever its part layout.

CRC32 (what boto3 and the AWS CLI send by default) comes from zlib-ng, not awscrt: measured on
8 MiB buffers, awscrt's CRC32 runs at 2.8 GiB/s on x86_64 where zlib-ng's runs at 53 GiB/s (its
CRC32C and CRC64NVME already run at 53 GiB/s), so awscrt's took a third of a download's client
CPU. The values are the same CRC (tests/engine/test_checksums.py holds them to awscrt's).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from awscrt import checksums as crt
from zlib_ng import zlib_ng

CRC_ALGORITHMS = ("CRC32", "CRC32C", "CRC64NVME")
_WIDTH = {"CRC32": 4, "CRC32C": 4, "CRC64NVME": 8}
_CRC: dict[str, Callable[..., int]] = {  # (data) or (data, previous)
    "CRC32": zlib_ng.crc32,
    "CRC32C": crt.crc32c,
    "CRC64NVME": crt.crc64nvme,
}
_COMBINE: dict[str, Callable[[int, int, int], int]] = {
    "CRC32": crt.combine_crc32,
    "CRC32C": crt.combine_crc32c,
    "CRC64NVME": crt.combine_crc64nvme,
}
_HASH = {"SHA256": hashlib.sha256, "SHA1": hashlib.sha1}


@dataclass(frozen=True)
class Checksum:
    """A checksum as S3 reports it: `COMPOSITE` values end in `-N` (a checksum of part checksums)."""

    algorithm: str
    value: str
    type: str = "FULL_OBJECT"

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.value}"

    @property
    def is_full_object(self) -> bool:
        return self.type == "FULL_OBJECT" and "-" not in self.value

    @property
    def parts_count(self) -> int | None:
        if "-" in self.value:
            return int(self.value.rsplit("-", 1)[1])
        return None


def digest(algorithm: str, data: bytes | memoryview) -> bytes:
    """Raw checksum bytes of one buffer, as S3 base64-encodes them."""
    if algorithm in _CRC:
        return _CRC[algorithm](data).to_bytes(_WIDTH[algorithm], "big")
    return _HASH[algorithm](data).digest()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def combine(algorithm: str, parts: Iterable[tuple[str, int]]) -> str:
    """Full-object CRC from (base64 part CRC, part length) in part order."""
    width = _WIDTH[algorithm]
    total: int | None = None
    for value, length in parts:
        crc = int.from_bytes(base64.b64decode(value), "big")
        total = crc if total is None else _COMBINE[algorithm](total, crc, length)
    if total is None:
        return b64(digest(algorithm, b""))
    return b64(total.to_bytes(width, "big"))


def composite(algorithm: str, part_values: Iterable[str]) -> str:
    """S3's COMPOSITE checksum: the checksum of the concatenated raw part checksums, `-N`."""
    raws = [base64.b64decode(v) for v in part_values]
    return f"{b64(digest(algorithm, b''.join(raws)))}-{len(raws)}"


def multipart_etag(part_md5s: Iterable[bytes]) -> str:
    md5s = list(part_md5s)
    return f"{hashlib.md5(b''.join(md5s)).hexdigest()}-{len(md5s)}"


def from_response(response: dict[str, Any]) -> Checksum | None:
    """The additional checksum an S3 response carries, if any (HEAD, PUT, Copy, Complete)."""
    for algorithm in ("CRC64NVME", "CRC32C", "CRC32", "SHA256", "SHA1"):
        value = response.get(f"Checksum{algorithm}")
        if value:
            kind = response.get("ChecksumType") or ("COMPOSITE" if "-" in value else "FULL_OBJECT")
            return Checksum(algorithm, value, kind)
    return None


def default_type(algorithm: str) -> str:
    """CRCs can be combined, so multipart uploads of them store a full-object value."""
    return "FULL_OBJECT" if algorithm in CRC_ALGORITHMS else "COMPOSITE"


class Running:
    """One checksum computed over bytes as they pass, a chunk at a time (a part streamed to
    disk, a file read in pieces): S3's algorithms, base64 as S3 writes them, or "MD5" (hex,
    as an ETag is written)."""

    def __init__(self, algorithm: str) -> None:
        self.algorithm = algorithm
        self._crc = 0
        self._hash: Any = None
        if algorithm == "MD5":
            self._hash = hashlib.md5()
        elif algorithm in _HASH:
            self._hash = _HASH[algorithm]()
        elif algorithm not in _CRC:
            raise ValueError(f"no running checksum for {algorithm}")

    def update(self, data: bytes | memoryview) -> None:
        if self._hash is not None:
            self._hash.update(data)
        else:
            self._crc = _CRC[self.algorithm](data, self._crc)  # each CRC goes on from a previous value

    def value(self) -> str:
        if self.algorithm == "MD5":
            return str(self._hash.hexdigest())
        if self._hash is not None:
            return b64(self._hash.digest())
        return b64(self._crc.to_bytes(_WIDTH[self.algorithm], "big"))
