"""What a job will cost before it runs (`ferry estimate`): `estimate` puts together the model of
what the pipeline sends, request by request, from its parts (`inputs`, `workload`, `requests`,
`durations`, `peers`) and `prices`, its one dated table of list prices. It only mirrors the
pipeline and the engine and imports neither, so the model runs without botocore.
"""
