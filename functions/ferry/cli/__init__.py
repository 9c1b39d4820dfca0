"""The `ferry` command: `main` dispatches to `copy_command`, `demo` and `job validate`."""
