"""One pane per tab (Overview, Jobs, Dead letters, Workers) and the load/show contract they share.

Panes open the screens (filter prompt) and are built from the widgets; they reach the app only
through `jobtui.tui.host`.
"""
