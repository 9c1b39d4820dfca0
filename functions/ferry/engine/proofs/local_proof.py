"""How a local file is proved to hold an S3 object's bytes, from the object's own evidence.

A download proves the file it wrote with it; skip-existing proves with it that a file already
at a download's destination, or an object already at an upload's, is identical. The evidence
is the object's HEAD (ChecksumMode=ENABLED), strongest first:

1. a full-object checksum: the same checksum of the file (a CRC combines from any parts, so a
   download in parallel parts computes it part by part; a SHA of a one-part object is taken
   over the file in order);
2. a COMPOSITE checksum (`-N`): the checksums of the file's bytes in the object's own parts
   (learned with HEAD partNumber, else the common part size that gives N parts), combined;
3. an MD5 ETag (no SSE-KMS or SSE-C): the file's MD5, or for a `-N` ETag the MD5 of its
   parts' MD5s in the object's parts.

Anything else cannot be proved: a download of it fails before writing a byte, and
skip-existing copies it again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ferry.engine.proofs import checksums
from ferry.engine.proofs.source import SourceInfo, guess_layout, learn_layout
from ferry.errors import VerificationFailed
from ferry.limits import MiB, Part, format_size

CHUNK = 1 * MiB  # bytes read, hashed and written at a time
ReadAt = Callable[[int, memoryview], None]


@dataclass(frozen=True)
class Proof:
    """What a file's bytes must come to: `expected`, computed with `algorithm` ("MD5" for
    ETags) over the whole file, or over `parts` (the object's layout) and combined."""

    kind: str  # "full", "composite", "md5" (a one-part ETag) or "etag" (a `-N` ETag)
    algorithm: str
    expected: str
    parts: list[Part] | None = None
    guessed: bool = False  # the parts are a common part size's, not learned from the object

    @property
    def by_parts(self) -> bool:
        """Whether it can be computed part by part, in any order: a CRC, or per-part values
        over the object's own layout. Otherwise the bytes must be hashed in order."""
        return self.parts is not None or self.algorithm in checksums.CRC_ALGORITHMS

    @property
    def verified_by(self) -> str:
        if self.kind == "full":
            return f"{self.algorithm.lower()} (full object)"
        if self.kind == "composite":
            return f"{self.algorithm.lower()} (composite)"
        return "md5" if self.kind == "md5" else "etag"

    def identical_reason(self) -> str:
        if self.kind in ("full", "composite"):
            return f"identical ({self.algorithm.lower()} {self.expected})"
        return f"identical (ETag {self.expected})"

    def combine(self, values: Sequence[tuple[str, int]]) -> str:
        """The whole value from (part value, part size) in part order."""
        if self.kind == "etag":
            return checksums.multipart_etag(bytes.fromhex(v) for v, _ in values)
        if self.kind == "composite":
            return checksums.composite(self.algorithm, [v for v, _ in values])
        if len(values) == 1:
            return values[0][0]
        return checksums.combine(self.algorithm, values)

    def check(self, value: str, what: str = "the file") -> None:
        if value == self.expected:
            return
        name = "ETag" if self.kind in ("md5", "etag") else f"{self.algorithm} checksum"
        if self.guessed and self.parts:
            raise VerificationFailed(
                f"cannot be proved: the {name} of {what} in parts of {format_size(self.parts[0].size)} is "
                f"{value}, the object's {self.expected}; its part sizes could not be learned "
                "(HEAD partNumber), and a common part size was guessed"
            )
        raise VerificationFailed(
            f"verification failed: the {name} of {what} is {value}, the object's is {self.expected}"
        )


def proof_for(client: Any, info: SourceInfo) -> Proof | None:
    """The strongest proof the object's evidence allows (see the module), or None. May ask
    the object's part sizes (HEAD partNumber) for a proof over its parts."""
    src = info.checksum
    if src is not None and src.is_full_object:
        return Proof("full", src.algorithm, src.value)
    if src is not None and src.parts_count:
        layout, guessed = _layout(client, info, src.parts_count)
        if layout is not None:
            return Proof("composite", src.algorithm, src.value, layout, guessed)
    if not info.etag_is_md5:
        return None
    if not info.is_multipart:
        return Proof("md5", "MD5", info.etag)
    layout, guessed = _layout(client, info, info.parts_count or 0)
    return Proof("etag", "MD5", info.etag, layout, guessed) if layout is not None else None


def unprovable(info: SourceInfo) -> str:
    """Why no proof can be made for an object, in one sentence."""
    if info.checksum is not None and not info.checksum.is_full_object:
        return (
            f"cannot be proved: the object's {info.checksum.algorithm} checksum is over its parts, "
            "and their sizes could not be learned"
        )
    if info.is_multipart and info.etag_is_md5:
        return "cannot be proved: the object has no checksum, and the sizes of the parts its ETag is over could not be learned"
    return (
        "cannot be proved: the object has no checksum, and its ETag is not an MD5 "
        "(SSE-KMS or SSE-C): nothing it carries can be compared with the bytes"
    )


def _layout(client: Any, info: SourceInfo, count: int) -> tuple[list[Part] | None, bool]:
    """The object's parts (asked), else a guess: (parts or None, guessed)."""
    learned = learn_layout(client, info)
    if learned is not None:
        return (learned if len(learned) == count else None), False
    guess = guess_layout(info)
    return (guess if guess is not None and len(guess) == count else None), True


def compute(proof: Proof, read_at: ReadAt, size: int) -> str:
    """The proof's value over bytes read with `read_at` (a file, or a buffer): one pass."""
    scratch = bytearray(min(CHUNK, max(size, 1)))
    if proof.parts is None:
        return _over(proof.algorithm, read_at, 0, size, scratch)
    return proof.combine(
        [(_over(proof.algorithm, read_at, p.start, p.end, scratch), p.size) for p in proof.parts]
    )


def _over(algorithm: str, read_at: ReadAt, start: int, end: int, scratch: bytearray) -> str:
    running = checksums.Running(algorithm)
    view = memoryview(scratch)
    offset = start
    while offset < end:
        n = min(len(scratch), end - offset)
        read_at(offset, view[:n])
        running.update(view[:n])
        offset += n
    return running.value()


def compute_in_memory(proof: Proof, data: memoryview) -> str:
    """The proof's value over bytes already in memory (an upload's buffer, compared before
    it is sent): hashed where they are, not copied."""
    if proof.parts is None:
        return _hashed(proof.algorithm, data)
    return proof.combine([(_hashed(proof.algorithm, data[p.start : p.end]), p.size) for p in proof.parts])


def _hashed(algorithm: str, data: memoryview) -> str:
    running = checksums.Running(algorithm)
    running.update(data)
    return running.value()
