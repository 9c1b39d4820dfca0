"""The job's ledger, which counts every listed object exactly once: `contract` (the `Ledger`
interface every ledger keeps, and the values it passes), `dynamodb` (the ledger on AWS, one
DynamoDB table, which also holds the copy records and multipart checkpoints), `sqlite` (the
same contract in one SQLite file, for `ferry run`) and `copy_records` (what a replication with
deletes on remembers of each copy).
"""
