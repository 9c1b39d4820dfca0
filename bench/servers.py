"""The S3 servers the benchmark runs against, started on 127.0.0.1 with data in a temp dir.

MinIO because it is the most widely deployed S3-compatible server; versitygw because it is
the one Ferry's tests trust on checksums. Both run on the same two cores as the clients,
so every figure includes the server's share of the CPU: compare rows, not absolute rates.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ACCESS_KEY = "ferrybench"
SECRET_KEY = "ferrybenchsecret"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """One running server. `version` is what the binary says, plus the pinned module version."""

    name: str
    binary: str
    pinned: str
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ferry-bench-")))
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def ready(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def start(self, timeout: float = 60.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.root / "server.log", "wb")  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, env=self.env()
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start: {self.log_tail()}")
            if self.ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not start within {timeout}s: {self.log_tail()}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log:
            self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def purge_deleted(self) -> None:
        """Free the disk of objects deleted through S3, where the server defers it."""

    def log_tail(self, chars: int = 800) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def version(self) -> str:
        try:
            out = subprocess.run(
                [self.binary, "--version"], capture_output=True, text=True, timeout=30
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        lines = out.strip().splitlines()
        said = lines[0].strip()[:80] if lines else ""
        return f"{self.name} {self.pinned} (says: {said})" if said else f"{self.name} {self.pinned}"


class MinIO(Server):
    def purge_deleted(self) -> None:
        """MinIO moves deleted objects to a trash that it empties slowly (tens of GB behind
        after a few hundred runs here): empty it, as this server and its data are the bench's own."""
        trash = self.data_dir / ".minio.sys" / "tmp" / ".trash"
        if trash.is_dir():
            for entry in trash.iterdir():
                shutil.rmtree(entry, ignore_errors=True)

    def command(self) -> list[str]:
        return [
            self.binary,
            "server",
            str(self.data_dir),
            "--address",
            f"127.0.0.1:{self.port}",
            "--console-address",
            f"127.0.0.1:{free_port()}",
            "--quiet",
        ]

    def env(self) -> dict[str, str]:
        return dict(
            os.environ,
            MINIO_ROOT_USER=ACCESS_KEY,
            MINIO_ROOT_PASSWORD=SECRET_KEY,
            MINIO_BROWSER="off",
            MINIO_UPDATE="off",
            MINIO_CI_CD="1",  # a data dir on the root disk is fine for a benchmark
        )

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/minio/health/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False


class Versitygw(Server):
    def command(self) -> list[str]:
        # Keep-alive as S3 and MinIO keep connections open (versitygw closes each by default).
        return [self.binary, "--keep-alive", "--port", f"127.0.0.1:{self.port}", "posix", str(self.data_dir)]

    def env(self) -> dict[str, str]:
        return dict(os.environ, ROOT_ACCESS_KEY_ID=ACCESS_KEY, ROOT_SECRET_ACCESS_KEY=SECRET_KEY)


def make_server(name: str, binary: str, pinned: str) -> Server:
    kinds: dict[str, type[Server]] = {"minio": MinIO, "versitygw": Versitygw}
    return kinds[name](name=name, binary=binary, pinned=pinned)
