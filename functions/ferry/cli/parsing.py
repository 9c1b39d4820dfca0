"""What every `ferry` command shares: its exit codes, and an argument parser that keeps
exit code 2 for failed objects."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_OK, EXIT_USAGE, EXIT_FAILED, EXIT_PENDING = 0, 1, 2, 3


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors; Ferry keeps 2 for failed objects, so usage is 1."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"ferry: error: {message}\n")
