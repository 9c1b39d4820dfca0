"""The two sides of a command as the command line names them: each side's endpoint and
identity (`endpoints`), and a local path checked before anything moves (`check_local_source`).

Kept apart from copy_command and local_copy, which load the copy engine: `ferry check` and
`ferry run` need these, not the engine's copy paths.
"""

from __future__ import annotations

import argparse
import os
import stat

from ferry.errors import ConfigError
from ferry.models import Endpoint


def endpoints(args: argparse.Namespace) -> tuple[Endpoint, Endpoint]:
    """Per-side options win over the shared --endpoint-url and --region; without either, a
    side's endpoint is the one its profile's AWS configuration names (s3/clients.py:
    configured_endpoint_url), so that two sides are one store only when they really are."""
    from ferry.s3.clients import configured_endpoint_url  # botocore: not for --help

    configured: dict[str | None, str | None] = {}  # a profile's configuration read once

    def side(name: str) -> Endpoint:
        profile = getattr(args, f"{name}_profile")
        given = getattr(args, f"{name}_endpoint_url") or args.endpoint_url
        if not given and profile not in configured:
            configured[profile] = configured_endpoint_url(profile)
        return Endpoint(
            endpoint_url=given or configured[profile],
            region=getattr(args, f"{name}_region") or args.region,
            profile=profile,
            role_arn=getattr(args, f"{name}_role_arn"),
            requester_pays=getattr(args, f"{name}_requester_pays"),
        )

    return side("source"), side("dest")


def check_local_source(path: str, what: str = "SRC") -> bool:
    """True for a folder, False for one file; one clear line for anything else. `what` names
    the argument (`ferry check` reads a local DST too)."""
    try:
        info = os.stat(path)
    except FileNotFoundError as error:
        raise ConfigError(
            f"{what} {path!r} is not an S3 URL (s3://bucket/prefix), and no such local file or folder exists"
        ) from error
    except NotADirectoryError as error:
        raise ConfigError(f"{what} {path!r} names a folder, but a file stands in its path") from error
    except PermissionError as error:
        raise ConfigError(f"cannot read {what} {path!r}: permission denied") from error
    if stat.S_ISDIR(info.st_mode):
        try:
            with os.scandir(path):
                pass
        except PermissionError as error:
            raise ConfigError(f"cannot read the folder {what} {path!r}: permission denied") from error
        return True
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{what} {path!r} is neither a regular file nor a folder")
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
    except PermissionError as error:
        raise ConfigError(f"cannot read {what} {path!r}: permission denied") from error
    return False
