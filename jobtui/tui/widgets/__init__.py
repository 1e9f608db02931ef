"""Widgets of the console: keyed tables, tiles and one pane per tab."""
