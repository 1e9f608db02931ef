"""The alarm list: the alert rules firing now, most severe first, one line each.

The Overview shows it as its first line while anything fires and hides it otherwise; the order
is `jobtui.alarm_order`'s (worst first, then what stops work), and when more fire than fit the
last line counts the rest and how many of them are critical. What
fires is decided by `jobtui.alerts.evaluate`, the evaluation `jobtui check` and
`stats --prometheus` use, so the three cannot disagree. The level reads without colour
(NO_COLOR): a glyph and a word, `✗ CRIT` in reverse video, `! WARN` in bold; the theme's
error and warning colours are added when colour is on. Redrawn only when its text changes,
so an age in it is shown as coarsely as the Overview's ages (`40m`, not `40m05s`): a line that
ticked every second would be re-sent every second while nothing happens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.text import Text
from textual.app import App
from textual.widgets import Static

from jobtui.alarm_order import critical_count, ordered
from jobtui.alerts import MEASURES, QUEUE, Firing, Level
from jobtui.inert import inert
from jobtui.tui.palette import cell_styles
from jobtui.tui.texts import coarse_age, same

GLYPHS = {Level.CRIT: "✗ CRIT", Level.WARN: "! WARN"}


def steady_text(f: Firing) -> str:
    """The firing's line with its figure coarse: the line `check` prints, except that a
    duration (oldest ready age, drain time) changes once a minute instead of every second and
    a ratio (failure rate) in whole percent (`41.6%` → `42%`: under `jobtui demo` the tenth
    changed on every refresh, a redraw of the line for a difference nobody acts on)."""
    measure = MEASURES[f.rule]
    if f.value is None or not math.isfinite(f.value):
        return f.text
    if measure.unit == "duration":
        steady = coarse_age(f.value)
    elif measure.unit == "ratio":
        steady = f"{f.value:.0%}"
    else:
        return f.text
    who = "" if f.kind == QUEUE else f"{f.kind}: "
    if not f.text.startswith(who):
        return f.text
    said = f.text[len(who) :]
    return who + said.replace(measure.shown(f.value), steady, 1)


def alarm_lines(app: App[object], firings: Sequence[Firing]) -> list[Text]:
    """One line per firing, its level as a glyph and a word (styled so WARN and CRIT differ
    without colour too: CRIT in reverse video, WARN in bold)."""
    st = cell_styles(app)
    label_style = {
        Level.CRIT: "bold reverse" if app.no_color else f"{st.error} reverse",
        Level.WARN: f"{st.warning} bold",
    }
    return [
        Text.assemble(
            (GLYPHS[f.level], label_style[f.level]),
            " ",
            inert(steady_text(f)),
            (f" [{f.rule}]", "dim"),
            no_wrap=True,
            overflow="ellipsis",
        )
        for f in firings
    ]


def more_line(rest: Sequence[Firing], key: str) -> Text:
    """`… and 8 more alarms (5 critical) · A all`: what the list could not show."""
    crit = critical_count(rest)
    more = f"… and {len(rest)} more alarm{'s' if len(rest) > 1 else ''} ({crit} critical)"
    return Text.assemble((more, "bold"), (f" · {key} all" if key else "", "dim"))


class AlarmList(Static):
    """`show(firings)`: one line per firing rule (at most `max_lines`, then a count of the
    rest and of its critical ones); hidden while the list is empty. Styled by `alarms.tcss`.
    `key` names the key that shows them all, in the count's line."""

    def __init__(self, *, max_lines: int = 3, key: str = "", id: str | None = None) -> None:
        super().__init__(id=id, classes="alarms")
        self.max_lines = max(1, max_lines)
        self.key = key
        self.firings: list[Firing] = []
        self.display = False

    def show(self, firings: Sequence[Firing]) -> None:
        """Show what `jobtui.alerts.evaluate(snapshot, rules)` returned (any order)."""
        self.firings = ordered(firings)
        self.display = bool(self.firings)
        text = self._text()
        if not same(self.content, text):
            # A new layout only when the number of lines changes (an age ticking does not).
            old = self.content.plain.count("\n") if isinstance(self.content, Text) else -1
            self.update(text, layout=old != text.plain.count("\n"))

    def _text(self) -> Text:
        shown = self.firings
        if len(shown) > self.max_lines:
            shown = shown[: self.max_lines - 1]
        lines = alarm_lines(self.app, shown)
        rest = self.firings[len(shown) :]
        if rest:
            lines.append(more_line(rest, self.key))
        return Text("\n", no_wrap=True).join(lines)
