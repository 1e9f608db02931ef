"""Textual's Footer, with its keys changed in place instead of rebuilt.

Footer rebuilds its keys (a recompose: every key removed, new ones mounted and styled, each
twice as its `compact` binding settles, then a layout of the screen) every time the screen
says its bindings may have changed: each focus move and `refresh_bindings`. A tab key says so
several times, and each rebuild cost about as much as drawing the tab. Here a signal first
compares the keys in effect with those shown and stops there when they are the same; when they
differ, the keys already mounted take the new texts (a layout only when a width changes), the
extra ones are hidden (kept for a tab with more keys), and only missing ones are mounted.

Rebuilding also leaked (Textualize/textual#6666): each key data-binds `Footer.compact`, which
stores a watcher pointing at the key on the Footer, pruned only when `compact` changes. After
a rebuild, `compact` is nudged with its own value, so Textual drops the old keys' watchers.

While a modal screen (a confirmation, a prompt, help) is up over the footer's screen, the footer
shows the modal's keys — the only ones that work then — taken from the top screen's active
bindings, the same way: the footer follows the app's screen changes and the modal's own
signal, and its screen's signals are ignored until the modal goes (a poll that refreshes the
tab's bindings then costs nothing). The palette's key, which a modal does not have, is hidden
and shown again in place like the others.

The keys are what `Footer.compose` shows — the first shown binding of each action, greyed when
`check_action` says None, then the command palette's key at the right — without binding
groups, which this console does not use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.events import MouseDown
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

PALETTE_CLASS = "-command-palette"


@dataclass(frozen=True)
class KeyShown:
    """One key of the footer, as the operator sees it."""

    key: str
    key_display: str
    description: str
    action: str
    enabled: bool
    tooltip: str
    palette: bool = False  # the command palette's key, docked at the right


def keys_in_effect(screen: Screen[Any]) -> list[KeyShown]:
    """The footer's keys for the bindings now in effect on `screen`."""
    app = screen.app
    active = screen.active_bindings
    out: list[KeyShown] = []
    actions: set[str] = set()
    for _, binding, enabled, tooltip in active.values():
        if binding.show and binding.action not in actions:
            actions.add(binding.action)
            key_display = app.get_key_display(binding)
            out.append(
                KeyShown(
                    binding.key, key_display, binding.description, binding.action, enabled, tooltip
                )
            )
    if app.ENABLE_COMMAND_PALETTE and app.COMMAND_PALETTE_BINDING in active:
        _, binding, enabled, tooltip = active[app.COMMAND_PALETTE_BINDING]
        out.append(
            KeyShown(
                binding.key,
                app.get_key_display(binding),
                binding.description,
                binding.action,
                enabled,
                binding.tooltip or binding.description,
                palette=True,
            )
        )
    return out


class ConsoleKey(FooterKey):
    """A footer key whose texts can change without remounting it."""

    def __init__(self, shown: KeyShown) -> None:
        super().__init__(
            shown.key,
            shown.key_display,
            shown.description,
            shown.action,
            disabled=not shown.enabled,
            tooltip=shown.tooltip,
            classes=PALETTE_CLASS if shown.palette else "",
        )
        self.shown = shown

    def show(self, shown: KeyShown) -> None:
        if shown == self.shown:
            return
        old, self.shown = self.shown, shown
        self.key, self.key_display = shown.key, shown.key_display
        self.description, self.action = shown.description, shown.action
        self.set_class(not shown.enabled, "-disabled")
        self.tooltip = shown.tooltip or None
        resized = (shown.key_display, shown.description) != (old.key_display, old.description)
        self.refresh(layout=resized)

    @on(MouseDown)
    def _pressed(self, event: MouseDown) -> None:
        """A click presses the key, as FooterKey's does, judged by what the key shows now."""
        event.prevent_default()  # not FooterKey's: it remembers the state the key was made in
        if self.shown.enabled:
            self.app.simulate_key(self.key)
        else:
            self.app.bell()


class ConsoleFooter(Footer):
    """A Footer that changes its keys in place, and only when they change."""

    def __init__(self) -> None:
        super().__init__()
        self._shown: list[KeyShown] | None = None  # what the keys on screen show
        self._modal: Screen[Any] | None = None  # the modal whose keys are shown, if any

    def keys_screen(self) -> Screen[Any]:
        """The screen whose keys work now: the top one when only modals are above the
        footer's screen, else the footer's own (hidden under another screen, or on top)."""
        own = self.screen
        stack = self.app.screen_stack
        for screen in reversed(stack):
            if screen is own:
                return stack[-1]
            if not screen.is_modal:
                break
        return own

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:  # as Footer: nothing until the screen has said its keys
            return
        self._shown = keys_in_effect(self.keys_screen())
        for shown in self._shown:
            key = ConsoleKey(shown)
            yield key if shown.palette else key.data_bind(compact=Footer.compact)

    # Textual calls every class's on_mount / on_unmount along the MRO (MessagePump's
    # _get_dispatch_methods): Footer's own subscribe to (and unsubscribe from) the screen's
    # bindings signal without being called here. Calling them again subscribed twice, and
    # every signal then recomposed twice.
    def on_mount(self) -> None:
        self.app.screen_change_signal.subscribe(self, self._screen_changed)

    def on_unmount(self) -> None:
        self.app.screen_change_signal.unsubscribe(self)
        self._follow(None)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        """Footer's, for the screen whose keys are shown (its own or the modal above it)."""
        self._bindings_ready = True
        if screen.app.app_focus and self.is_attached and screen is self.keys_screen():
            self.call_after_refresh(self.recompose)

    def _screen_changed(self, _screen: Screen[Any]) -> None:
        """A screen was pushed or popped: a modal over this footer's screen came or went."""
        if not self.is_attached:
            return
        keys_screen = self.keys_screen()
        modal = keys_screen if keys_screen is not self.screen else None
        if modal is self._modal:
            return
        self._follow(modal)
        self.bindings_changed(keys_screen)

    def _follow(self, modal: Screen[Any] | None) -> None:
        """Listen to `modal`'s bindings (and no longer to the previous modal's)."""
        if self._modal is not None:
            self._modal.bindings_updated_signal.unsubscribe(self)
        self._modal = modal
        if modal is not None:
            modal.bindings_updated_signal.subscribe(self, self.bindings_changed)

    async def recompose(self) -> None:
        """What Footer calls after each signal that the bindings may have changed."""
        if not self.is_attached:
            return
        shown = keys_in_effect(self.keys_screen()) if self._bindings_ready else None
        if shown is not None and shown == self._shown:
            return
        if shown is None or self._shown is None:
            await super().recompose()  # the first keys
            self.mutate_reactive(Footer.compact)  # drop the removed keys' watchers
            return
        self._shown = shown
        keys = list(self.query_children(ConsoleKey))
        old = [k for k in keys if not k.shown.palette]
        new = [s for s in shown if not s.palette]
        palette = next((k for k in keys if k.shown.palette), None)
        palette_shown = next((s for s in shown if s.palette), None)
        for key, text in zip(old, new, strict=False):
            key.show(text)
            key.display = True
        for key in old[len(new) :]:
            key.display = False  # kept for the next tab with more keys: mounting costs more
        if palette is not None:
            if palette_shown is not None:
                palette.show(palette_shown)
            palette.display = palette_shown is not None  # a modal has no palette key
        added = [ConsoleKey(s).data_bind(compact=Footer.compact) for s in new[len(old) :]]
        if palette is None and palette_shown is not None:
            added.append(ConsoleKey(palette_shown))
        if added:
            await self.mount_all(added, before=palette)
