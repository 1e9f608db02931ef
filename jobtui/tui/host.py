"""How widgets and screens talk to the console app without importing it.

What they read from the app (the connection, whether writes are allowed) and the one thing they
may ask directly (a refresh) form the `Host` protocol; everything they want done — a write, an
export, opening a detail view, jumping to a kind — they post as a message, which the app
handles in one place. The app satisfies `Host`; nothing here knows its class.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Protocol, cast

from textual.app import App
from textual.binding import Binding
from textual.dom import DOMNode
from textual.message import Message

from jobtui import ops
from jobtui.console_config import ConsoleConfig
from jobtui.tui.actions import ActionSpec
from jobtui.tui.connection import Link

PaletteEntry = tuple[str, str, Callable[[], Any]]  # (title, help, command)


class Host(Protocol):
    """What the console app offers to the widgets and screens inside it."""

    link: Link
    config: ConsoleConfig
    actor: ops.Actor  # who the audit log names for this console's writes (web:NAME in serve)
    refresh_s: float
    refresh_paused: bool

    @property
    def read_only(self) -> bool: ...

    @property
    def read_only_reason(self) -> str | None:
        """Why writes are refused (the READ-ONLY banner's words); None while they are not."""

    def refresh_now(self) -> None: ...

    def note_read(self, error: str | None) -> None:
        """A screen that reads for itself (a detail) read the database just now: the status
        line says live (error None) or DB DOWN (the reason) as the tabs' refresh would."""

    def palette_entries(self) -> list[PaletteEntry]: ...


def host(app: App[Any]) -> Host:
    """The running app, seen through `Host`."""
    return cast(Host, app)


def read_only_refusal(node: DOMNode, key: str, writes: Collection[str]) -> str | None:
    """The line to show when `key` is one of `node`'s write keys (actions in `writes`) and the
    console is read-only: those keys are hidden then, and pressing one would otherwise do
    nothing, silently (a web user of `jobtui serve` may not know why). None otherwise."""
    console = host(node.app)
    reason = console.read_only_reason
    if reason is None:
        return None
    keymap = console.config.keymap
    for cls in type(node).__mro__:
        for binding in Binding.make_bindings(cls.__dict__.get("BINDINGS", ())):
            keys = keymap.get(binding.id, binding.key) if binding.id else binding.key
            if binding.action in writes and key in keys.split(","):
                what = binding.description or binding.action
                return f"Read-only: {what} is not allowed ({reason})."
    return None


class WriteAsked(Message):
    """Requeue, delete, cancel, run now or run again (`spec`) the rows `ids` or those matching
    `flt`. Job actions act only on the ids they can change (`jobtui.tui.actions.applicable`).

    `group` names a failure group for the confirmation; `after` runs once the write is done.
    """

    def __init__(
        self,
        spec: ActionSpec,
        ids: list[int],
        flt: Any,
        *,
        group: str | None = None,
        after: Callable[[], Any] | None = None,
    ) -> None:
        super().__init__()
        self.spec = spec
        self.ids = ids
        self.flt = flt
        self.group = group
        self.after = after


class PauseAsked(Message):
    """Pause `kind` (or resume it when `paused`)."""

    def __init__(self, kind: str, paused: bool) -> None:
        super().__init__()
        self.kind = kind
        self.paused = paused


class ExportAsked(Message):
    """Export the dead letters `ids` or those matching `flt` to a file."""

    def __init__(self, ids: list[int], flt: Any, group: str | None) -> None:
        super().__init__()
        self.ids = ids
        self.flt = flt
        self.group = group


class DetailAsked(Message):
    """Open the detail view of a job (`what` = "job") or a dead letter ("dead")."""

    def __init__(self, what: str, row_id: int) -> None:
        super().__init__()
        self.what = what
        self.row_id = row_id


class KindChosen(Message):
    """Show the jobs of `kind` (from a row of the Overview)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind


class ScheduleAsked(Message):
    """Pause, resume or run now (`action`: "pause", "resume", "run_now") the schedule `name`."""

    def __init__(self, name: str, action: str) -> None:
        super().__init__()
        self.name = name
        self.action = action


class LimitsAsked(Message):
    """Open the dialog that sets or clears the concurrency and rate limits of `kind`."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
