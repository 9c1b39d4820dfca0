"""What the Distributed Map's ItemReader and ItemBatcher do, for `ferry run` on one machine:
read the job's items in the shapes Step Functions hands them to the child workflow, and cut
them into batches by the same two limits.

Item shapes, as the Step Functions developer guide documents them (input-output-itemreader.html),
so CopyBatch sees on this machine exactly what it sees on AWS:
- a prefix (`s3:listObjectsV2`): `{"Etag": "\"<md5>\"", "Key": ..., "LastModified": <epoch
  seconds>, "Size": ..., "StorageClass": ...}`; `Etag` spelled so, with its quotes; `read_items`
  then renames the fields as the parent's ItemSelector does (ferry.listed_items);
- a CSV manifest (`InputType: CSV`, header in the first row): one object per row keyed by the
  header's names, every value a string, "" for a missing field, extra fields dropped;
- a JSON Lines manifest (`InputType: JSONL`): one JSON value per line;
- an S3 Inventory (`InputType: MANIFEST`): the `manifest.json`'s CSV `files` (gzipped), each
  row keyed by the `fileSchema` names, every value a string.
Listings are read page by page and manifests line by line, as the object streams in: a
manifest of millions of keys costs the memory of one read buffer, not of its whole text.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.errors import ConfigError, describe
from ferry.listed_items import select
from ferry.pipeline.history_keys import history_items
from ferry.pipeline.local_reports import ReportStore
from ferry.s3.listing import list_objects

# Step Functions' state payload quota: no batch is larger, whatever MaxInputBytesPerBatch says.
MAX_BATCH_BYTES = 256 * 1024


def read_items(
    s3: Any,
    job: Mapping[str, Any],
    *,
    after: tuple[int, Any] | None = None,
    reports: ReportStore | None = None,
) -> Iterator[Any]:
    """The items of a job as Prepare returned it (`listing`, `manifest` or `histories`, and
    `reader`). An all_versions job's keys are the parts its listing wrote into `reports`, read
    through the manifest naming them as the Map reads them from the report bucket
    (pipeline/history_keys.py).

    `after`: (items already read, the last of them) when a run resumes: a listing goes on
    after that key (listings are in key order), a manifest after that many rows."""
    reader = job["reader"]
    if reader == "versions":
        if reports is None:
            raise ConfigError("an all_versions job's keys are read from the job's report store")
        manifest = job["histories"].get("manifest")  # none: no key has a history
        keys = history_items(reports, manifest) if manifest else iter(())
        yield from itertools.islice(keys, after[0] if after else 0, None)
        return
    if reader == "listing":  # then the CopyPrefix Map's ItemSelector, as on AWS
        start_after = str(after[1]["k"]) if after and isinstance(after[1], Mapping) else ""
        listing = job["listing"]
        yield from map(select, listing_items(s3, listing["bucket"], listing["prefix"], start_after))
        return
    if after:
        yield from itertools.islice(read_items(s3, job), after[0], None)
        return
    bucket, key = job["manifest"]["bucket"], job["manifest"]["key"]
    if reader == "csv":
        yield from csv_items(_lines(s3, bucket, key), where=f"s3://{bucket}/{key}")
    elif reader == "jsonl":
        yield from jsonl_items(_lines(s3, bucket, key), f"s3://{bucket}/{key}")
    elif reader == "inventory":
        yield from inventory_items(s3, bucket, key)
    else:
        raise ConfigError(f"reader {reader!r} is not one Ferry knows (listing, csv, jsonl, inventory)")


def listing_items(s3: Any, bucket: str, prefix: str, start_after: str = "") -> Iterator[dict[str, Any]]:
    """ListObjectsV2 over the prefix (ferry.s3.listing's paginated reader), in AWS's item shape."""
    for obj in list_objects(s3, bucket, prefix, start_after):
        item: dict[str, Any] = {
            "Etag": f'"{obj.etag}"' if obj.etag else "",
            "Key": obj.key,
            "LastModified": int(obj.last_modified.timestamp()) if obj.last_modified else None,
            "Size": obj.size,
            "StorageClass": obj.storage_class or "STANDARD",
        }
        yield {k: v for k, v in item.items() if v is not None}


def csv_items(
    text: str | Iterable[str], delimiter: str = ",", where: str = "the manifest"
) -> Iterator[dict[str, str]]:
    """CSV rows keyed by the header; `text` is the whole text or its lines as they stream in."""
    lines = io.StringIO(text) if isinstance(text, str) else iter(text)
    rows = _parsed(csv.reader(_without_bom(lines), delimiter=delimiter), where)
    header = next(rows, None)
    if header is None:
        return
    if len(set(header)) < len(header):
        raise ConfigError("source.manifest: the CSV header names a column twice")
    yield from _as_objects(header, rows)


def jsonl_items(text: str | Iterable[str], where: str) -> Iterator[Any]:
    """One JSON value per line; `text` is the whole text or its lines as they stream in."""
    # Lines end at "\n" only: str.splitlines would also split at U+2028 or U+0085, which a JSON
    # string (and so an S3 key) may hold unescaped (the stream's lines split as io does: \n, \r).
    lines = text.split("\n") if isinstance(text, str) else text
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                yield json.loads(line)
            except (ValueError, RecursionError) as error:
                raise ConfigError(
                    f"source.manifest: line {number} of {where} is not JSON: {error}"
                ) from error


def inventory_items(s3: Any, bucket: str, key: str) -> Iterator[dict[str, str]]:
    try:
        manifest = json.loads(_text(s3, bucket, key))
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"source.manifest: s3://{bucket}/{key} is not an S3 Inventory manifest.json"
        ) from error
    if manifest.get("fileFormat") != "CSV":
        raise ConfigError(
            f"source.manifest: the inventory is {manifest.get('fileFormat')!r}; Step Functions reads CSV only"
        )
    columns = [name.strip() for name in str(manifest.get("fileSchema", "")).split(",")]
    data_bucket = str(manifest.get("destinationBucket") or bucket).rsplit(":", 1)[-1]
    for data_file in manifest.get("files", []):
        where = f"s3://{data_bucket}/{data_file['key']}"
        yield from _as_objects(columns, _parsed(csv.reader(_lines(s3, data_bucket, data_file["key"])), where))


def batches(
    items: Iterable[Any], *, max_items: int, max_bytes: int, batch_input: Mapping[str, Any]
) -> Iterator[list[Any]]:
    """ItemBatcher: at most `max_items` items and `max_bytes` bytes per child input, counted as
    the child's input `{"Items": [...], "BatchInput": {...}}` in compact UTF-8 JSON (the same
    count tests/pipeline/parent_harness.py reproduces); an item larger than the limit on its
    own goes alone."""
    limit = min(max_bytes, MAX_BATCH_BYTES)
    base = _size({"Items": [], "BatchInput": batch_input})
    chunk: list[Any] = []
    used = base
    for item in items:
        item_bytes = _size(item)
        extra = item_bytes + (1 if chunk else 0)
        if chunk and (used + extra > limit or len(chunk) >= max_items):
            yield chunk
            chunk, used, extra = [], base, item_bytes
        chunk.append(item)
        used += extra
    if chunk:
        yield chunk


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _parsed(reader: Any, where: str) -> Iterator[list[str]]:
    """The reader's non-empty rows; a row the csv module cannot read (a field over its size
    limit, say) stops the reader with the line, not with an unexplained csv.Error."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise ConfigError(
                f"source.manifest: line {reader.line_num} of {where} cannot be read as CSV: {error}"
            ) from error
        if row:
            yield row


