"""Render an HTML report in headless Chromium (Debian's `chromium`, installed by `make test`)
and look at the screenshot: a small stdlib PNG reader, enough for Chromium's 8-bit RGB(A)
screenshots, so the tests need no imaging library."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = os.environ.get("FERRY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
WINDOW = (1200, 2000)

# What would make the page fetch something: a src/href/action/poster/srcset with a scheme or
# protocol-relative address, a CSS url() or @import.
EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|action|poster|srcset|xlink:href)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:|//))"""
    r"""|url\s*\(|@import""",
    re.IGNORECASE,
)


def screenshot(html: Path, png: Path, window: tuple[int, int] = WINDOW) -> None:
    """`chromium --headless --screenshot` of a local file; fails with the command's output."""
    assert Path(CHROMIUM).exists(), (
        f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium), or set FERRY_CHROMIUM"
    )
    with tempfile.TemporaryDirectory() as profile:
        argv = [
            CHROMIUM,
            "--headless",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={window[0]},{window[1]}",
            html.resolve().as_uri(),
        ]
        if os.geteuid() == 0:
            argv.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and png.exists(), done.stdout + done.stderr


@dataclass
class Image:
    width: int
    height: int
    pixels: list[tuple[int, int, int]]  # RGB, row by row

    def colours(self) -> Counter[tuple[int, int, int]]:
        return Counter(self.pixels)

    def share_not_near(self, colour: tuple[int, int, int], tolerance: int = 12) -> float:
        """The share of pixels that differ from `colour` (the page background) by more than
        `tolerance` in some channel."""
        far = sum(
            n
            for c, n in self.colours().items()
            if max(abs(a - b) for a, b in zip(c, colour, strict=True)) > tolerance
        )
        return far / len(self.pixels)


def read_png(path: Path) -> Image:
    """Decode a non-interlaced 8-bit RGB or RGBA PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    offset, idat, header = 8, bytearray(), b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, (depth, colour_type, interlace)
    channels = 3 if colour_type == 2 else 4
    stride = width * channels
    raw = zlib.decompress(bytes(idat))
    previous = bytearray(stride)
    pixels: list[tuple[int, int, int]] = []
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        _unfilter(kind, line, previous, channels)
        pixels.extend(zip(line[0::channels], line[1::channels], line[2::channels], strict=True))
        previous = line
    return Image(width, height, pixels)


def _unfilter(kind: int, line: bytearray, up: bytearray, bpp: int) -> None:
    """Undo one row's PNG filter in place (RFC 2083, 6.3)."""
    if kind == 0:
        return
    if kind == 2:
        line[:] = bytes((a + b) & 0xFF for a, b in zip(line, up, strict=True))
        return
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        above = up[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + ((left + above) >> 1)) & 0xFF
        elif kind == 4:
            corner = up[i - bpp] if i >= bpp else 0
            p = left + above - corner
            pa, pb, pc = abs(p - left), abs(p - above), abs(p - corner)
            best = left if pa <= pb and pa <= pc else above if pb <= pc else corner
            line[i] = (line[i] + best) & 0xFF
        else:
            raise AssertionError(f"unknown PNG filter {kind}")


def hex_colour(text: str) -> tuple[int, int, int]:
    return tuple(int(text.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4))  # type: ignore[return-value]
