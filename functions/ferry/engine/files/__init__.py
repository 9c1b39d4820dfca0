"""The local side of a copy: files uploaded to S3 and objects downloaded to files, each proved
from the bytes as read or written, in bounded memory whatever their size."""
