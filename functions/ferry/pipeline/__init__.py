"""What runs a pipeline job on AWS: Prepare and Finalize (`jobs`), one batch of the
Distributed Map (`batches`), the DynamoDB ledger that counts every object once (`ledger`),
the job's report in S3 (`job_reports`), Map items to keys (`items`), and the stack's
settings shared with the CDK app (`settings`). It drives the engine; the engine never
imports it.
"""
