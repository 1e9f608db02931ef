"""The contract between the app's refresh loop and each tab.

The loop calls `load(link)` (database only, no widgets) and then `show(data)` (widgets only),
so rendering never waits on the database and the next poll starts only after `show`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from rich.text import Text
from textual import events
from textual.containers import Vertical
from textual.widgets import Static

from jobtui.models import Page
from jobtui.tui.connection import Link
from jobtui.tui.host import Host, host, read_only_refusal
from jobtui.tui.screens.filter_prompt import FilterScreen
from jobtui.tui.texts import same
from jobtui.tui.widgets.keyed_table import KeyedTable

F = TypeVar("F")

# Live tables (Jobs, dead-letter rows): rows coming and going are shown at most this often while
# no key is pressed (KeyedTable.settle_s); a change of rows moves every row below it, which
# redraws the whole table, and the live demo changes them every second.
SETTLE_S = 20.0

WRITE_ACTIONS = frozenset(
    {
        "requeue",
        "requeue_group",
        "delete",
        "delete_group",
        "cancel",
        "run_now",
        "toggle_pause_kind",
        "set_limits",
        "toggle_pause_schedule",
        "run_schedule_now",
        "quiet_worker",
        "stop_worker",
        "run_again",
        # the Database tab's, on the blocker (each also needs a blocker of its kind)
        "cancel_backend",
        "terminate_backend",
        "end_prepared",
        "drop_slot",
    }
)


class Pane(Vertical):
    """One tab's content. Subclasses set `main_table` (the widget focused on entry)."""

    main_table = ""
    # When a pane that holds its live figures (Overview, Database) last drew them; 0: draw
    # with the next refresh (a key pressed here, or back on the tab).
    _drawn_at = 0.0

    @property
    def console(self) -> Host:
        return host(self.app)

    async def load(self, link: Link) -> Any:
        raise NotImplementedError

    def show(self, data: Any) -> None:
        raise NotImplementedError

    def focus_main(self) -> None:
        """Focus the main table now (`Widget.focus` would wait for the next message)."""
        if self.main_table:
            self.screen.set_focus(self.query_one(self.main_table))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action in WRITE_ACTIONS and self.console.read_only)

    def why_not(self, action: str) -> str | None:
        """Why `action` cannot act on the selection now (its key is greyed in the footer);
        None: no reason to give."""
        return None

    def on_key(self, event: events.Key) -> None:
        """A key whose binding here is greyed (check_action said None) would do nothing,
        silently: say why instead. Any key: the next refresh draws held figures at once."""
        self._drawn_at = 0.0
        refusal = read_only_refusal(self, event.key, WRITE_ACTIONS)
        if refusal is not None:
            self.app.notify(refusal, severity="warning", timeout=6, markup=False)
            return
        active = self.app.active_bindings.get(event.key)
        if active is None or active.node is not self or active.enabled:
            return
        reason = self.why_not(active.binding.action)
        if reason is not None:
            self.app.notify(reason, timeout=4, markup=False)

    def on_show(self, event: events.Show) -> None:
        """Back on this tab: held figures are drawn with the next refresh."""
        self._drawn_at = 0.0

    def palette_commands(self) -> list[tuple[str, str, str]]:
        """(title, help, action) the command palette offers for the current selection."""
        return []

    def on_keyed_table_relaid(self, event: KeyedTable.Relaid) -> None:
        """Columns came or went, or changed width: show the cells again, fitted to them."""
        if self.is_attached and self.region.area:  # the tab on screen (others have no area)
            self.console.refresh_now()


def loading_rows() -> Text:
    """Said after the filter while the rows below still answer the filter before (a new
    filter's first rows not loaded yet), in place of how many are shown."""
    return Text("   loading rows…", style="bold")


def ask_filter(
    pane: Pane,
    title: str,
    current: str,
    hint: str,
    parse: Callable[[str, Sequence[str]], F],
    kinds: Sequence[str],
    apply: Callable[[F], None],
) -> None:
    """The `/` prompt for a pane: `parse` checks the text as it is accepted (with the known
    `kinds`, so `kind:` may be a prefix) and `apply` gets the filter."""
    known = list(kinds)

    def done(text: str | None) -> None:
        if text is not None:
            apply(parse(text, known))

    check = partial(parse, kinds=known)  # type: ignore[call-arg]
    pane.app.push_screen(FilterScreen(title, current, hint, check, known), done)


# A text search scans a bounded range of ids per call (browse.SEARCH_SCOPE) and may return a
# short page that still continues. The first page is drawn after SEARCH_FIRST_CALLS calls, so
# a search shows what the newest rows hold at once (one call at 2.35M rows: benchmarks/
# console_scale.py) and the info line says it goes on; each page the operator asks for after
# it (`]`) may take SEARCH_CALLS_PER_PAGE calls more.
SEARCH_FIRST_CALLS = 1
SEARCH_CALLS_PER_PAGE = 5


async def load_pages(
    link: Link,
    fn: Callable[..., Awaitable[Page[Any]]],
    flt: Any,
    *,
    pages: int,
    size: int,
    searching: bool,
) -> tuple[list[Any], int | None]:
    """Rows of the first `pages` keyset pages (listing order) and where the next would start.

    A search stops early (see SEARCH_FIRST_CALLS): a non-None start with fewer rows than
    `pages * size` means more rows may match below it, never that there are none.
    """
    rows: list[Any] = []
    before: int | None = None
    calls = 0
    max_calls = SEARCH_FIRST_CALLS + (pages - 1) * SEARCH_CALLS_PER_PAGE if searching else pages
    while True:
        page = await link.run(fn, flt, before=before, limit=size)
        rows.extend(page.rows)
        before = page.next_before
        calls += 1
        if before is None or len(rows) >= pages * size or calls >= max_calls:
            return rows, before


class InfoLine(Static):
    """A one-line strip above a table: the filter in force and what is shown.

    Redrawn only when its text changes, not on every refresh of the table below.
    """

    wraps = False  # True: the text may take more lines, so a change re-runs the layout

    def set(self, *parts: Text | str) -> None:
        text = Text.assemble(*parts)
        if not same(self.content, text):
            self.update(text, layout=self.wraps)


class WrappingInfo(InfoLine):
    """An InfoLine whose text may wrap (up to the height its CSS allows)."""

    wraps = True
