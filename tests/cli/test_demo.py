"""`ferry demo` (what `make demo` runs) copies, checks and re-skips on the embedded endpoint."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

FERRY = str(Path(sys.executable).with_name("ferry"))


def test_demo_copies_everything_then_skips_everything(tmp_path):
    run = subprocess.run(
        [FERRY, "demo", "--objects", "40", "--large-size", "20MiB"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # the folder the demo keeps goes with the test's
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summaries = re.findall(
        r"(\d+) objects: (\d+) copied, (\d+) skipped, (\d+) failed, (\d+) pending", run.stdout
    )
    assert len(summaries) == 3  # ferry copy, ferry copy again, ferry run
    (total1, copied1, skipped1, failed1, _), (total2, copied2, skipped2, failed2, _) = summaries[:2]
    assert total1 == copied1 == total2 == skipped2
    assert summaries[2] == (total1, total1, "0", "0", "0")  # the pipeline job copies them all
    assert re.search(r"job run-[0-9-]+-[0-9a-f]+: SUCCEEDED; report: ", run.stdout)
    assert int(total1) == 40 + 1 + 6 + 1  # small objects, the empty one, awkward keys, the multipart one
    assert (skipped1, failed1, copied2, failed2) == ("0", "0", "0", "0")
    assert "Independent check: every key, size and ETag matches" in run.stdout
    assert "server-side-multipart 1" in run.stdout
