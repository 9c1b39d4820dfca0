"""List prices `ferry estimate` uses: one dated table, us-east-1, on-demand, no free tier.

Each price names the page it was read from and how sure it is. `verified` means the figure was
read on the page named (AWS's own page or an AWS article, or a third-party page quoting AWS's
table, as said); `unverified` means no page could be consulted offline and the figure is the one
this project has used so far (README, shared/reference/aws-limits.md): check it on the AWS
pricing page before relying on it. Prices change: the date says when these were taken.
Beside the table: a request's price by the class it writes, and the charge for moving data
between regions, the same whoever copies it.
"""

from __future__ import annotations

from dataclasses import dataclass

PRICES_DATE = "2026-11-22"
REGION = "us-east-1"


@dataclass(frozen=True)
class Price:
    usd: float  # per `unit`
    unit: str
    source: str
    verified: bool


def _p(usd: float, unit: str, source: str, verified: bool = True) -> Price:
    return Price(usd, unit, source, verified)


S3_PRICING = "https://aws.amazon.com/s3/pricing/"
PRICES: dict[str, Price] = {
    # S3 requests (S3 Standard). PUT, COPY, POST and LIST are one class, GET/HEAD/other another.
    "s3_put_copy_post_list": _p(
        0.005 / 1000,
        "request",
        "https://www.cloudkaramchari.com/blog/understanding-per-1000-put-copy-post-or-list-requests-in-amazon-s3-pricing/ "
        f"(quoting {S3_PRICING})",
    ),
    "s3_get_head": _p(0.0004 / 1000, "request", f"{S3_PRICING} (aws-limits.md)", verified=False),
    # Requests are billed at the rate of the storage class written (COPY/PUT into these classes).
    "s3_put_standard_ia": _p(0.01 / 1000, "request", S3_PRICING, verified=False),
    "s3_put_onezone_ia": _p(0.01 / 1000, "request", S3_PRICING, verified=False),
    "s3_put_glacier_ir": _p(0.02 / 1000, "request", S3_PRICING, verified=False),
    "s3_put_glacier": _p(0.03 / 1000, "request", S3_PRICING, verified=False),
    "s3_put_deep_archive": _p(0.05 / 1000, "request", S3_PRICING, verified=False),
    # Restores (retrieval requests and per-GB retrieval), S3 Glacier Flexible Retrieval and Deep Archive.
    "restore_glacier_standard_request": _p(
        0.05 / 1000, "request", "https://repost.aws/knowledge-center/s3-manage-data-retrieval"
    ),
    "restore_glacier_standard_gb": _p(
        0.01, "GB", "https://repost.aws/knowledge-center/s3-manage-data-retrieval"
    ),
    "restore_glacier_bulk_request": _p(0.0, "request", S3_PRICING, verified=False),
    "restore_glacier_bulk_gb": _p(
        0.0,
        "GB",
        "https://docs.aws.amazon.com/AmazonS3/latest/userguide/restoring-objects-retrieval-options.html "
        "(bulk retrievals are free for S3 Glacier Flexible Retrieval)",
    ),
    "restore_glacier_expedited_request": _p(
        10.0 / 1000, "request", "https://repost.aws/knowledge-center/s3-manage-data-retrieval"
    ),
    "restore_glacier_expedited_gb": _p(
        0.03, "GB", "https://awsnegotiations.com/glacier-vs-glacier-deep-archive.html (third party)"
    ),
    "restore_deep_archive_standard_request": _p(0.10 / 1000, "request", S3_PRICING, verified=False),
    "restore_deep_archive_standard_gb": _p(
        0.02, "GB", "https://awsnegotiations.com/glacier-vs-glacier-deep-archive.html (third party)"
    ),
    "restore_deep_archive_bulk_request": _p(0.025 / 1000, "request", S3_PRICING, verified=False),
    "restore_deep_archive_bulk_gb": _p(
        0.0025, "GB", "https://awsnegotiations.com/glacier-vs-glacier-deep-archive.html (third party)"
    ),
    # Data transfer between regions (most region pairs; charged by the source region).
    "transfer_inter_region_gb": _p(
        0.02,
        "GB",
        "https://repost.aws/articles/ARjzluyMS8RbeOOK4MGXRG6Q/cost-effective-methods-for-accessing-s3-buckets-cross-region",
    ),
    # Lambda (arm64 and x86_64), first pricing tier.
    "lambda_arm64_gb_second": _p(
        0.0000133334,
        "GB-second",
        "https://cloudchipr.com/blog/aws-lambda-pricing (third party, quoting https://aws.amazon.com/lambda/pricing/)",
    ),
    "lambda_x86_64_gb_second": _p(
        0.0000166667,
        "GB-second",
        "https://cloudchipr.com/blog/aws-lambda-pricing (third party, quoting https://aws.amazon.com/lambda/pricing/)",
    ),
    "lambda_request": _p(
        0.20 / 1_000_000,
        "request",
        "https://git.mcrn.ar/mariano/lambda_local_runner/ (third party table of https://aws.amazon.com/lambda/pricing/)",
    ),
    # Step Functions STANDARD. A Distributed Map is charged one transition per child execution
    # it starts (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-transitions.html).
    "sfn_standard_transition": _p(
        0.025 / 1000,
        "state transition",
        "https://aws.amazon.com/step-functions/pricing/ (aws-limits.md; the same figure in "
        "aws/agent-toolkit-for-aws step-functions.md)",
    ),
    # DynamoDB on-demand, after the November 2024 reduction.
    "dynamodb_write_request_unit": _p(
        0.625 / 1_000_000,
        "write request unit",
        "https://airbyte.com/data-engineering-resources/dynamodb-pricing (third party)",
    ),
    "dynamodb_read_request_unit": _p(
        0.125 / 1_000_000,
        "read request unit",
        "https://airbyte.com/data-engineering-resources/dynamodb-pricing (third party)",
    ),
    # Fargate (Linux), per second with a one-minute minimum.
    "fargate_arm64_vcpu_hour": _p(
        0.03238, "vCPU-hour", "https://www.vantage.sh/blog/fargate-pricing (third party)"
    ),
    "fargate_arm64_gb_hour": _p(
        0.00356, "GB-hour", "https://www.vantage.sh/blog/fargate-pricing (third party)"
    ),
    "fargate_x86_64_vcpu_hour": _p(
        0.04048, "vCPU-hour", "https://www.vantage.sh/blog/fargate-pricing (third party)"
    ),
    "fargate_x86_64_gb_hour": _p(
        0.004445, "GB-hour", "https://www.vantage.sh/blog/fargate-pricing (third party)"
    ),
    # Fargate Spot's discount varies with capacity: "up to 70%" (aws-limits.md, wring.co).
    "fargate_spot_discount": _p(
        0.70, "fraction", "https://www.wring.co/blog/aws-fargate-pricing-guide (third party)", verified=False
    ),
    # The alternatives.
    "batch_operations_job": _p(
        0.25, "job", "https://aws.amazon.com/s3/pricing/ (aws-limits.md; Yelp via sysdesign-wiki)"
    ),
    "batch_operations_object": _p(
        1.00 / 1_000_000, "object", "https://aws.amazon.com/s3/pricing/ (aws-limits.md)", verified=False
    ),
    "datasync_gb": _p(0.0125, "GB", "https://aws.amazon.com/datasync/pricing/", verified=False),
}


