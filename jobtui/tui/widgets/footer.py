"""Textual's Footer without the leak it has when it is rebuilt over and over.

Footer rebuilds its keys whenever the bindings in effect change (every tab switch and focus
move). Each key data-binds `Footer.compact`, which stores a watcher pointing at the key on the
Footer itself, and Textual prunes watchers of removed widgets only when `compact` changes — in
this console never. So every rebuild left ~6 dead FooterKeys (with their styles and caches)
reachable from the Footer: the console grew by megabytes a minute while tabs were switched
(Textualize/textual#6666). After each rebuild we nudge `compact` with its current value, which
makes Textual drop the watchers of the removed keys; the live keys just get the same value.
"""

from __future__ import annotations

from textual.widgets import Footer


class ConsoleFooter(Footer):
    """A Footer whose rebuilds release the keys they replace."""

    async def recompose(self) -> None:
        await super().recompose()
        if self.is_attached:
            self.mutate_reactive(Footer.compact)
