"""Attack on issue 26 item 13 (r5-quiet): `compact_sgr` must leave every cell as the original
writes would, whatever the writes are.

The terminal model of test_tui_r5_quiet (cursor, text, SGR with every off code, ESC[K filling
with the background in force as xterm does) reads the original stream and the rewritten one;
the screens and the style in force at the end must be the same. The driver passes each write()
through `compact_sgr` on its own, so streams are also cut into several writes at arbitrary
points (Textual on Windows writes a frame in 8 KiB chunks: a cut can fall inside a run of
styled text or inside an escape sequence).
"""

from __future__ import annotations

import random

from test_tui_r5_quiet import screen

from jobtui.tui.terminal import compact_sgr

ATTRS = ["1", "2", "3", "4", "5", "7", "8", "9", "21", "6", "51", "52", "53"]
COLOURS = ["31", "97", "38;5;23", "38;5;253", "38;2;10;20;30", "38;2;255;0;0", "39"]


def _style(rng: random.Random) -> str:
    codes = rng.sample(ATTRS, rng.randint(0, 3))
    codes.sort(key=int)
    if rng.random() < 0.8:
        codes.append(rng.choice(COLOURS))
    if rng.random() < 0.7:
        codes.append(rng.choice(COLOURS).replace("38", "48").replace("3", "4", 1))
    return ";".join(codes)


def _frame(rng: random.Random, textual_only: bool) -> str:
    """One frame as Textual writes it (positions, runs with their style in full and a reset),
    with, unless `textual_only`, the other writes a terminal gets (ESC[K, OSC, mouse, sync)."""
    out = ["\x1b[?2026h"]
    for y in range(1, 5):
        out.append(f"\x1b[{y};{rng.randint(1, 4)}H")
        for _ in range(rng.randint(1, 5)):
            text = "".join(rng.choice("ab c") for _ in range(rng.randint(1, 3)))
            style = _style(rng)
            out.append(f"\x1b[{style}m{text}\x1b[0m" if style else text)
            if not textual_only and rng.random() < 0.15:
                out.append(rng.choice(["\x1b[K", "\x1b]0;title\x07", "\x1b[?1000h", "\r\n"]))
            if not textual_only and rng.random() < 0.1:
                out.append(f"\x1b[{_style(rng) or '1'}m")  # a style added to a style
    out.append("\x1b[?2026l")
    return "".join(out)


def _cut(data: str, rng: random.Random, pieces: int) -> list[str]:
    points = sorted(rng.sample(range(1, len(data)), pieces - 1))
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def test_one_frame_at_a_time_with_other_codes_mixed_in() -> None:
    rng = random.Random(26)
    for _ in range(3000):
        data = "".join(_frame(rng, textual_only=False) for _ in range(rng.randint(1, 3)))
        assert screen(compact_sgr(data)) == screen(data), repr(data)


def test_writes_cut_at_any_point() -> None:
    """Each write rewritten on its own, as the driver does, the terminal's screen is the
    original's: a write need not start with the terminal's style plain."""
    rng = random.Random(13)
    for _ in range(3000):
        data = "".join(_frame(rng, textual_only=True) for _ in range(2))
        writes = _cut(data, rng, rng.randint(2, 6))
        assert screen("".join(compact_sgr(w) for w in writes)) == screen(data), writes


def test_an_attribute_sharing_its_off_code_with_one_dropped_stays() -> None:
    """Underline and double underline both end with 24, blink and rapid blink with 25, frame
    and encircle with 54: dropping one must not drop the other."""
    for before, after in (("4;21", "4"), ("5;6", "6"), ("51;52", "52"), ("1;2", "2")):
        data = f"\x1b[{before}mA\x1b[0m\x1b[{after}mB\x1b[0m"
        assert screen(compact_sgr(data)) == screen(data), data
