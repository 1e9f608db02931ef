"""Comparing rich Texts by everything they show.

`Text.__eq__` looks at the characters and spans but not at the Text's own style, so a cell
that turns red with the same digits compares equal. Widgets that skip redrawing unchanged
content compare with `same` instead.
"""

from __future__ import annotations

from rich.text import Span, Text

TextKey = tuple[str, str, tuple[Span, ...]]


def text_key(text: Text) -> TextKey:
    """What decides how `text` looks: its characters, its style and its spans."""
    return text.plain, str(text.style), tuple(text.spans)


def same(a: object, b: Text) -> bool:
    """Whether `a` is a Text that looks exactly like `b`."""
    return isinstance(a, Text) and text_key(a) == text_key(b)
