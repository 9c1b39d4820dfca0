"""The `ferry` command. `main` parses, then imports the command's own module from `commands`
(`copy_command`, `run_command`, `jobs_command`, ...) to run it; what several commands share is
in `shared`, whose `arguments` holds every command's arguments and imports nothing heavy, so
that `--help` and usage errors answer at once."""
