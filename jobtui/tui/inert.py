"""Turn data from the database into text that cannot act on the terminal or on Rich.

Payloads and error messages are written by applications and, through them, by anyone who can
put text in a job. They are shown as `rich.text.Text` (never parsed as markup) after control
characters are replaced by visible escapes, so `\\x1b]52;…` (a clipboard write) or `[bold]`
appear as the characters they are.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.text import Text

# C0 controls except tab and newline, DEL, C1 controls, and bidi/zero-width format characters
# that can reorder or hide what an operator reads.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_CONTROL_SINGLE_LINE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code == 0x0A:
        return "\\n"
    if code == 0x09:
        return "\\t"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def clean(value: object, *, multiline: bool = False) -> str:
    """`value` as a string with every control character shown as a visible escape."""
    text = value if isinstance(value, str) else str(value)
    pattern = _CONTROL if multiline else _CONTROL_SINGLE_LINE
    return pattern.sub(_escape, text)


def inert(value: object, *, style: str = "", multiline: bool = False) -> Text:
    """A Text showing `value` literally: no markup, no control characters."""
    return Text(clean(value, multiline=multiline), style=style, no_wrap=not multiline)


def one_line(value: object, width: int = 200) -> str:
    """A cleaned single line, cut to `width` characters with an ellipsis."""
    text = clean(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def payload_json(payload: Any) -> str:
    """The payload as indented JSON, cleaned (json escapes C0; C1 and bidi are escaped here)."""
    try:
        text = json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        text = repr(payload)
    return clean(text, multiline=True)


def payload_preview(payload: Any, width: int = 120) -> str:
    """A compact one-line payload for table cells."""
    try:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(payload)
    return one_line(text, width)
