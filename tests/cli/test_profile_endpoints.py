"""An endpoint named by the AWS configuration rather than by --endpoint-url: a profile's
`endpoint_url`, its `services` section, or AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL in the
environment (as the AWS CLI and SDKs read them). `ferry copy` reaches the store they name with
that profile's keys, on both request paths, and knows the two sides' endpoints for what it
decides from them (a server-side copy only within one store)."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from conftest import ACCESS_KEY, SECRET_KEY, S3Server
from ferry.cli.main import main
from ferry_process import ferry

PROFILE = "store"


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def by_name(server: S3Server) -> str:
    """The server's URL with the host named `localhost`, as a configuration usually names a
    store: a name, which S3's endpoint rules would address bucket-first (virtual-hosted style)
    unless told the endpoint is a path-style store."""
    return server.url.replace("127.0.0.1", "localhost")


def configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: S3Server, style: str) -> None:
    """A config file and a credentials file whose profile reaches `server` as `style` names
    it; the test's own keys taken out of the environment, so only the profile can sign."""
    url = by_name(server)
    endpoint = {
        "profile": f"endpoint_url = {url}\n",
        "services": "services = local-store\n",
        "environment": "",
        "environment-global": "",
    }[style]
    config = tmp_path / "config"
    config.write_text(
        f"[profile {PROFILE}]\nregion = {server.region}\n{endpoint}"
        f"\n[services local-store]\ns3 =\n  endpoint_url = {url}\n"
    )
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[{PROFILE}]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    if style == "environment":
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", url)
    if style == "environment-global":
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)


def seed(server: S3Server) -> tuple[str, str]:
    src, dst = server.bucket("src"), server.bucket("dst")
    for key in ("logs/a.txt", "logs/b.txt"):
        server.client.put_object(Bucket=src, Key=key, Body=key.encode())
    return src, dst


@pytest.mark.parametrize("request_path", ["lean", "botocore"], indirect=True)
@pytest.mark.parametrize("style", ["profile", "services", "environment", "environment-global"])
def test_a_profile_or_environment_endpoint_is_honoured_with_the_profiles_keys(
    versitygw: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str, request_path: str
) -> None:
    src, dst = seed(versitygw)
    configure(monkeypatch, tmp_path, versitygw, style)

    code, out, err = call(
        "copy", f"s3://{src}/logs/", f"s3://{dst}/in/", "--source-profile", PROFILE,
        "--dest-profile", PROFILE, "--json",
    )  # fmt: skip

    assert code == 0, (out, err)
    summary = json.loads(out)
    assert (summary["copied"], summary["failed"]) == (2, 0), summary
    assert summary["strategies"] == {"server-side": 2}  # one store: copied inside it
    assert sorted(versitygw.keys(dst)) == ["in/a.txt", "in/b.txt"]


