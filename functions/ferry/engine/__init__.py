"""The copy engine: how one object goes from a source to a destination, verified.

It knows S3 and nothing above it: never Step Functions, DynamoDB or the terminal. Its folders,
each a mechanism, import downward only (pyproject.toml's engine contract):

- `versions` (a key's whole history) and `files` (uploads and downloads) over
- `strategies`: the `Copier` (one object or a batch before a deadline) and the two ways an
  object travels, server-side and streamed, over
- `parts`: one multipart upload's life, over
- `run` (what a run shares: context, budgets, deadlines) and `compare` (sides listed side by
  side, skip rules, check, prune), over
- `records` (upload marks and checkpoints) and `proofs` (the source's evidence, checksums,
  verification).
"""
