"""The evidence an object carries and how a copy is proved with it: the source's HEAD, checksums
as S3 writes them, part-layout ETags, and the proof of a copy or a local file."""
