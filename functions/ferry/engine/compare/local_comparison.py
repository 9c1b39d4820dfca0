"""Does a local file hold an S3 object's bytes? What `ferry check` asks of a key held by a
local folder on one side and an S3 prefix on the other.

The object's own evidence decides, as when a download is proved or skip-existing compares a
file with an object (local_proof.py): its full-object checksum, or its composite checksum or
`-N` ETag over its own parts, or a single-part MD5 ETag, each computed over the file while it
is read (one read, no transfer). Truthfully:

- a value that matches proves the same bytes (`checksum` or `etag`);
- one that differs proves other bytes, except over a part layout that could only be guessed
  (HEAD partNumber not answered): another layout gives another value, so that proves nothing;
- an object that carries nothing comparable (no checksum, an ETag that is no MD5: SSE-KMS,
  SSE-C) leaves the size alone, and says so (`size`), as check does for two objects.
"""

from __future__ import annotations

from typing import Any

from ferry.engine.compare.comparison import Sameness, by_size
from ferry.engine.proofs.local_proof import compute, proof_for
from ferry.engine.proofs.source import from_head
from ferry.local.reading import LocalReader
from ferry.models import SourceObject


def compare_file(
    client: Any,
    obj: SourceObject,
    head: dict[str, Any],
    path: str,
    *,
    object_is_source: bool,
    follow_symlinks: bool = False,
) -> Sameness:
    """The object (as its HEAD showed it) against the file at `path`. Raises OSError or
    CopyFailed when the file cannot be read, or changed while it was read."""
    info = from_head(obj, head)
    with LocalReader.open(path, follow_symlinks=follow_symlinks) as reader:
        sizes = by_size(*_ordered(info.size, reader.size, object_is_source))
        if sizes is not None:
            return sizes
        proof = proof_for(client, info)
        if proof is None:
            return Sameness(
                True,
                "size",
                f"same size ({info.size} bytes); the object has no checksum or MD5 ETag to compare the file with",
            )
        value = compute(proof, reader.read_at, reader.size)
        reader.check_unchanged()
    evidence = "checksum" if proof.kind in ("full", "composite") else "etag"
    name = proof.algorithm.lower() if evidence == "checksum" else "ETag"
    if value == proof.expected:
        return Sameness(True, evidence, f"{name} {value} on both")
    if proof.guessed:
        return Sameness(
            True,
            "size",
            f"same size ({info.size} bytes); the object's {name} is over parts whose sizes could not be "
            "learned, so the file's cannot be computed to compare",
        )
    first, second = _ordered(proof.expected, value, object_is_source)
    plural = "ETags" if evidence == "etag" else name
    return Sameness(False, evidence, f"{plural} {first} and {second}")


def _ordered(of_object: Any, of_file: Any, object_is_source: bool) -> tuple[Any, Any]:
    """(source's, destination's), as every detail of check names them."""
    return (of_object, of_file) if object_is_source else (of_file, of_object)