def test_aws_profile_alone_names_the_store_to_the_ferry_command(
    versitygw: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = seed(versitygw)
    configure(monkeypatch, tmp_path, versitygw, "profile")
    monkeypatch.setenv("AWS_PROFILE", PROFILE)

    done = ferry("copy", f"s3://{src}/logs/", f"s3://{dst}/", "--json")

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["copied"] == 2
    assert sorted(versitygw.keys(dst)) == ["a.txt", "b.txt"]


def test_a_profiles_store_and_another_store_are_two_endpoints_so_the_copy_streams(
    versitygw: S3Server, minio: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source's store is named by its profile only, the destination's by --dest-endpoint-url:
    they are two stores, so no server-side copy is asked of either (it could not read the other)."""
    src = seed(versitygw)[0]
    dst = minio.bucket("dst")
    configure(monkeypatch, tmp_path, versitygw, "profile")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)  # the destination signs from the environment
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)

    code, out, err = call(
        "copy", f"s3://{src}/logs/", f"s3://{dst}/", "--source-profile", PROFILE,
        "--dest-endpoint-url", minio.url, "--json",
    )  # fmt: skip

    assert code == 0, (out, err)
    summary = json.loads(out)
    assert summary["copied"] == 2 and set(summary["strategies"]) == {"stream"}, summary
    assert sorted(minio.keys(dst)) == ["a.txt", "b.txt"]


def two_stores(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, one: S3Server, other: S3Server) -> None:
    """Profiles `one` and `other`, each naming its store in its own `endpoint_url`."""
    config = tmp_path / "config"
    config.write_text(
        "".join(
            f"[profile {name}]\nregion = {server.region}\nendpoint_url = {by_name(server)}\n"
            for name, server in (("one", one), ("other", other))
        )
    )
    credentials = tmp_path / "credentials"
    keys = f"aws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    credentials.write_text(f"[one]\n{keys}[other]\n{keys}")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))


def test_two_profiles_naming_two_stores_are_two_endpoints(
    versitygw: S3Server, minio: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same bucket name and prefix in two stores, each named by its profile's endpoint_url:
    no overlap (they are two stores), and the copy streams (neither store can read the other)."""
    bucket = versitygw.bucket("same")
    minio.client.create_bucket(Bucket=bucket)
    versitygw.client.put_object(Bucket=bucket, Key="logs/a.txt", Body=b"a")
    two_stores(monkeypatch, tmp_path, versitygw, minio)
    where = ("--source-profile", "one", "--dest-profile", "other")

    code, out, err = call("copy", f"s3://{bucket}/logs/", f"s3://{bucket}/logs/", *where, "--json")

    assert code == 0, (out, err)
    summary = json.loads(out)
    assert summary["copied"] == 1 and set(summary["strategies"]) == {"stream"}, summary
    assert minio.client.get_object(Bucket=bucket, Key="logs/a.txt")["Body"].read() == b"a"

    code, out, err = call(
        "copy", f"s3://{bucket}/logs/", f"s3://{bucket}/again/", *where, "--mode", "server-side"
    )
    assert code == 1 and err.count("\n") == 1, (out, err)
    assert "--mode server-side needs one endpoint for both sides" in err, err
    assert by_name(versitygw) in err and by_name(minio) in err, err


@pytest.mark.parametrize("request_path", ["lean", "botocore"], indirect=True)
@pytest.mark.parametrize("given", ["--endpoint-url", "profile"])
def test_a_profiles_own_addressing_style_is_kept_for_its_endpoint(
    versitygw: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request_path: str, given: str
) -> None:
    """A store that takes virtual-hosted requests only (bucket first in the host name) is
    reached by naming `addressing_style = virtual` in the profile's `s3` settings, as the AWS
    CLI reads it; without it an endpoint is addressed path-style (the other tests here). The
    bucket's own host name is made not to resolve (some resolvers answer every name under
    `localhost`), so the request that was sent there is what the refusal names."""
    monkeypatch.setattr("ferry.s3.clients.MAX_ATTEMPTS", 1)
    resolve = socket.getaddrinfo

    def no_bucket_hosts(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith(".localhost"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_bucket_hosts)
    src, dst = seed(versitygw)
    configure(monkeypatch, tmp_path, versitygw, "profile")
    config = tmp_path / "config"
    section = f"[profile {PROFILE}]\n"
    config.write_text(config.read_text().replace(section, section + "s3 =\n  addressing_style = virtual\n"))
    where = ["--endpoint-url", by_name(versitygw)] if given == "--endpoint-url" else []

    code, out, err = call(
        "copy", f"s3://{src}/logs/", f"s3://{dst}/in/", "--source-profile", PROFILE,
        "--dest-profile", PROFILE, *where,
    )  # fmt: skip

    port = by_name(versitygw).rsplit(":", 1)[1]
    assert code == 1, (out, err)
    assert f"http://{src}.localhost:{port}/" in err, err
    assert versitygw.keys(dst) == []
