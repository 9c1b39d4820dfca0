"""Which source key an S3 event sent through EventBridge names.

S3's classic notification format (SNS, SQS, Lambda) URL-encodes keys: "red flower.jpg" arrives
as "red+flower.jpg" (user guide, notification-content-structure.html). The EventBridge page
(ev-events.html) says nothing of encoding, and a captured EventBridge event shows ':' as
written. Either reading may hold, so Ferry depends on neither:

- an event's key has up to two *forms*: as delivered, and decoded with `unquote_plus` when
  that differs (`key_forms`). Keys with no '+' or '%' have one form, and nothing below costs
  a request;
- two events whose keys are spelled differently are never merged: S3 spells one key one way,
  whichever way that is;
- a create with two forms is resolved against the source bucket (`resolve_created`): the
  form that exists, or the one whose ETag and size are the event's; when both fit (or neither
  of two that exist) nothing is guessed, the event fails with the reason;
- a deletion with two forms acts only on a form proved to be the event's
  (deletes.apply_deletes says how), never on a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from botocore.exceptions import ClientError

from ferry.errors import FerryError, describe
from ferry.s3.listing import listed_entry

# Manifest row fields of an event key with two forms: every form (so the job counts the object
# deleted only when all are absent), and the key as the event spelled it (kept in the copy
# record: a later "Object Deleted" event spelling it the same way names the same key).
KEY_FORMS_FIELD, EVENT_KEY_FIELD = "key_forms", "event_key"


class UndecidedKey(FerryError):
    """Two forms of an event's key fit the event equally: which one it names is not known."""


def key_forms(delivered: str, prefix: str = "") -> tuple[str, ...]:
    """The keys `delivered` may stand for under `prefix`: as delivered first, then decoded.
    Empty when neither form is under the prefix (an event outside the replication)."""
    forms = dict.fromkeys([delivered, unquote_plus(delivered)])
    return tuple(form for form in forms if form.startswith(prefix))


def listed(client: Any, bucket: str, key: str, side: str = "source") -> Mapping[str, Any] | None:
    """The key's listing entry (listing.listed_entry), None when absent; a refused listing is a
    FerryError naming the identity's missing permission."""
    try:
        return listed_entry(client, bucket, key)
    except ClientError as error:
        raise FerryError(
            describe(error, side=side, action="s3:ListBucket", bucket=bucket, key=key)
        ) from error


@dataclass(frozen=True)
class Resolved:
    """The form a create names (`key`), and its listing entry; `entry` None: no form exists."""

    key: str
    entry: Mapping[str, Any] | None


def resolve_created(
    client: Any, bucket: str, delivered: str, forms: Sequence[str], etag: str | None, size: int | None
) -> Resolved:
    """The source key an "Object Created" event names.

    One form: that one, unlooked-at. Otherwise each form is listed:
    - one exists: that one. If the event meant the other, that other is gone; copying an
      object that exists under the source prefix is never wrong for a replication;
    - none exists: the first form, with no entry; the job then counts it deleted at the source
      only if every form is still absent (batches._vanished_since_event);
    - both exist: the one whose ETag and size are the event's; if both or neither match
      (the same bytes under both keys, or both overwritten since), UndecidedKey, with the
      reason, rather than a guess."""
    if len(forms) == 1:
        return Resolved(forms[0], None)
    entries = {form: listed(client, bucket, form) for form in forms}
    present = [form for form, entry in entries.items() if entry is not None]
    if not present:
        return Resolved(forms[0], None)
    if len(present) == 1:
        return Resolved(present[0], entries[present[0]])
    matching = [form for form in present if _matches(entries[form], etag, size)]  # type: ignore[arg-type]
    if len(matching) == 1:
        return Resolved(matching[0], entries[matching[0]])
    described = " and ".join(
        f"s3://{bucket}/{form} (ETag {str(entries[form]['ETag']).strip(chr(34))}, {entries[form].get('Size')} bytes)"  # type: ignore[index,union-attr]
        for form in present
    )
    raise UndecidedKey(
        f"the event's key {delivered!r} may name {described}: both exist, and the event's ETag "
        f"{etag} and size {size} match {'both' if matching else 'neither'} (EventBridge does not "
        "document whether it URL-encodes keys); nothing is copied on a guess: copy the right key "
        "with `ferry copy`, then delete this message from the dead-letter queue"
    )


def _matches(entry: Mapping[str, Any], etag: str | None, size: int | None) -> bool:
    listed_etag = str(entry.get("ETag") or "").strip('"')
    return bool(etag) and listed_etag == etag and (size is None or entry.get("Size") == size)
