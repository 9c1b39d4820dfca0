"""Continuous replication: S3 events that keep a destination prefix in step with a source
prefix. `config` (the `replications` setting, checked at synth time), `starter` (one drained
SQS batch of events becomes one job), `event_keys` (which key an event names), `lag` (event to
verified copy, the ReplicationLag metric), `deletes` (a destination key removed only when
proved to hold Ferry's copy) and `starter_deletes` (the starter's run of them).

The copy path (`pipeline.batches`) consults `event_keys`, `lag` and `deletes` for a job a
replication started; nothing here imports the copy path.
"""
