"""What every `ferry` command shares: its exit codes, and an argument parser that keeps
exit code 2 for failed objects."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

from ferry.errors import ConfigError

EXIT_OK, EXIT_USAGE, EXIT_FAILED, EXIT_PENDING = 0, 1, 2, 3


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors; Ferry keeps 2 for failed objects, so usage is 1."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"ferry: error: {message}\n")


def read_json_file(path: str) -> Any:
    """A job spec file (or any JSON file the user names), or one sentence saying why not.

    JSON files are UTF-8 (RFC 8259). A UTF-8 byte-order mark is read past (Notepad writes
    one); UTF-16, which PowerShell's `>` and Out-File write, and bytes that are not UTF-8 are
    named with the way to convert the file, not a traceback."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise ConfigError(f"cannot read {path!r}: {error.strerror}") from error
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data[:4]:
        raise ConfigError(
            f"{path!r} is UTF-16 text; JSON files are UTF-8: save it as UTF-8 (PowerShell: "
            "Out-File -Encoding utf8; or `iconv -f UTF-16 -t UTF-8`)"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            f"{path!r} is not UTF-8 (byte 0x{data[error.start]:02x} on line {line}): save it as UTF-8"
        ) from error
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path!r} is not JSON: {error}") from error
