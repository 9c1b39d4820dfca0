"""Prepare's look at a manifest before any fan-out: can it be read as the format it claims?

Why here: the Distributed Map's ItemReader reads a manifest as it goes, so a manifest that
breaks on line 40,000 (bytes that are not UTF-8, a row the CSV or JSON parser cannot read, a
line of many MB) stops the Map Run with `States.ItemReaderFailed` after the first batches
have copied. A user expects such a job to be refused up front, with the file, the line and
the fix, and nothing written. So Prepare reads the manifest once, streamed in bounded memory
(at most one line of MAX_LINE_BYTES plus one chunk), and refuses it on the first problem.

What is a whole-manifest problem (refused here) and what is a row problem (failed per object
by CopyBatch, see items.plan_item): a problem here makes the rows unknowable (which bytes are
the key? where does the row end?); a row problem leaves the other rows' meaning intact.

AWS behaviour this follows (Step Functions developer guide, input-output-itemreader.html):
InputType CSV takes its header from the first row; rows with fewer fields get "" for the
missing ones and extra fields are dropped (row problems at most); GZIP input files are read
decompressed; an S3 Inventory manifest.json lists its data files in `files`. Every item must
fit the 256 KiB state payload quota (aws-limits.md), so no row may be longer than that. A CSV
with duplicate header names, or with a header and no rows, fails the Map Run with
States.ItemReaderFailed (LocalStack's ItemReader does the same for duplicates; a header-only
CSV failing on AWS is reported by users, not documented). How AWS treats a byte-order mark or
bytes that are not UTF-8 is not documented: Ferry refuses what it cannot read the same way on
every path, and accepts a UTF-8 byte-order mark at the start of a CSV (Excel's "CSV UTF-8"),
whose column names items.plan_item reads with or without it.
"""

from __future__ import annotations

import csv
import json
import logging
import time
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferry.errors import ConfigError, describe
from ferry.pipeline.items import field_name

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 256 * 1024  # Step Functions' state payload quota: no item can be larger
CHUNK_BYTES = 64 * 1024
CHECK_SECONDS = 120.0  # Prepare's Lambda has 5 minutes; past this the ItemReader checks the rest
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class ManifestError(ConfigError):
    """The manifest cannot be read as its format; the message names the file, line and fix."""


def check_manifest(s3: Any, bucket: str, key: str, fmt: str, *, seconds: float = CHECK_SECONDS) -> None:
    """Read the whole manifest (or as much as `seconds` allows) and refuse it on the first
    problem that would stop the ItemReader or make its rows unknowable."""
    where = f"s3://{bucket}/{key}"
    deadline = time.monotonic() + seconds
    if fmt == "inventory":
        _check_inventory_files(s3, bucket, key, where, deadline)
        return
    body = _open(s3, bucket, key, where)
    try:
        lines = _decoded_lines(_split_lines(_pieces(body, key, where), where), where, fmt)
        check = _check_csv if fmt == "csv" else _check_jsonl
        checked = check(lines, where, deadline)
    finally:
        body.close()
    if checked is not None:
        log.info("checked the first %d lines of %s; the ItemReader reads the rest", checked, where)


def _fail(where: str, line: int | None, problem: str) -> ManifestError:
    at = f"line {line} of {where}" if line else where
    return ManifestError(f"source.manifest: {at} {problem}")


def _open(s3: Any, bucket: str, key: str, where: str) -> Any:
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"]
    except (ClientError, BotoCoreError) as error:
        raise ManifestError(
            f"source.manifest: cannot read {where}: "
            + describe(error, side="source", action="s3:GetObject", bucket=bucket, key=key)
        ) from error


def _pieces(body: Any, key: str, where: str) -> Iterator[bytes]:
    """The object's bytes in chunks, gunzipped when the key says gzip (as the ItemReader does),
    never more than one chunk's worth of output at a time (a gzip bomb stays small too)."""
    chunks = body.iter_chunks(CHUNK_BYTES)
    if not key.endswith((".gz", ".gzip")):
        yield from chunks
        return
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        for chunk in chunks:
            data = chunk
            while data:
                yield inflater.decompress(data, CHUNK_BYTES)
                data = inflater.unconsumed_tail
        yield inflater.flush()
        if not inflater.eof:
            raise _fail(
                where,
                None,
                "is cut short: the gzip data ends before its end marker; upload the whole file again",
            )
    except zlib.error as error:
        raise _fail(
            where, None, f"is not gzip data ({error}): a key ending in .gz must be gzipped"
        ) from error


