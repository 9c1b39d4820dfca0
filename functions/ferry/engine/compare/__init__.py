"""Comparison and listing: two sides listed side by side, whether two objects (or a file and an
object) hold the same bytes, the skip rules, `ferry check`, and what `sync --delete` prunes."""
