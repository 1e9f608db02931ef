"""The Database tab (issue 12): the database conditions that stall the queue.

Its first version reports only the server clock; the vacuum, NOTIFY and connection figures
follow.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType

from jobtui.tui.connection import Link
from jobtui.tui.panes.pane import InfoLine, Pane
from jobtui.tui.server import server_now


class DatabasePane(Pane):
    BINDINGS: ClassVar[list[BindingType]] = []

    def compose(self) -> ComposeResult:
        yield InfoLine(id="database-info")

    async def load(self, link: Link) -> Any:
        return await link.run(server_now)

    def show(self, data: Any) -> None:
        self.query_one("#database-info", InfoLine).set(f"server time {data}")
