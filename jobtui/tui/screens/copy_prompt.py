"""Which part of a row to copy (or save to a file): asked with the confirmation dialog.

The detail screen offers it for its row; a pane offers it for the row under its cursor with
`CopyFlow.ask_row`. What is sent and how is `jobtui.tui.clipboard`'s business.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App

from jobtui import browse
from jobtui.export import state_dir
from jobtui.inert import clean
from jobtui.tui.clipboard import Clip, Clipboard, clips_of
from jobtui.tui.connection import Link, LinkDown
from jobtui.tui.screens.confirm import Choice, ConfirmScreen


class CopyFlow:
    """Ask which clip, then copy or save it and notify; runs as a worker of the app."""

    def __init__(self, app: App[Any], directory: Path | None = None) -> None:
        self.app = app
        self.clipboard = Clipboard(app, directory)

    def ask(self, clips: list[Clip], *, to_file: bool = False) -> None:
        """Ask which of `clips` to copy (or save), then do it; the notice says which."""
        self.app.run_worker(self._ask(clips, to_file), group="copy")

    def ask_row(self, link: Link, what: str, row_id: int, *, to_file: bool = False) -> None:
        """The same for row `row_id` of a table ("job" or "dead"): for a pane's cursor row."""
        self.app.run_worker(self._ask_row(link, what, row_id, to_file), group="copy")

    async def _ask_row(self, link: Link, what: str, row_id: int, to_file: bool) -> None:
        fn = browse.get_job if what == "job" else browse.get_dead
        try:
            row = await link.run(fn, row_id)
        except LinkDown as exc:
            self.app.notify(clean(exc.message), severity="error", markup=False)
            return
        if row is None:
            self.app.notify(f"#{row_id} is gone; nothing copied.", severity="warning", markup=False)
            return
        await self._ask(clips_of(row), to_file)

    async def _ask(self, clips: list[Clip], to_file: bool) -> None:
        choices = [Choice(str(i), clip.name) for i, clip in enumerate(clips)]
        if to_file and self.app.is_web:  # `jobtui serve`: the browser gets the file
            verb, body = (
                "Download",
                Text("Your browser downloads it; nothing is kept on the server."),
            )
        elif to_file:
            where = clean(str(self.clipboard.directory or state_dir() / "clipboard"))
            verb, body = "Save to a file", Text(f"Saved as a private file (0600) in {where}")
        else:
            verb = "Copy to the clipboard"
            body = Text("Sent through the terminal (OSC 52), which does not confirm it.")
        picked = await self.app.push_screen_wait(ConfirmScreen(f"{verb}?", body, choices))
        if picked is None:
            return
        try:
            notice = self.clipboard.copy(clips[int(picked)], to_file=to_file)
        except OSError as exc:
            text = f"Could not save: {exc.strerror or exc}"
            self.app.notify(clean(text), severity="error", markup=False)
            return
        self.app.notify(clean(notice), markup=False, timeout=8)
