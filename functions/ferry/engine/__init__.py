"""The copy engine: how one object goes from a source to a destination, verified.

It knows S3 and nothing above it: never Step Functions, DynamoDB or the terminal. `copier`
holds the `Copier` (one object or a batch before a deadline); `server_side` and `streaming`
are the two ways an object travels; `multipart`, `verify`, `skip`, `source`, `attributes`,
`archive` and `dest_listing` are the questions each copy asks on the way.
"""
