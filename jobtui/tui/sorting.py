"""How a table cell sorts: by the number, size or age it shows, else by its text.

Cells are already formatted (`1.2k`, `3h05m`, `12%`, `in 4m`), so sorting their text would put
`9` after `10` and `2m` after `1h`. `sort_value` reads them back into numbers.
"""

from __future__ import annotations

import re

UNITS = {"k": 1e3, "M": 1e6}
DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
NUMBER = re.compile(r"^-?\d[\d,]*(?:\.\d+)?")


def _duration(text: str) -> float | None:
    match = DURATION.match(text)
    if not match or not any(match.groups()):
        return None
    d, h, m, s = (int(g) if g else 0 for g in match.groups())
    return float(d * 86400 + h * 3600 + m * 60 + s)


def _number(text: str) -> float | None:
    if text.endswith("ms") and NUMBER.fullmatch(text[:-2]):
        return float(text[:-2].replace(",", "")) / 1000
    match = NUMBER.match(text)
    if not match:
        return None
    rest = text[match.end() :]
    value = float(match.group().replace(",", ""))
    if rest in UNITS:
        return value * UNITS[rest]
    if rest in ("", "%", "s") or rest.startswith("/"):
        return value
    return None


def sort_value(text: str) -> tuple[int, float, str]:
    """A key for `sorted`: numbers and ages (`in 4m` counts as -240 s) before other text."""
    plain = text.strip()
    sign = 1.0
    for prefix in ("in ", "late "):
        if plain.startswith(prefix):
            plain, sign = plain[len(prefix) :], (-1.0 if prefix == "in " else 1.0)
    plain = plain.removesuffix(" ago").removeprefix("<").split(" ")[0]
    for read in (_duration, _number):
        value = read(plain)
        if value is not None:
            return (0, sign * value, "")
    return (1, 0.0, text.lower())
