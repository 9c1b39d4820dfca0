"""The benchmark's cases, each a list of tool variants run side by side (5 is a table made from
the rows of 1-4; 6 and 7 upload from and download to disk).

"Equal" rows give every tool the same number of requests in flight; "default" rows are what
a user gets without flags; further rows are settings a tuned user would try, so that each
tool's best is among the rows. The runner rotates their order from run to run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .data import DST_BUCKET, SRC_BUCKET, small_key
from .tools import Commands, Invocation, Variant, aws_env

SMALL_PREFIX = "small/"
LARGE_KEY = "large/object-large"
LARGE_16_KEY = "large/object-large-16mib-parts"  # the same size in 16 MiB parts (Ferry's memory bound)
HUGE_KEY = "huge/object-huge"


@dataclass
class Settings:
    objects: int = 2000
    object_size: int = 500_000  # 500 KB, as in the seed measurement
    large_size: int = 2 * 1024**3
    huge_size: int = int(5.5 * 1024**3)
    runs: int = 5
    equal: int = 32  # objects (or parts) in flight for the "equal" rows
    equal_parts: int = 8  # parts in flight for the large-object "equal" rows


UPLOAD_FOLDER = "upload-source"  # under the run's work folder: the files case 6 uploads
DOWNLOAD_FOLDER = "downloads"  # under the run's work folder: where case 7's runs write


@dataclass
class Case:
    number: int
    title: str
    objects: int
    total_bytes: int
    variants: list[Variant]
    notes: list[str] = field(default_factory=list)
    # Where a download's runs write (each into its run prefix, checked and removed after the
    # run); None: the destination is the bucket.
    local_destination: Path | None = None


def small_server_side(c: Commands, s: Settings, work: Path) -> Case:
    src, e = f"s3://{SRC_BUCKET}/{SMALL_PREFIX}", s.equal
    variants: list[Variant] = []

    def ferry(setting: str, *flags: str) -> Variant:
        return Variant(
            "ferry",
            setting,
            lambda p: Invocation([[c.ferry(src, f"s3://{DST_BUCKET}/{p}", "--mode", "server-side", *flags)]]),
        )

    variants += [
        ferry(f"{e}", "--concurrency", str(e)),
        ferry("default (64 on 2 CPUs)"),
        ferry("128", "--concurrency", "128"),
        ferry("64, --no-skip-existing", "--concurrency", "64", "--no-skip-existing"),
    ]
    notes = []
    if c.bins.s5cmd:
        for workers, label in ((e, f"{e}"), (256, "default (256)")):
            variants.append(
                Variant(
                    "s5cmd",
                    label,
                    lambda p, w=workers: Invocation(
                        [[c.s5cmd("--numworkers", str(w), "cp", f"{src}*", f"s3://{DST_BUCKET}/{p}")]]
                    ),
                )
            )
    if c.bins.rclone:
        for transfers, label in ((e, f"{e}"), (64, "64"), (None, "default (4 transfers)")):
            flags = ["--transfers", str(transfers), "--checkers", str(transfers)] if transfers else []
            variants.append(
                Variant(
                    "rclone",
                    label,
                    lambda p, f=flags: Invocation(
                        [[c.rclone("copy", f"src:{SRC_BUCKET}/{SMALL_PREFIX}", f"src:{DST_BUCKET}/{p}", *f)]]
                    ),
                )
            )
    if c.bins.aws:
        for requests, label in ((e, f"{e}"), (10, "default (10)")):
            variants.append(
                Variant(
                    "aws",
                    label,
                    lambda p: Invocation([[c.aws("cp", src, f"s3://{DST_BUCKET}/{p}", "--recursive")]]),
                    env=aws_env(work, requests),
                )
            )
    return Case(
        1,
        f"{s.objects:,} objects of {s.object_size / 1000:.0f} KB, bucket to bucket, server-side",
        s.objects,
        s.objects * s.object_size,
        variants,
        notes,
    )


def small_streamed(c: Commands, s: Settings, work: Path) -> Case:
    src, e = f"s3://{SRC_BUCKET}/{SMALL_PREFIX}", s.equal
    variants = [
        Variant(
            "ferry",
            f"{e}",
            lambda p: Invocation(
                [[c.ferry(src, f"s3://{DST_BUCKET}/{p}", "--mode", "stream", "--concurrency", str(e))]]
            ),
        ),
        Variant(
            "ferry",
            "default (64 on 2 CPUs)",
            lambda p: Invocation([[c.ferry(src, f"s3://{DST_BUCKET}/{p}", "--mode", "stream")]]),
        ),
        Variant(
            "ferry",
            f"{e}, --no-tags (tags are not copied by rclone or s5cmd either)",
            lambda p: Invocation(
                [
                    [
                        c.ferry(
                            src,
                            f"s3://{DST_BUCKET}/{p}",
                            "--mode",
                            "stream",
                            "--concurrency",
                            str(e),
                            "--no-tags",
                        )
                    ]
                ]
            ),
        ),
    ]
    notes = [
        "Ferry preserves tags: a streamed object without a tag count in its GET costs a "
        "GetObjectTagging (S3 sends the count only to callers allowed to read the tags); the "
        "--no-tags row leaves them, as rclone and s5cmd always do"
    ]
    if c.bins.rclone:
        for transfers, label in ((e, f"{e}"), (64, "64")):
            variants.append(
                Variant(
                    "rclone",
                    f"{label}, remote to remote",
                    lambda p, t=transfers: Invocation(
                        [
                            [
                                c.rclone(
                                    "copy",
                                    f"src:{SRC_BUCKET}/{SMALL_PREFIX}",
                                    f"dst:{DST_BUCKET}/{p}",
                                    "--transfers",
                                    str(t),
                                    "--checkers",
                                    str(t),
                                )
                            ]
                        ]
                    ),
                )
            )
    if c.bins.s5cmd:

        def per_object(prefix: str) -> Invocation:
            pipes = [
                c.s5cmd_stream(small_key(SMALL_PREFIX, i), small_key(prefix, i)) for i in range(s.objects)
            ]
            return Invocation(pipes, concurrency=e)

        variants.append(
            Variant(
                "s5cmd",
                f"cat | pipe per object, {e} at once",
                per_object,
                note="peak RSS: the largest cat+pipe pair times the pairs run at once (an upper bound)",
            )
        )
    notes.append(
        "The AWS CLI can stream between buckets only as `aws s3 cp SRC - | aws s3 cp - DST`, two "
        "Python processes per object; it is measured on the large object (case 3), not here."
    )
    return Case(
        2,
        f"{s.objects:,} objects of {s.object_size / 1000:.0f} KB, streamed through the client",
        s.objects,
        s.objects * s.object_size,
        variants,
        notes,
    )


def large_streamed(c: Commands, s: Settings, work: Path) -> Case:
    src, size, p8 = f"s3://{SRC_BUCKET}/{LARGE_KEY}", s.large_size, s.equal_parts
    name = "object-large"
    variants = [
        Variant(
            "ferry",
            "default (16 parts in flight, source layout 8 MiB)",
            lambda p: Invocation([[c.ferry(src, f"s3://{DST_BUCKET}/{p}{name}", "--mode", "stream")]]),
        ),
        Variant(
            "ferry",
            "default, source layout 16 MiB (kept: peak RSS at the defaults)",
            lambda p: Invocation(
                [
                    [
                        c.ferry(
                            f"s3://{SRC_BUCKET}/{LARGE_16_KEY}",
                            f"s3://{DST_BUCKET}/{p}{name}",
                            "--mode",
                            "stream",
                        )
                    ]
                ]
            ),
        ),
    ]
    for parts in (p8, 4):
        variants.append(
            Variant(
                "ferry",
                f"{parts} x 8 MiB" + (" (rclone's default memory)" if parts == 4 else ""),
                lambda p, n=parts: Invocation(
                    [
                        [
                            c.ferry(
                                src,
                                f"s3://{DST_BUCKET}/{p}{name}",
                                "--mode",
                                "stream",
                                "--part-concurrency",
                                str(n),
                            )
                        ]
                    ]
                ),
            )
        )
    if c.bins.s5cmd:
        variants += [
            Variant(
                "s5cmd",
                "cat | pipe, default (5 x 50 MiB each side)",
                lambda p: Invocation([c.s5cmd_stream(LARGE_KEY, f"{p}{name}")]),
            ),
            Variant(
                "s5cmd",
                f"cat | pipe, {p8} x 8 MiB each side",
                lambda p: Invocation([c.s5cmd_stream(LARGE_KEY, f"{p}{name}", "-c", str(p8), "-p", "8")]),
            ),
        ]
    if c.bins.rclone:
        for flags, label in (
            ([], "default (4 x 5 MiB uploads)"),
            (["--s3-upload-concurrency", str(p8), "--s3-chunk-size", "8M"], f"{p8} x 8 MiB"),
            (["--s3-upload-concurrency", "16", "--s3-chunk-size", "16M"], "16 x 16 MiB"),
        ):
            variants.append(
                Variant(
                    "rclone",
                    f"{label}, remote to remote",
                    lambda p, f=flags: Invocation(
                        [
                            [
                                c.rclone(
                                    "copyto",
                                    f"src:{SRC_BUCKET}/{LARGE_KEY}",
                                    f"dst:{DST_BUCKET}/{p}{name}",
                                    *f,
                                )
                            ]
                        ]
                    ),
                )
            )
    if c.bins.aws:
        for requests, label in ((10, "default (10 x 8 MiB)"), (p8, f"{p8} x 8 MiB")):
            variants.append(
                Variant(
                    "aws",
                    f"cp - | cp -, {label}",
                    lambda p: Invocation(
                        [
                            [
                                c.aws("cp", src, "-"),
                                c.aws(
                                    "cp", "-", f"s3://{DST_BUCKET}/{p}{name}", "--expected-size", str(size)
                                ),
                            ]
                        ]
                    ),
                    env=aws_env(work, requests),
                )
            )
    return Case(3, f"one object of {_size(size)}, streamed through the client", 1, size, variants)


def huge_server_side(c: Commands, s: Settings, work: Path) -> Case:
    src, size = f"s3://{SRC_BUCKET}/{HUGE_KEY}", s.huge_size
    name = "object-huge"
    notes = [
        "Ferry creates every multipart upload with a checksum algorithm (CRC32C here), so that S3 "
        "checks each part; MinIO refuses UploadPartCopy into such an upload ('checksum missing'), "
        "so there Ferry fails this case, cleanly (README, Limits)."
    ]
    variants = [
        Variant(
            "ferry",
            "default (source layout, 16 parts in flight)",
            lambda p: Invocation([[c.ferry(src, f"s3://{DST_BUCKET}/{p}{name}", "--mode", "server-side")]]),
        ),
    ]
    if c.bins.rclone:
        variants.append(
            Variant(
                "rclone",
                "default (copy cutoff 4.6 GiB)",
                lambda p: Invocation(
                    [[c.rclone("copyto", f"src:{SRC_BUCKET}/{HUGE_KEY}", f"src:{DST_BUCKET}/{p}{name}")]]
                ),
            )
        )
    if c.bins.aws:
        variants.append(
            Variant(
                "aws",
                "default (10 x 8 MiB UploadPartCopy)",
                lambda p: Invocation([[c.aws("cp", src, f"s3://{DST_BUCKET}/{p}{name}")]]),
                env=aws_env(work, 10),
            )
        )
    if c.bins.s5cmd:
        variants.append(
            Variant(
                "s5cmd",
                "default",
                lambda p: Invocation([[c.s5cmd("cp", src, f"s3://{DST_BUCKET}/{p}{name}")]]),
                note="s5cmd copies between buckets with one CopyObject, which AWS S3 refuses above 5 GiB "
                "(InvalidRequest); a server that accepts it lets s5cmd through",
            )
        )
    return Case(
        4,
        f"one object of {_size(size)} (above the 5 GiB single-copy limit), server-side",
        1,
        size,
        variants,
        notes,
    )


def upload_from_disk(c: Commands, s: Settings, work: Path) -> Case:
    """The field's headline measurement, at the bench's object count: many small local files
    uploaded to a prefix (the AWS CLI takes 21-59 s for 10,000 of 500 KB, s5cmd 3 s)."""
    src, e = work / UPLOAD_FOLDER, s.equal

    def ferry(setting: str, *flags: str) -> Variant:
        return Variant(
            "ferry", setting, lambda p: Invocation([[c.ferry(str(src), f"s3://{DST_BUCKET}/{p}", *flags)]])
        )

    variants = [ferry(f"{e}", "--concurrency", str(e)), ferry("default (64 on 2 CPUs)")]
    if c.bins.s5cmd:
        for workers, label in ((e, f"{e}"), (256, "default (256)")):
            variants.append(
                Variant(
                    "s5cmd",
                    label,
                    lambda p, w=workers: Invocation(
                        [[c.s5cmd("--numworkers", str(w), "cp", f"{src}/*", f"s3://{DST_BUCKET}/{p}")]]
                    ),
                )
            )
    if c.bins.rclone:
        for transfers, label in ((e, f"{e}"), (None, "default (4 transfers)")):
            flags = ["--transfers", str(transfers), "--checkers", str(transfers)] if transfers else []
            variants.append(
                Variant(
                    "rclone",
                    label,
                    lambda p, f=flags: Invocation(
                        [[c.rclone("copy", str(src), f"dst:{DST_BUCKET}/{p}", *f)]]
                    ),
                )
            )
    notes = [
        "Ferry proves each upload by the CRC32C S3 stored, computed from the bytes as they were read; "
        "s5cmd sends no checksum, rclone an MD5 (Content-MD5)."
    ]
    return Case(
        6,
        f"{s.objects:,} files of {s.object_size / 1000:.0f} KB uploaded from disk",
        s.objects,
        s.objects * s.object_size,
        variants,
        notes,
    )


def download_to_disk(c: Commands, s: Settings, work: Path) -> Case:
    """One large object downloaded into a folder: ranged GETs in parallel, written in place;
    Ferry's target is a peak RSS within 256 MiB whatever the size."""
    src, p8 = f"s3://{SRC_BUCKET}/{LARGE_KEY}", s.equal_parts
    into = work / DOWNLOAD_FOLDER

    def ferry(setting: str, *flags: str) -> Variant:
        return Variant("ferry", setting, lambda p: Invocation([[c.ferry(src, f"{into / p}/", *flags)]]))

    variants = [
        ferry("default (8 MiB ranges, 16 in flight)"),
        ferry(f"{p8} x 8 MiB", "--part-concurrency", str(p8)),
    ]
    if c.bins.s5cmd:
        variants += [
            Variant(
                "s5cmd",
                "default (5 x 50 MiB)",
                lambda p: Invocation([[c.s5cmd("cp", src, f"{into / p}/")]]),
            ),
            Variant(
                "s5cmd",
                f"{p8} x 8 MiB",
                lambda p: Invocation([[c.s5cmd("cp", "-c", str(p8), "-p", "8", src, f"{into / p}/")]]),
            ),
        ]
    notes = [
        "Ferry proves the file by the object's stored checksum (combined from the ranges' CRCs) before "
        "it takes its name; s5cmd does not check it. Ferry's target: peak RSS within 256 MiB."
    ]
    return Case(
        7,
        f"one object of {_size(s.large_size)} downloaded to disk",
        1,
        s.large_size,
        variants,
        notes,
        local_destination=into,
    )


