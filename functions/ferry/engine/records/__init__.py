"""What lets a multipart upload outlive its process: the marks naming Ferry's open uploads in
the destination bucket, and the checkpoints of finished parts."""
