"""The local side of `ferry copy`: files and folders on this machine, as a source or a destination.

It sits beside the S3 request path, below the engine, and knows files only: never S3, never
how a copy is decided or proved. The engine (`engine/files/uploads.py`, `engine/files/downloads.py`)
decides each copy (one PutObject or a multipart upload, one GET or ranged GETs in parallel,
what proves it) and asks this folder to:

- list a folder to upload (`files.py`): files in the order S3 lists their keys, each with its
  size and modification time; symbolic links, special files and unreadable folders come back
  as entries with the reason they are not copied, so every one is accounted for;
- read a file at offsets (`reading.py`), and say whether it changed while it was read;
- map a key to a file name under a destination folder (`paths.py`), refusing keys no file
  name can hold or that would lead outside that folder;
- write a download (`writing.py`): into a temporary file beside its final name, at offsets
  (`os.pwrite`), with a small record of the parts written so a crashed download resumes; the
  file takes its final name only once the engine has proved it. Folders under the destination
  are opened one by one without following symbolic links, so nothing outside the destination
  folder is ever written.
"""