def small_downloads_to_disk(c: Commands, s: Settings, work: Path) -> Case:
    """Many small objects downloaded into a folder: one GET each, its stored checksum proved as
    the bytes are written (the small-object side of the download path)."""
    src, e = f"s3://{SRC_BUCKET}/{SMALL_PREFIX}", s.equal
    into = work / DOWNLOAD_FOLDER

    def ferry(setting: str, *flags: str) -> Variant:
        return Variant("ferry", setting, lambda p: Invocation([[c.ferry(src, f"{into / p}/", *flags)]]))

    variants = [ferry(f"{e}", "--concurrency", str(e)), ferry("default (64 on 2 CPUs)")]
    if c.bins.s5cmd:
        for workers, label in ((e, f"{e}"), (256, "default (256)")):
            variants.append(
                Variant(
                    "s5cmd",
                    label,
                    lambda p, w=workers: Invocation(
                        [[c.s5cmd("--numworkers", str(w), "cp", f"{src}*", f"{into / p}/")]]
                    ),
                )
            )
    notes = [
        "Ferry proves each file by the checksum S3 stored (its GET asks for it) before it takes its "
        "name; s5cmd does not check it."
    ]
    return Case(
        8,
        f"{s.objects:,} objects of {s.object_size / 1000:.0f} KB downloaded to disk",
        s.objects,
        s.objects * s.object_size,
        variants,
        notes,
        local_destination=into,
    )


def _size(n: int) -> str:
    gib = n / 1024**3
    return f"{gib:.1f} GiB" if gib >= 1 else f"{n / 1024**2:.0f} MiB"


BUILDERS = {
    1: small_server_side,
    2: small_streamed,
    3: large_streamed,
    4: huge_server_side,
    6: upload_from_disk,
    7: download_to_disk,
    8: small_downloads_to_disk,
}
