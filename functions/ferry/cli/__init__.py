"""The `ferry` command. `arguments` holds every command's arguments and imports nothing heavy,
so that `--help` and usage errors answer at once; `main` parses, then imports the command's
own module (`copy_command`, `run_command`, `jobs_command`, ...) to run it."""