def _split_lines(pieces: Iterable[bytes], where: str) -> Iterator[bytes]:
    """Lines split at b"\\n" only (JSON strings may hold U+2028; CSV fields may hold "\\r"),
    without their "\\n"; a line longer than MAX_LINE_BYTES is refused before it is all read."""
    buffer = bytearray()
    number = 1
    for piece in pieces:
        start = 0
        while True:
            end = piece.find(b"\n", start)
            buffer += piece[start:] if end < 0 else piece[start:end]
            if len(buffer) > MAX_LINE_BYTES:
                raise _fail(
                    where,
                    number,
                    "is longer than 256 KiB: a manifest row names one object (an S3 key is at most "
                    "1,024 bytes) and Step Functions passes at most 256 KiB per item; is this file "
                    "a manifest? Fix that line, or give the right file",
                )
            if end < 0:
                break
            yield bytes(buffer)
            buffer.clear()
            number += 1
            start = end + 1
    if buffer:
        yield bytes(buffer)


def _decoded_lines(lines: Iterable[bytes], where: str, fmt: str) -> Iterator[str]:
    """Each line as text, or the line and byte that are not UTF-8 and how to convert."""
    for number, raw in enumerate(lines, 1):
        if number == 1:
            raw = _first_line(raw, where, fmt)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            if b"\x00" in raw:
                raise _fail(where, number, _UTF16) from error
            bad = raw[error.start]
            raise _fail(
                where,
                number,
                f"is not UTF-8 (byte 0x{bad:02x} at column {error.start + 1}; Latin-1 or Windows-1252 "
                "text?): save the manifest as UTF-8, for example with "
                "`iconv -f WINDOWS-1252 -t UTF-8 old.csv > new.csv`",
            ) from error
        if "\x00" in text:
            raise _fail(where, number, _UTF16)
        yield text[:-1] if text.endswith("\r") else text


_UTF16 = (
    'holds NUL bytes: it looks like UTF-16 text (Windows\' "Unicode"); Ferry and Step Functions '
    "read manifests as UTF-8: save it as UTF-8, for example with `iconv -f UTF-16 -t UTF-8 old.csv > new.csv`"
)


def _first_line(raw: bytes, where: str, fmt: str) -> bytes:
    if raw.startswith(_UTF16_BOMS):
        raise _fail(where, 1, "starts with a UTF-16 byte-order mark: " + _UTF16.split(": ", 1)[1])
    if raw.startswith(_UTF8_BOM):
        if fmt == "jsonl":
            raise _fail(
                where,
                1,
                "starts with a byte-order mark, which is not JSON: save the file as UTF-8 "
                "without a byte-order mark",
            )
        return raw[len(_UTF8_BOM) :]  # Excel's "CSV UTF-8": items.field_name reads past it
    return raw


def _check_csv(lines: Iterator[str], where: str, deadline: float) -> int | None:
    """Strict RFC 4180 parsing: a row the parser would have to guess at is refused with its
    line; a header must name a `key` column once. Returns the lines checked if time ran out."""
    reader = csv.reader((line + "\n" for line in lines), strict=True)
    header: list[str] | None = None
    rows = 0
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            raise _fail(where, start, _csv_problem(str(error))) from error
        if not row:
            continue
        if header is None:
            header = row
            _check_header(header, where)
            continue
        rows += 1
        if rows % 1024 == 0 and time.monotonic() > deadline:
            return reader.line_num
    if header is None:
        raise _fail(
            where, None, "is empty: give a CSV manifest with a header line (`key`, then one key a line)"
        )
    if rows == 0:
        raise _fail(
            where, None, "has a header but no rows: nothing to copy; give a manifest that lists objects"
        )
    return None


