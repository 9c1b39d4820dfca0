"""Thin doors into the `ferry` package: Lambda handlers and the Fargate entry point.

Each handler is decorators (Powertools logging, metrics, tracing) around one call into
`ferry.pipeline.jobs` or `ferry.pipeline.batches`; no copy logic lives here.
"""
