"""Comparing rich Texts by everything they show.

`Text.__eq__` looks at the characters and spans but not at the Text's own style, so a cell
that turns red with the same digits compares equal. Widgets that skip redrawing unchanged
content compare with `same` instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Span, Text

from jobtui.config import format_duration

TextKey = tuple[str, str, tuple[Span, ...]]


def text_key(text: Text) -> TextKey:
    """What decides how `text` looks: its characters, its style and its spans."""
    return text.plain, str(text.style), tuple(text.spans)


def same(a: object, b: Text) -> bool:
    """Whether `a` is a Text that looks exactly like `b`."""
    return isinstance(a, Text) and text_key(a) == text_key(b)


# Under a minute an age moves in quarter minutes: in 5 s steps the young rows of a live table
# (a dead letter that just died, a job that just started) were redrawn on every other refresh,
# about half of what the live demo's Dead letters tab sent.
SECONDS_STEP = 15


def coarse_age(seconds: float | None) -> str:
    """An age that changes as rarely as it can while still telling young from old.

    A cell that ticks redraws on every refresh: over SSH that is most of what an idle console
    sends. Up to 45 s it counts in steps of 15 s (rounded up, so a fresh age is never shown
    as 0: `15s` reads "at most 15 s"), then in minutes under an hour (no seconds), then
    hours and minutes, days and hours: `15s`, `45s`, `1m`, `17m`, `3h05m`, `2d4h`. A static
    row a minute old changes once a minute.
    """
    if seconds is None:
        return "–"
    s = max(0, int(seconds))
    if s <= 60 - SECONDS_STEP:
        return f"{max(SECONDS_STEP, -(-s // SECONDS_STEP) * SECONDS_STEP)}s"
    if s < 120:  # past 45 s "1m" at once: "60s" then "1m" redrew every young row twice
        return "1m"
    if s < 3600:
        return f"{s // 60}m"
    return format_duration(s)  # hours and minutes, days and hours


EXACT_UNDER_S = 600  # seconds: below this a screen of one row shows an age to the second


def exact_age(seconds: float | None) -> str:
    """An age to the second while it is recent (`7s`, `38s`, `3m05s`), then as `coarse_age`.

    For a screen of one row (a job's detail), where "started 38s ago" is what the operator
    reads and a ticking second redraws a few lines of text, not a table. Live tables keep
    `coarse_age`'s steps: there a ticking second redrew every young row on every refresh.
    """
    if seconds is None or seconds >= EXACT_UNDER_S:
        return coarse_age(seconds)
    return format_duration(seconds)


def coarse_seconds(seconds: float | None) -> float:
    """The age `coarse_age` shows, in seconds: a chart of ages fed these changes no more
    often than the text beside it."""
    s = max(0, int(seconds or 0))
    if s <= 60 - SECONDS_STEP:
        return float(max(SECONDS_STEP, -(-s // SECONDS_STEP) * SECONDS_STEP))
    if s < 120:
        return 60.0
    return float(s - s % (60 if s < 86400 else 3600))


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def differing_part(text: str, others: list[str], width: int) -> str:
    """`text` cut to `width` so that what sets it apart from `others` stays in view.

    Error signatures of one kind often share a long beginning (`ConnectTimeout: host …`):
    cut at the end, several read the same. When the first difference lies beyond the width,
    the text is shown from a little before it, after an `…`.
    """
    if width <= 0 or len(text) <= width:
        return text
    shared = max((_common_prefix(text, o) for o in others if o != text), default=0)
    if shared < width - 1:
        return text  # the difference is in view; the table cuts the end
    start = min(shared - width // 3, len(text) - (width - 1))
    tail = text[start : start + width - 1]
    out = "…" + tail
    return out if start + width - 1 >= len(text) else out[: width - 1] + "…"


KIND_COLUMN_WIDTH = 15  # a kind column at most (Overview, Jobs, Dead letters), then `…`


def kind_label(name: str, kinds: Iterable[str], width: int) -> str:
    """A kind's name for a column `width` wide: the name itself (the table cuts its end with
    `…`), unless another kind begins with the same `width - 1` characters. Then both would read
    alike (`rebuild_search…`), so the name keeps its beginning and its end around an `…`:
    `rebuil…h_index`, `rebuil…h_cache`."""
    if width <= 1 or len(name) <= width:
        return name
    if not any(k != name and k[: width - 1] == name[: width - 1] for k in kinds):
        return name
    head = (width - 1) // 2
    return name[:head] + "…" + name[len(name) - (width - 1 - head) :]


def drain_text(drain_s: float | None, not_draining: bool) -> str:
    """`~4m` until a ready backlog is gone at the window's rates, `! not draining` when
    arrivals keep up with completions (the glyph and words read without colour), empty with
    no backlog. As coarse as the ages, so an idle queue's estimate does not tick."""
    if not_draining:
        return "! not draining"
    if drain_s is None:
        return ""
    return f"~{coarse_age(drain_s)}"
