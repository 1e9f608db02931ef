"""The one escaper for untrusted text: CLI, console and every exporter print through it.

Payloads, error messages and kind names are written by applications and, through them, by
anyone who can put text in a job. Before they reach a terminal, every control character is
replaced by a visible escape, so `\\x1b]52;…` (a clipboard write), a bidi override or `[bold]`
appear as the characters they are. Rich output goes through `inert()`, which never parses
markup. Nothing here imports textual.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Rich is imported by the first inert(): the CLI's commands print plain text
    from rich.text import Text

# C0 controls except tab and newline, DEL, C1 controls, the Unicode line and paragraph separators
# (U+2028/9: `splitlines()` and many readers break lines there, so a name could forge a line of
# its own), and bidi/zero-width format characters that can reorder or hide what an operator reads.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_CONTROL_SINGLE_LINE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]"
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


def cut(text: str, width: int) -> str:
    """`text` cut to `width` characters with an ellipsis."""
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def inert(value: object, *, style: str = "", multiline: bool = False) -> Text:
    """A Rich Text showing `value` literally: no markup, no control characters."""
    from rich.text import Text

    return Text(clean(value, multiline=multiline), style=style, no_wrap=not multiline)


def one_line(value: object, width: int = 200) -> str:
    """A cleaned single line, cut to `width` characters with an ellipsis."""
    return cut(clean(value), width)


def first_line(text: str | None) -> str:
    """The first non-blank line of `text` (not yet cleaned), or ""."""
    stripped = (text or "").strip()
    return stripped.splitlines()[0] if stripped else ""


def _json(value: Any, **options: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str, **options)
    except (TypeError, ValueError):  # e.g. a circular structure
        return repr(value)


def payload_json(payload: Any) -> str:
    """Indented JSON, cleaned (json escapes C0; C1 and bidi are escaped here)."""
    return clean(_json(payload, indent=2), multiline=True)


def compact_json(value: Any) -> str:
    """One-line JSON, cleaned."""
    return clean(_json(value, separators=(",", ":")))


def payload_preview(payload: Any, width: int = 120) -> str:
    """A compact one-line payload for table cells."""
    return cut(compact_json(payload), width)


def ascii_json(value: Any, *, indent: int | None = None) -> str:
    """JSON for scripts and files: ASCII only, so every control character travels escaped.

    Lossless (a JSON reader gets the original text back) and inert on a terminal.
    """
    return json.dumps(value, indent=indent, ensure_ascii=True)


def prometheus_label(value: str) -> str:
    """A Prometheus label value: control characters made visible, then Prometheus escaping."""
    return clean(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
