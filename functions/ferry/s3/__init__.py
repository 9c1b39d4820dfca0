"""The S3 request path the engine and everything above it send their requests through:
`clients` (one botocore client per side, tuned for many parallel requests), `lean_s3` (the lean
path for the hot small-object requests), `listing` (from `s3://` arguments to listed pairs,
and the one-key listings that prove an absence) and `deletes` (the one conditional delete). It sits below the engine and knows nothing
above it.
"""
