"""What runs a pipeline job on AWS: Prepare and Finalize (`jobs`), one batch of the
Distributed Map (`batches`, recorded by `recording`), what every step works with
(`services`), the ledger that counts every object once (`ledger/`: DynamoDB, and SQLite for
`ferry run`), the job's report in S3 (`job_reports`), Map items to keys (`items`), the
stack's settings shared with the CDK app (`settings`, `locations`), continuous replication
(`replication/`) and recurring syncs (`scheduled`). It drives the engine; the engine never
imports it.
"""
