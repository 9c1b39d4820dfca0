"""What the commands share: their arguments and how they are checked, the sides they name, the
progress bar, the summary and report, signals and where state lives. Light to import."""
