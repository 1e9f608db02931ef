"""Fewer bytes for the same screen: the console's output with its colour codes written once.

Textual writes every run of text as `ESC[<style>m text ESC[0m`: the style in full, then a
reset, even when the next run has the same style or differs from it by one attribute. At 80×24
a table row of 80 cells took ~350 bytes, three quarters of them colour codes, and a live table
repaints every row now and then (rows come and go). `compact_sgr` rewrites one write to the
terminal so each change of style is sent as what changed (`ESC[1m` to add bold, nothing when
the style stays), leaving the screen exactly as the original would; `quiet_driver` is the
platform's driver with its writes passed through it (issue 26 item 13: under `jobtui demo` the
loudest 20 s window went from ~850 to ~500 B/s at 80×24).
"""

from __future__ import annotations

import re
from functools import lru_cache

from textual.driver import Driver

_SGR = re.compile(r"\x1b\[([0-9;]*)m")
# Writes that move the cursor only (a position, a line feed): the style in force does not
# matter to them, so a change of style waits until the next text.
_NEUTRAL = re.compile(r"(?:\x1b\[\d+;\d+H|\r|\n)*")
# Attribute codes and the code that turns each off (22 turns off both bold and dim).
_OFF = {
    "1": "22", "2": "22", "3": "23", "4": "24", "21": "24", "5": "25", "6": "25",
    "7": "27", "8": "28", "9": "29", "51": "54", "52": "54", "53": "55",
}  # fmt: skip

Style = tuple[frozenset[str], str | None, str | None]  # attributes, foreground, background
PLAIN: Style = (frozenset(), None, None)


def _parse(params: str) -> Style | None:
    """An SGR's parameters given after a reset as a style; None when not understood."""
    codes = params.split(";")
    attrs: set[str] = set()
    fg = bg = None
    i = 0
    while i < len(codes):
        code = codes[i]
        if code in _OFF:
            attrs.add(code)
            i += 1
        elif code in ("38", "48"):
            kind = codes[i + 1] if i + 1 < len(codes) else ""
            n = {"5": 3, "2": 5}.get(kind, 0)
            if not n or i + n > len(codes):
                return None
            colour = ";".join(codes[i : i + n])
            fg, bg = (colour, bg) if code == "38" else (fg, colour)
            i += n
        elif code.isdigit() and (30 <= int(code) <= 37 or 90 <= int(code) <= 97):
            fg = code
            i += 1
        elif code.isdigit() and (40 <= int(code) <= 47 or 100 <= int(code) <= 107):
            bg = code
            i += 1
        else:
            return None
    return frozenset(attrs), fg, bg


def _full(style: Style) -> str:
    attrs, fg, bg = style
    return ";".join([*sorted(attrs, key=int), *(c for c in (fg, bg) if c is not None)])


@lru_cache(maxsize=4096)
def _change(old: Style | None, new: Style | str) -> str:
    """The SGR that takes the terminal from `old` (None: not known) to `new` (a str: codes
    not understood, sent after a reset as they came)."""
    if isinstance(new, str) or old is None:
        given = new.lstrip("+") if isinstance(new, str) else _full(new)
        return f"\x1b[0;{given}m" if given else "\x1b[0m"
    if new == PLAIN:
        return "\x1b[0m"
    (oa, of, ob), (na, nf, nb) = old, new
    offs = sorted({_OFF[a] for a in oa - na}, key=int)
    # An off code ends more than one attribute (22 bold and dim, 24 both underlines, 25 both
    # blinks, 54 frame and encircle): put back the ones that stay.
    ons = (na - oa) | {a for a in na if _OFF[a] in offs}
    codes = [*offs, *sorted(ons, key=int)]
    if nf != of:
        codes.append(nf or "39")
    if nb != ob:
        codes.append(nb or "49")
    delta = f"\x1b[{';'.join(codes)}m"
    full = f"\x1b[0;{_full(new)}m"
    return delta if len(delta) <= len(full) else full


def compact_sgr(data: str) -> str:
    """`data` (one write of Textual's: styles in full after resets) with each change of
    style sent as the difference, and none where the style does not change; the screen it
    leaves, and the style in force after it, are the same as `data`'s."""
    out: list[str] = []
    # What the terminal has (a str: not understood; None: not known, as at the start of a
    # write: the write before may have ended in a style, cut by the Windows driver's chunks)
    # and what the text that comes next should have (None: whatever the terminal has).
    shown: Style | str | None = None
    want: Style | str | None = None
    pos = 0
    for match in _SGR.finditer(data):
        text = data[pos : match.start()]
        if text:
            lead = _NEUTRAL.match(text)
            moved = lead.end() if lead else 0
            if moved < len(text) and want is not None and want != shown:
                out.append(text[:moved])
                out.append(_change(shown if not isinstance(shown, str) else None, want))
                shown = want
                out.append(text[moved:])
            else:
                out.append(text)
        pos = match.end()
        params = match.group(1)
        if params in ("", "0"):
            want = PLAIN
        elif want == PLAIN:
            want = _parse(params) or params
        elif want is None:  # added to what the terminal has: still not known
            out.append(match.group(0))
        else:  # a style added to a style (Textual does not): send it as it comes
            if want != shown:
                out.append(_change(shown if not isinstance(shown, str) else None, want))
            out.append(match.group(0))
            # Not a style `_parse` gives: known only as this exact sequence of codes.
            base = want if isinstance(want, str) else _full(want)
            shown = want = f"+{base};{params}"
    if want is not None and want != shown:
        out.append(_change(shown if not isinstance(shown, str) else None, want))
    out.append(data[pos:])
    return "".join(out)


def quiet_driver(base: type[Driver]) -> type[Driver]:
    """`base` (the platform's driver) with every write passed through `compact_sgr`."""

    class QuietDriver(base):  # type: ignore[valid-type,misc]
        def write(self, data: str) -> None:
            super().write(compact_sgr(data))

    QuietDriver.__name__ = QuietDriver.__qualname__ = f"Quiet{base.__name__}"
    return QuietDriver
