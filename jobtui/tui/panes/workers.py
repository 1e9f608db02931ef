"""Workers tab: live and stale workers, and the kinds they serve with pause/resume.

BINDINGS:
    tab      switch between the workers and the kinds
    P        pause or resume the kind under the cursor (kinds table)
"""

from __future__ import annotations

from collections import Counter

from rich.text import Text
from textual.app import ComposeResult

from jobtui.config import format_duration
from jobtui.inert import inert
from jobtui.models import Snapshot
from jobtui.tui.palette import cell_styles
from jobtui.tui.panes.kinds import KindsPane
from jobtui.tui.widgets.keyed_table import KeyedTable


class WorkersPane(KindsPane):
    kinds_table = "#worker-kinds"
    main_table = "#workers-table"

    def compose(self) -> ComposeResult:
        yield KeyedTable(id="workers-table")
        yield KeyedTable(id="worker-kinds")

    def on_mount(self) -> None:
        self.query_one("#workers-table", KeyedTable).setup_columns(
            ("id", "id", 24),
            ("hb", "heartbeat", 12),
            ("running", "run/max", 7),
            ("kinds", "kinds", 30),
            ("host", "host", 14),
            ("pid", "pid", 7),
            ("up", "up", 8),
        )
        self.query_one("#worker-kinds", KeyedTable).setup_columns(
            ("kind", "kind", 20),
            ("state", "state", 8),
            ("workers", "workers", 8),
            ("ready", "ready", 8),
            ("running", "running", 8),
            ("dead", "dead", 8),
        )
        self.query_one("#workers-table").border_title = "workers"
        self.query_one("#worker-kinds").border_title = "kinds (P pause/resume)"

    def show(self, snap: Snapshot) -> None:
        self.snapshot = snap
        st = cell_styles(self.app)
        now = snap.taken_at  # the server's clock, like the heartbeat ages
        rows = []
        workers = sorted(snap.workers, key=lambda w: (not w.stale, w.id))
        serving: Counter[str] = Counter()
        for w in workers:
            if not w.stale:
                serving.update(set(w.kinds))
            style = st.error if w.stale else ""
            hb = format_duration(w.heartbeat_age_s) + (" STALE" if w.stale else "")
            rows.append(
                (
                    w.id,
                    [
                        inert(w.id, style=style or "bold"),
                        Text(hb, style=st.error if w.stale else st.success),
                        Text(f"{w.running}/{w.concurrency}", style=style),
                        inert(", ".join(w.kinds) or "*", style=style),
                        inert(w.host, style=style),
                        Text(str(w.pid), style=style),
                        Text(format_duration((now - w.started_at).total_seconds()), style=style),
                    ],
                )
            )
        self.query_one("#workers-table", KeyedTable).sync(rows)
        kinds = {k.kind: k for k in snap.kinds}
        everything = serving.pop("*", 0)  # workers that take every kind
        names = sorted(set(kinds) | set(snap.paused) | set(serving))
        kind_rows = []
        for name in names:
            k = kinds.get(name)
            paused = name in snap.paused
            n = serving.get(name, 0) + everything
            kind_rows.append(
                (
                    name,
                    [
                        inert(name, style="bold"),
                        Text(
                            "PAUSED" if paused else "active",
                            style=st.warning if paused else st.success,
                        ),
                        Text(
                            str(n) if n or (k is not None and k.handled) else "none",
                            style="" if n or (k is not None and k.handled) else st.warning,
                        ),
                        Text(str(k.ready if k else 0)),
                        Text(str(k.running if k else 0)),
                        Text(str(k.dead if k else 0), style=st.error if k and k.dead else ""),
                    ],
                )
            )
        self.query_one("#worker-kinds", KeyedTable).sync(kind_rows)
