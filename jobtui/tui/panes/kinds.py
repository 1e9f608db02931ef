"""What the Overview and Workers tabs share: a table of kinds, each of which can be paused
and limited.

BINDINGS:
    P        pause or resume the kind under the cursor
    L        set the kind's concurrency and rate limits (a dialog, then a confirmation)
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from jobtui import metrics
from jobtui.models import KindFigures, Snapshot
from jobtui.tui.connection import Link
from jobtui.tui.host import LimitsAsked, PauseAsked
from jobtui.tui.panes.pane import Pane
from jobtui.tui.widgets.keyed_table import KeyedTable


def limit_text(k: KindFigures) -> str:
    """`≤5 2/w 100/m`: the limits in force for a kind, empty when it has none."""
    parts = []
    if k.concurrency_limit:
        parts.append(f"≤{k.concurrency_limit}")
    if k.per_worker_limit:
        parts.append(f"{k.per_worker_limit}/w")
    if k.rate_limit:
        parts.append(k.rate_limit)
    return " ".join(parts)


class KindsPane(Pane):
    """A pane showing a `Snapshot` with a table of kinds (`kinds_table`, keyed by kind)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # "kind" in the footer: `p` (the app's) pauses the refresh, `P` the kind.
        Binding("P", "toggle_pause_kind", "Pause kind", id="pause_kind"),
        Binding("L", "set_limits", "Limits", id="kind_limits"),
    ]
    kinds_table = ""
    snapshot: Snapshot | None = None

    async def load(self, link: Link) -> Snapshot:
        cfg = self.console.config
        return await link.run(metrics.snapshot, heartbeat_timeout=cfg.heartbeat_timeout_s)

    def current_kind(self) -> str | None:
        return self.query_one(self.kinds_table, KeyedTable).current_key

    def is_paused(self, kind: str) -> bool:
        return self.snapshot is not None and kind in self.snapshot.paused

    def action_toggle_pause_kind(self) -> None:
        kind = self.current_kind()
        if kind is not None:
            self.post_message(PauseAsked(kind, self.is_paused(kind)))

    def action_set_limits(self) -> None:
        kind = self.current_kind()
        if kind is not None:
            self.post_message(LimitsAsked(kind))

    def palette_commands(self) -> list[tuple[str, str, str]]:
        kind = self.current_kind()
        if kind is None or self.console.read_only:
            return []
        verb = "Resume" if self.is_paused(kind) else "Pause"
        return [
            (f"{verb} kind {kind}", "workers stop/start claiming it", "toggle_pause_kind"),
            (f"Limits of kind {kind}…", "concurrency and rate; asks first", "set_limits"),
        ]
