"""A `ferry` process collects no cycles while it loads its command, then freezes what loading
built and collects as usual from there (cli.main._settle_heap says why); main called with
its own argv, as tests and embedding programs call it, leaves the collector alone.

Each case runs in a fresh interpreter: the collector's state is the process's."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json, sys
import ferry.cli.main as cli

seen = {}
real = cli.command_for

def watched(args):
    seen["collecting_while_loading"] = gc.isenabled()
    real(args)  # the real command's modules load here

    def command(args, stdout, stderr):
        seen["collecting_while_running"] = gc.isenabled()
        seen["frozen_objects"] = gc.get_freeze_count()
        return 0

    return command

cli.command_for = watched
argv = ["copy", "s3://src-bucket/logs/", "s3://dst-bucket/logs/"]
if sys.argv[1] == "command line":
    sys.argv = ["ferry", *argv]
    code = cli.main()
else:
    code = cli.main(argv)
seen["code"] = code
print(json.dumps(seen))
"""


def probe(how: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, how], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_process_command_line_loads_without_collecting_then_freezes_what_it_loaded() -> None:
    seen = probe("command line")
    assert seen["code"] == 0
    assert seen["collecting_while_loading"] is False
    assert seen["collecting_while_running"] is True
    # botocore, the engine and argparse's objects: tens of thousands, out of every later pass.
    assert seen["frozen_objects"] > 10_000


def test_main_called_with_its_own_arguments_leaves_the_collector_as_it_was() -> None:
    seen = probe("argv")
    assert seen == {
        "collecting_while_loading": True,
        "collecting_while_running": True,
        "frozen_objects": 0,
        "code": 0,
    }
