"""Widgets of the console: keyed tables, tiles, the status bar and the footer."""
