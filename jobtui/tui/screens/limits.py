"""The dialog that sets a kind's concurrency and rate limits (or clears the console override).

BINDINGS:
    enter    check the values and go on to the confirmation
    esc      back (nothing changes)

An empty field means "no limit" for that field; the values are checked here with the engine's
own rules (`jobtui.limits`) so a typo is reported in the dialog, not by the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from jobtui.inert import inert
from jobtui.limits import InvalidLimit, KindLimit, parse_rate
from jobtui.models import KindLimitRow

PERIOD_NAMES = {1: "s", 60: "m"}


@dataclass(frozen=True)
class LimitsRequest:
    """What the operator asked for: `clear` the override, or set these (None = no limit)."""

    clear: bool
    concurrency: int | None = None
    per_worker: int | None = None
    rate: int | None = None
    period_s: int = 1

    def describe(self) -> str:
        if self.clear:
            return "clear the console override (the limits declared on the handler apply)"
        return ", ".join(
            [
                f"concurrency {self.concurrency if self.concurrency else 'unlimited'}",
                f"per worker {self.per_worker if self.per_worker else 'unlimited'}",
                "rate "
                + (f"{self.rate}/{PERIOD_NAMES[self.period_s]}" if self.rate else "unlimited"),
            ]
        )


def rate_text(rate: int | None, period_s: int) -> str:
    return f"{rate}/{PERIOD_NAMES.get(period_s, 's')}" if rate else ""


def _count(name: str, text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise InvalidLimit(f"{name}: a whole number of at least 1, or empty for no limit")
    return int(text)


class LimitsScreen(ModalScreen[LimitsRequest | None]):
    """Returns the LimitsRequest, or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Back", id="limits.cancel")
    ]

    def __init__(self, kind: str, current: KindLimitRow | None) -> None:
        super().__init__()
        self.kind = kind
        self.current = current

    def compose(self) -> ComposeResult:
        cur = self.current
        with Vertical(id="limits-box") as box:
            box.border_title = "limits of kind"
            yield Static(self._summary(), id="limits-summary")
            fields = (
                (
                    "concurrency",
                    "concurrency",
                    str(cur.concurrency) if cur and cur.concurrency else "",
                ),
                ("per worker", "per-worker", str(cur.per_worker) if cur and cur.per_worker else ""),
                ("rate", "rate", rate_text(cur.rate, cur.period_s) if cur else ""),
            )
            for label, name, value in fields:
                with Horizontal(classes="limits-row"):
                    yield Label(label, classes="limits-label")
                    hint = "no limit, or e.g. 100/m, 5/s" if name == "rate" else "no limit"
                    yield Input(value, placeholder=hint, id=f"limits-{name}")
            yield Static("", id="limits-error")
            with Horizontal(id="limits-buttons"):
                yield Button("Set", id="limits-set", variant="primary", compact=True)
                yield Button(
                    "Clear override",
                    id="limits-clear",
                    compact=True,
                    disabled=not (cur and cur.overridden),
                )
                # Not "Cancel": next to "Set" and "Clear override" it could read as an action.
                yield Button("Back, change nothing", id="limits-cancel", compact=True)

    def _summary(self) -> Text:
        cur = self.current
        text = Text.assemble(inert(self.kind, style="bold"))
        if cur is None:
            text.append("  no limits set", style="dim")
        elif cur.overridden:
            text.append(f"  overridden by {cur.overridden_by or '?'}", style="dim")
        else:
            text.append("  limits as declared on the handler", style="dim")
        text.append("\nempty = no limit; applies from the next claim", style="dim")
        return text

    def on_mount(self) -> None:
        self.query_one("#limits-concurrency", Input).focus()

    def _request(self) -> LimitsRequest:
        concurrency = _count("concurrency", self.query_one("#limits-concurrency", Input).value)
        per_worker = _count("per worker", self.query_one("#limits-per-worker", Input).value)
        rate_field = self.query_one("#limits-rate", Input).value.strip()
        rate, period = parse_rate(rate_field) if rate_field else (None, 1)
        KindLimit(self.kind, concurrency, per_worker, rate, period)  # the engine's own checks
        return LimitsRequest(False, concurrency, per_worker, rate, period)

    def _submit(self) -> None:
        try:
            request = self._request()
        except InvalidLimit as exc:
            self.query_one("#limits-error", Static).update(Text(str(exc)))
            return
        self.dismiss(request)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "limits-set":
            self._submit()
        elif event.button.id == "limits-clear":
            self.dismiss(LimitsRequest(True))
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
