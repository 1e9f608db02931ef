"""Command palette (ctrl+p): the actions that make sense now, for the tab and row in view."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

from jobtui.inert import clean
from jobtui.tui.host import host


class ConsoleCommands(Provider):
    """Offers global console commands plus the current pane's selection-aware commands."""

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        entries = host(self.app).palette_entries()
        return [(clean(title), help_, command) for title, help_, command in entries]

    async def discover(self) -> Hits:
        for title, help_, command in self._commands():
            yield DiscoveryHit(Text(title), command, text=title, help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_, command in self._commands():
            score = matcher.match(title)
            if score > 0:
                # Plain Text, not matcher.highlight(): that parses markup, and titles hold data.
                yield Hit(score, Text(title), partial(command), text=title, help=help_)
