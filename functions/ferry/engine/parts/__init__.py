"""An object's parts, run by one loop (runner.py) that uploads, downloads, streamed and
server-side copies all use; and one multipart upload from start to finish: create or resume
it, run its parts under a gate and a deadline, check a crashed run's parts before keeping
them, and see through lost replies."""
