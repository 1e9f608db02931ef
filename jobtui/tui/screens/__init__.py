"""Screens pushed over the main view: detail, confirmation, filter prompt, help."""
