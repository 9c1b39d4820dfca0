"""`npx cdk synth` as a user runs it (offline: no AWS account, no Docker), then the tools
that check what it wrote: cfn-lint, asl-validator, cdk-nag (through the synth itself).

The CLI comes from package.json (`make test` runs `npm ci`); the app runs with .venv's
Python, as cdk.json says. The synth is the session's `synth` fixture (conftest.py).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

from cdk_support import ELF_MACHINE, REPO, definition, npx, only, plain, resources, run

from ferry_cdk.definition import CHILD_FILE, PARENT_FILE, parent_definition, placeholders, read


def test_synth_prints_nodes_notices_as_text_not_python_byte_strings(synth: SimpleNamespace) -> None:
    """jsii's Node process writes its warnings (on Node 20: "Node 20 is end-of-life") to its
    stderr, which jsii's Python side printed as `b'!!...'`, line by line
    (ferry_cdk/node_notices.py). On a Node without a notice this holds trivially."""
    byte_strings = [line for line in synth.stderr.splitlines() if re.match(r"b['\"]", line)]
    assert byte_strings == [], "\n".join(byte_strings[:3])
    node = run(["node", "--version"]).stdout.strip()
    if node.startswith("v20."):  # the notice this machine's Node gets: shown, as text
        assert "Node 20 is end-of-life" in synth.stderr


def test_synth_reports_no_unacknowledged_nag_errors(synth: SimpleNamespace) -> None:
    # cdk-nag 3 reports through CDK's policy validation: an error fails the synth (exit 1),
    # and the report lands in the cloud assembly.
    report = json.loads((synth.out / "validation-report.json").read_text())
    failures = [r for r in report["pluginReports"] if r.get("conclusion") != "success"]
    assert failures == [], json.dumps(failures, indent=1)[:4000]
    assert "AwsSolutions" not in synth.stderr


def test_every_acknowledgment_in_the_template_has_a_written_reason(synth: SimpleNamespace) -> None:
    found = 0
    for lid, resource in synth.template["Resources"].items():
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
            words = re.findall(r"[A-Za-z]{2,}", rule["reason"])
            assert len(words) >= 8, f"{lid}: {rule['id']} has no real reason: {rule['reason']!r}"
            assert not re.search(r"\b(todo|tbd|fixme)\b", rule["reason"], re.I), (lid, rule)
            found += rule["id"].startswith("AwsSolutions-")
    assert found >= 10  # the AwsSolutions pack ran and wrote its acknowledgments


def test_cfn_lint_finds_no_error(synth: SimpleNamespace) -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    done = run([str(cfn_lint), "--format", "json", str(synth.template_file)])
    findings = json.loads(done.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)
    assert done.returncode & 2 == 0  # cfn-lint's exit code: bit 2 = errors (4 = warnings)


def test_asl_validator_accepts_the_files_and_the_deployed_definition(
    synth: SimpleNamespace, tmp_path: Path
) -> None:
    parent = read(PARENT_FILE)
    names = (placeholders(parent) | placeholders(read(CHILD_FILE))) - {"ChildWorkflow"}
    placeholder_values = {name: f"${{{name}}}" for name in names}
    files = {
        "child": REPO / "statemachine" / CHILD_FILE,
        "parent-with-child": tmp_path / "parent.asl.json",
        "deployed": tmp_path / "deployed.asl.json",
    }
    files["parent-with-child"].write_text(json.dumps(parent_definition(placeholder_values)))
    files["deployed"].write_text(json.dumps(definition(synth.template)))
    args = [npx("asl-validator")]
    for path in files.values():
        args += ["--json-path", str(path)]
    done = run(args)
    assert done.returncode == 0, done.stdout + done.stderr
    for path in files.values():
        assert f'"{path}" is valid' in done.stdout, done.stdout


def test_layer_holds_the_pinned_wheels_for_the_lambda_platform(synth: SimpleNamespace) -> None:
    _, layer = only(synth.template, "AWS::Lambda::LayerVersion")
    asset = synth.out / layer["Metadata"]["aws:asset:path"]
    site = asset / "python"
    pins = dict(
        re.match(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)", line).groups()  # type: ignore[union-attr]
        for line in (REPO / "functions" / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    installed = {}
    for dist_info in site.glob("*.dist-info"):
        name, version = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[name.lower().replace("_", "-")] = version
    for name, version in pins.items():
        assert installed.get(name.lower().replace("_", "-")) == version, (name, installed)
    architecture = layer["Properties"]["CompatibleArchitectures"][0]
    (crt,) = site.glob("_awscrt*.so")
    header = crt.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == ELF_MACHINE[architecture]
    assert not (site / "bin").exists()  # console scripts: not importable
    # Bytecode only of the runtime's Python (what it holds: test_cdk_bytecode.py).
    assert {p.name.split(".")[-2] for p in site.rglob("*.pyc")} == {"cpython-313"}


def test_function_code_is_functions_without_build_files(synth: SimpleNamespace) -> None:
    paths = {
        f["Metadata"]["aws:asset:path"] for f in resources(synth.template, "AWS::Lambda::Function").values()
    }
    (path,) = paths  # one code asset for all four
    code = synth.out / path
    for part in ("engine", "pipeline", "cli"):
        assert (code / "ferry" / part / "__init__.py").is_file()
    assert (code / "ferry" / "pipeline" / "settings.py").is_file()
    names = {p.name for p in code.rglob("*")}
    assert not names & {"Dockerfile", "requirements.txt"}
    assert not any(n.endswith(".egg-info") for n in names)
    # No bytecode the tests' Python left in functions/: only the runtime's, compiled by the
    # synth (test_cdk_bytecode.py).
    assert {n.split(".")[-2] for n in names if n.endswith(".pyc")} == {"cpython-313"}


def test_fargate_image_is_built_from_functions_dockerfile(synth: SimpleNamespace) -> None:
    (image,) = synth.assets["dockerImages"].values()
    source = image["source"]
    assert source["dockerFile"] == "Dockerfile"
    assert source["platform"] == "linux/arm64"
    assert source["dockerBuildArgs"] == {"PYTHON_VERSION": "3.13"}
    context = synth.out / source["directory"]
    dockerfile = (context / "Dockerfile").read_text()
    assert "ARG PYTHON_VERSION" in dockerfile and "requirements.txt" in dockerfile
    assert 'CMD ["python", "-m", "handlers.copy_large"]' in dockerfile
    assert (context / "requirements.txt").read_text() == (REPO / "functions" / "requirements.txt").read_text()
    _, task = only(synth.template, "AWS::ECS::TaskDefinition")
    image_uri = plain(task["Properties"]["ContainerDefinitions"][0]["Image"], synth.template)
    assert image_uri.endswith(":" + source["directory"].removeprefix("asset."))


def test_a_bad_setting_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    context["ferry"] = {**context["ferry"], "max_items_per_batch": 0}
    done = run(
        [str(REPO / ".venv" / "bin" / "python"), "cdk/app.py"],
        env={"CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(tmp_path)},
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.startswith("ferry:")]
    assert lines == ["ferry: configuration error: max_items_per_batch: 0 is out of range (1 to 10000)"]
    assert "Traceback" not in done.stderr


def test_cdk_cli_is_pinned_to_2x() -> None:
    package = json.loads((REPO / "package.json").read_text())
    lock = json.loads((REPO / "package-lock.json").read_text())
    version = package["devDependencies"]["aws-cdk"]
    assert re.fullmatch(r"2\.\d+\.\d+", version), "pin an exact 2.x CLI: 3.x rejects aws-cdk-lib 2 assemblies"
    assert lock["packages"]["node_modules/aws-cdk"]["version"] == version
    assert run([npx("cdk"), "--version"]).stdout.startswith(version + " ")