def price(name: str) -> float:
    return PRICES[name].usd


PUT_BY_CLASS = {
    "STANDARD": "s3_put_copy_post_list",
    "INTELLIGENT_TIERING": "s3_put_copy_post_list",
    "REDUCED_REDUNDANCY": "s3_put_copy_post_list",
    "STANDARD_IA": "s3_put_standard_ia",
    "ONEZONE_IA": "s3_put_onezone_ia",
    "GLACIER_IR": "s3_put_glacier_ir",
    "GLACIER": "s3_put_glacier",
    "DEEP_ARCHIVE": "s3_put_deep_archive",
}


def put_price(storage_class: str | None) -> float:
    """What one PUT/COPY/POST request writing into this storage class costs."""
    return price(PUT_BY_CLASS.get(storage_class or "STANDARD", "s3_put_copy_post_list"))


GB = 1000**3  # AWS bills data in GB (of 2^30 bytes on the bill; the difference is ignored here)


@dataclass
class Line:
    service: str
    what: str
    quantity: float
    unit: str
    usd: float
    orchestration: bool = False  # the pipeline's own cost, beyond the engine's S3 requests


def transfer_lines(copied_bytes: float, cross_region: bool) -> list[Line]:
    """Data transfer between regions, charged on the bytes copied whoever copies them: the
    pipeline and each of the managed services alike (none within one region)."""
    if not cross_region:
        return []
    gb = copied_bytes / GB
    return [Line("Data transfer", "between regions", gb, "GB", gb * price("transfer_inter_region_gb"))]
