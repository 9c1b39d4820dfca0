"""What a job will cost before it runs (`ferry estimate`): `estimate`, the model of what the
pipeline sends, request by request, and `prices`, its one dated table of list prices. It only
mirrors the pipeline and the engine and imports neither, so the model runs without botocore.
"""
