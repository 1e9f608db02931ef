"""Where an export goes: a path the operator sees and can edit before anything is written.

The proposal is a new file in jobtui's state directory, never the current directory (often a
checkout). `~` is expanded; a relative path is taken from the current directory and shown as
the absolute path it means. A folder that does not exist is refused with a one-line reason,
except the proposed one, which is created.

BINDINGS:
    enter    write there (an existing file is not overwritten without asking)
    esc      back: export nothing
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from jobtui.inert import clean


def resolve(text: str, default: Path) -> Path:
    """The path `text` means: `~` expanded, relative to the current directory; a missing
    folder raises ValueError, unless it is the default's (which is created)."""
    raw = text.strip()
    if not raw:
        raise ValueError("give a file name")
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give a file name")
    if path.parent == default.parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.parent.is_dir():
        raise ValueError(f"no folder {path.parent}")
    return path


class ExportPathScreen(ModalScreen[Path | None]):
    """Returns the path to write (checked), or None when the operator went back."""

    CSS_PATH = "export_prompt.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="export_path.back")
    ]

    def __init__(self, title: str, what: Text, default: Path) -> None:
        super().__init__()
        self._title = title
        self._what = what
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box") as box:
            box.border_title = self._title
            yield Static(self._what, id="export-what")
            yield Input(value=str(self.default), id="export-path")
            yield Static(
                Text("enter: write here · esc: back, export nothing", style="dim"),
                id="export-hint",
            )
            yield Static("", id="export-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            path = resolve(event.value, self.default)
        except (ValueError, OSError) as exc:
            self.query_one("#export-error", Static).update(Text(clean(str(exc)), style="bold"))
            return
        self.dismiss(path)

    def action_back(self) -> None:
        self.dismiss(None)
