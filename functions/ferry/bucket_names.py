"""Bucket names: which rule a name breaks, in words, before any request is made.

S3's general purpose bucket naming rules (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html):
3 to 63 characters; lowercase letters, digits, '.' and '-'; a letter or digit first and last;
no two adjacent periods; not formatted as an IP address. Buckets created in us-east-1 before
1 March 2018 could have names of up to 255 characters with upper case letters and underscores
(same page), so those two rules, and the length up to 255, are `legacy` problems: a name
breaking only them may still be an existing bucket, and is refused only once the endpoint says
there is no such bucket. The reserved prefixes and suffixes (`-s3alias`, `--x-s3`...) are not
checked: access point aliases and directory buckets are valid targets with such names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RULES = "3-63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit"
_IP_LIKE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_ANY_S3 = re.compile(r"^[A-Za-z0-9._-]+$")  # what any S3 ever accepted (botocore's own check)


@dataclass(frozen=True)
class NameProblem:
    """Why a name is not a bucket name today; `legacy` if an old us-east-1 bucket may have it."""

    reason: str
    legacy: bool

    def sentence(self, bucket: str) -> str:
        return f"{bucket!r} is not a valid bucket name: {self.reason} (S3 bucket names are {RULES})"


def bucket_name_problem(name: str) -> NameProblem | None:
    """The first naming rule `name` breaks, or None for a valid name."""
    if not name:
        return NameProblem("the name is empty", legacy=False)
    if not _ANY_S3.match(name):
        bad = sorted({c for c in name if not re.match(r"[A-Za-z0-9._-]", c)})
        return NameProblem(f"it contains {' '.join(repr(c) for c in bad)}", legacy=False)
    if len(name) < 3:
        return NameProblem(f"it has {len(name)} characters, fewer than 3", legacy=False)
    if len(name) > 255:
        return NameProblem(f"it has {len(name)} characters, more than 63", legacy=False)
    if _IP_LIKE.match(name):
        return NameProblem("it is formatted as an IP address", legacy=False)
    if len(name) > 63:
        return NameProblem(f"it has {len(name)} characters, more than 63", legacy=True)
    if any(c.isupper() for c in name):
        return NameProblem("it has upper case letters", legacy=True)
    if "_" in name:
        return NameProblem("it has underscores", legacy=True)
    if not (name[0].isalnum() and name[-1].isalnum()):
        return NameProblem("it must start and end with a letter or digit", legacy=True)
    if ".." in name:
        return NameProblem("it has two adjacent periods", legacy=True)
    return None