def _without_bom(lines: Iterator[str]) -> Iterator[str]:
    """The lines with a UTF-8 byte-order mark (as Excel writes) dropped from the first."""
    first = next(lines, None)
    if first is None:
        return
    yield first.removeprefix("\ufeff")
    yield from lines


def _as_objects(header: list[str], rows: Iterable[list[str]]) -> Iterator[dict[str, str]]:
    for row in rows:
        yield {name: (row[i] if i < len(row) else "") for i, name in enumerate(header)}


def _lines(s3: Any, bucket: str, key: str) -> Iterator[str]:
    """The object's text line by line (gunzipped if its key ends .gz), read as it streams in:
    memory stays one buffer whatever the size. Lines keep their ends (csv needs them; JSON
    ignores them); a line ends at \\n, \\r\\n or \\r."""
    body = _open(s3, bucket, key)
    raw: IO[bytes] = io.BufferedReader(_Raw(body), 256 * 1024)
    if key.endswith((".gz", ".gzip")):
        raw = gzip.GzipFile(fileobj=raw, mode="rb")
    try:
        yield from io.TextIOWrapper(raw, encoding="utf-8", newline="")
    except UnicodeDecodeError as error:
        raise ConfigError(f"source.manifest: s3://{bucket}/{key} is not UTF-8 text") from error
    except (ClientError, BotoCoreError) as error:  # the connection broke mid-way
        raise _unreadable(error, bucket, key) from error
    except (EOFError, zlib.error, gzip.BadGzipFile) as error:  # not gzip, or cut short
        raise ConfigError(f"source.manifest: s3://{bucket}/{key} cannot be gunzipped: {error}") from error
    finally:
        body.close()


class _Raw(io.RawIOBase):
    """A GetObject body as a raw stream, so io's buffered and text layers can read it:
    StreamingBody.read(amt) reads at most amt bytes from the socket
    (https://docs.aws.amazon.com/botocore/latest/reference/response.html), all this adapter
    needs, whatever else a botocore release's StreamingBody offers."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _open(s3: Any, bucket: str, key: str) -> Any:
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"]
    except (ClientError, BotoCoreError) as error:
        raise _unreadable(error, bucket, key) from error


def _unreadable(error: ClientError | BotoCoreError, bucket: str, key: str) -> ConfigError:
    return ConfigError(
        f"source.manifest: cannot read s3://{bucket}/{key}: "
        + describe(error, side="source", action="s3:GetObject", bucket=bucket, key=key)
    )


def _text(s3: Any, bucket: str, key: str) -> str:
    """A small object's whole text (an inventory's manifest.json)."""
    data = _open(s3, bucket, key).read()
    if key.endswith((".gz", ".gzip")):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:  # not gzip, or cut short
            raise ConfigError(f"source.manifest: s3://{bucket}/{key} cannot be gunzipped: {error}") from error
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            f"source.manifest: line {line} of s3://{bucket}/{key} is not UTF-8 "
            f"(byte 0x{data[error.start]:02x}): save the manifest as UTF-8"
        ) from error
