"""The CDK tests' shared synth: `npx cdk synth` once per session, as a user runs it.

Slow (the app, cdk-nag, the layer copied from its cache, the code compiled), so every test
that reads what the CLI wrote shares this one.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from cdk_support import REPO, npx, run


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    out = tmp_path_factory.mktemp("cdk.out")
    # The app imports this checkout's functions/, whatever package the venv was installed from.
    done = run(
        [npx("cdk"), "synth", "--quiet", "--output", str(out)], env={"PYTHONPATH": str(REPO / "functions")}
    )
    assert done.returncode == 0, f"cdk synth failed:\n{done.stdout}\n{done.stderr}"
    manifest = json.loads((out / "manifest.json").read_text())
    (stack,) = [a for a in manifest["artifacts"].values() if a["type"] == "aws:cloudformation:stack"]
    template_file = out / stack["properties"]["templateFile"]
    assets = json.loads(
        (out / stack["properties"]["templateFile"].replace(".template.json", ".assets.json")).read_text()
    )
    return SimpleNamespace(
        out=out,
        stderr=done.stderr,
        template_file=template_file,
        template=json.loads(template_file.read_text()),
        assets=assets,
    )
