"""X-Ray tracing of the handlers, paid for only by the invocations X-Ray records.

Powertools' Tracer imports the X-Ray SDK when it is made, even disabled (about 0.1 s of CPU,
a fifth of a handler's import), and a Lambda's init phase is billed. Every function of the
stack has active tracing, but X-Ray records only the requests it samples (by default the
first each second and 5% of the rest): Lambda puts the decision in each invocation's trace
header (`_X_AMZN_TRACE_ID`, `Sampled=1` or `Sampled=0`), and the X-Ray SDK sends nothing for
an unsampled one. So the Tracer is made, and the SDK imported, on the first sampled
invocation of a process; the others run the handler as it is.

Tracing stays off where Powertools turns it off (`POWERTOOLS_TRACE_DISABLED`, outside a Lambda,
SAM local, Chalice): the same rule as Tracer's own.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

TRACE_HEADER = "_X_AMZN_TRACE_ID"
Handler = TypeVar("Handler", bound=Callable[..., Any])
_TRUTHY = {"1", "true", "yes", "y", "on", "t"}  # Powertools' strtobool


def sampled(header: str | None) -> bool:
    """A trace header X-Ray records: `Root=...;Parent=...;Sampled=1`. Without a root and a
    parent the X-Ray SDK makes a dummy segment, which is not sent either."""
    fields = dict(part.strip().split("=", 1) for part in (header or "").split(";") if "=" in part)
    return fields.get("Sampled") == "1" and bool(fields.get("Root")) and bool(fields.get("Parent"))


def tracing_on(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this invocation is traced: tracing not turned off, and the request sampled."""
    if environ.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower() in _TRUTHY:
        return False
    if (
        not environ.get("LAMBDA_TASK_ROOT")
        or environ.get("AWS_SAM_LOCAL")
        or environ.get("AWS_CHALICE_CLI_MODE")
    ):
        return False
    return sampled(environ.get(TRACE_HEADER))


class LazyTracer:
    """`capture_lambda_handler` as Powertools' Tracer has it, with the Tracer made on the first
    traced invocation (`tracer` once made)."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.tracer: Tracer | None = None
        self._invoked = False

    def _made(self) -> Tracer:
        if self.tracer is None:
            from aws_lambda_powertools.tracing import tracer as powertools_tracer

            if self._invoked:  # Powertools takes its first traced invocation for the cold start
                powertools_tracer.is_cold_start = False
            # Trace the handlers, not every request: Powertools' Tracer patches all X-Ray-supported
            # libraries by default, botocore included ("By default, it patches all available
            # libraries supported by X-Ray SDK", Powertools Tracer API reference), which wraps each
            # of a batch's thousands of S3 calls in a subsegment. auto_patch=False keeps
            # capture_lambda_handler only.
            self.tracer = powertools_tracer.Tracer(service=self.service, auto_patch=False)
        return self.tracer

    def capture_lambda_handler(self, handler: Handler) -> Handler:
        traced: Callable[..., Any] | None = None

        @functools.wraps(handler)
        def run(event: Any, context: Any, **kwargs: Any) -> Any:
            nonlocal traced
            if not tracing_on():
                self._invoked = True
                return handler(event, context, **kwargs)
            if traced is None:
                traced = self._made().capture_lambda_handler(handler)
            self._invoked = True
            return traced(event, context, **kwargs)

        return run  # type: ignore[return-value]
