"""Where `ferry run` keeps its state on this machine: the SQLite ledger and the job reports.

Kept apart from run_command, which loads the pipeline, boto3 and the ledgers: `ferry job
--local` only needs to know where the ledger file is.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def default_state_dir() -> Path:
    """~/.cache/ferry (or $XDG_CACHE_HOME/ferry): the default ledger and the job reports."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ferry"


def ledger_path(args: argparse.Namespace) -> Path:
    """The SQLite ledger's file: --ledger, else the default folder's ledger.sqlite."""
    return Path(args.ledger).expanduser() if args.ledger else default_state_dir() / "ledger.sqlite"
