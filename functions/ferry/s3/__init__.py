"""The S3 request path the engine and everything above it send their requests through:
`clients` (one botocore client per side, tuned for many parallel requests), `lean_s3` (the lean
path for the hot small-object requests) and `listing` (from `s3://` arguments to listed pairs,
and the one-key listings that prove an absence). It sits below the engine and knows nothing
above it.
"""
