"""Copy strategies: how one object travels, server-side (CopyObject, UploadPartCopy) or streamed
through this process, and the Copier that picks one per object and settles archived sources."""