def _csv_problem(error: str) -> str:
    if "expected after" in error:
        return (
            f"cannot be read as CSV ({error}): a quoted field has text after its closing quote; "
            'write a " inside a field as "" and quote the whole field ("a""b.txt")'
        )
    if "end of data" in error:
        return (
            "opens a quote that is never closed: every later line would be read into this row; "
            'close the quote, or write a " inside a field as "" and quote the whole field'
        )
    if "field limit" in error:
        return (
            "starts a row with a field longer than 128 KiB (is a quote opened there never closed?): "
            "a manifest row names one object; close the quote or fix the row"
        )
    return f"cannot be read as CSV: {error}"


def _check_header(header: list[str], where: str) -> None:
    names = [field_name(name) for name in header]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise _fail(where, 1, f"is a header that names the column '{name}' twice: name each column once")
        seen.add(name)
    if "key" not in names:
        shown = ", ".join(header)[:200]
        raise _fail(
            where,
            1,
            f"is a header with no 'key' column (it reads '{shown}'): the first line must name the "
            "columns, for example `key` or `bucket,key,version_id`; put such a header line first",
        )


_JSONL_ROW = 'each line must be one JSON object such as {"key": "photos/a.jpg"}'


def _check_jsonl(lines: Iterator[str], where: str, deadline: float) -> int | None:
    """Every line one JSON object (NaN and Infinity are not JSON) with a key: that is what a
    JSON Lines manifest is, and a row naming no object could only be reported without a name.
    What else a row says is its own business (items.plan_item fails a row whose size is wrong)."""
    rows = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, parse_constant=_not_json)
        except (ValueError, RecursionError) as error:
            raise _fail(where, number, f"is not JSON ({str(error)[:200]}): {_JSONL_ROW}") from error
        problem = _row_problem(row)
        if problem:
            raise _fail(where, number, f"{problem}: {_JSONL_ROW}")
        rows += 1
        if rows % 1024 == 0 and time.monotonic() > deadline:
            return number
    if rows == 0:
        raise _fail(where, None, "has no rows: nothing to copy; give one JSON object a line")
    return None


def _row_problem(row: Any) -> str | None:
    """Why a JSON Lines row names no object, if it does not."""
    if not isinstance(row, dict):
        return f"is {json.dumps(row)[:100]}, not a JSON object"
    keys = [value for name, value in row.items() if field_name(str(name)) == "key"]
    if not keys:
        return f'has no "key" ({json.dumps(row)[:100]})'
    if not isinstance(keys[0], str) or not keys[0]:
        return (
            f'has a "key" that is not a key ({json.dumps(keys[0])[:100]}): give the object\'s key as a string'
        )
    return None


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")


def _check_inventory_files(s3: Any, bucket: str, key: str, where: str, deadline: float) -> None:
    """manifest.json's `files`: a list of objects each naming its data file's `key`, each of
    which can be read (a lifecycle rule may have expired data files the manifest still lists;
    the ItemReader reads them from the inventory's destination bucket, in order)."""
    body = _open(s3, bucket, key, where)
    try:
        manifest = json.loads(body.read(1024 * 1024 * 16))
    except ValueError as error:
        raise _fail(where, None, "is not an S3 Inventory manifest.json (not JSON)") from error
    finally:
        body.close()
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if files is None:
        return
    if not isinstance(files, list) or not all(
        isinstance(f, dict) and isinstance(f.get("key"), str) and f["key"] for f in files
    ):
        raise _fail(
            where,
            None,
            "has a `files` list whose entries do not each name a data file's `key`: give the "
            "manifest.json S3 Inventory wrote, unchanged",
        )
    data_bucket = str(manifest.get("destinationBucket") or bucket).rsplit(":", 1)[-1]
    for entry in files:
        if time.monotonic() > deadline:
            return
        try:
            s3.head_object(Bucket=data_bucket, Key=entry["key"])
        except (ClientError, BotoCoreError) as error:
            raise _fail(
                where,
                None,
                f"lists s3://{data_bucket}/{entry['key']}, which cannot be read ("
                + describe(error, side="source", action="s3:GetObject", bucket=data_bucket, key=entry["key"])
                + "): the inventory is incomplete (data files expired?); give a newer inventory's manifest.json",
            ) from error
