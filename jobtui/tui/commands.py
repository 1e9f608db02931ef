"""Command palette (ctrl+p): the actions that make sense now, for the tab and row in view.

On a screen that offers its own entries (the detail view), those are what the palette lists:
the tab's commands under it would act on a row the operator is not looking at.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Protocol, runtime_checkable

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

from jobtui.inert import clean
from jobtui.tui.host import PaletteEntry, host


@runtime_checkable
class OffersEntries(Protocol):
    """A screen with palette entries of its own."""

    def palette_entries(self) -> list[PaletteEntry]: ...


class ConsoleCommands(Provider):
    """Offers global console commands plus the current pane's selection-aware commands."""

    def _entries(self) -> list[PaletteEntry]:
        screen = self.screen
        if isinstance(screen, OffersEntries):
            return screen.palette_entries()
        return host(self.app).palette_entries()

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        return [(clean(title), help_, command) for title, help_, command in self._entries()]

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
