"""The `ferry` commands, one module (or a few) each: what a command does with its parsed
arguments. `ferry.cli.main` dispatches to them; what several share is in `ferry.cli.shared`."""
