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
    """A job spec file (or any JSON file the user names), or one sentence saying why not."""
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except OSError as error:
        raise ConfigError(f"cannot read {path!r}: {error.strerror}") from error
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path!r} is not JSON: {error}") from error
