"""Workers tab: live and stale workers, and the kinds they serve with pause/resume.

Each worker shows how it is woken (LISTEN, or polling and why), threads of overrunning plain
handlers it abandoned (they still hold a slot), and outcomes it could not write; the line above
the table sums them up and quotes the last outcome error, highlighted when any is non-zero.

BINDINGS:
    tab      switch between the workers and the kinds
    P        pause or resume the kind under the cursor (kinds table)
    L        set the limits of the kind under the cursor (kinds table)
"""

from __future__ import annotations

from collections import Counter

from rich.text import Text
from textual.app import ComposeResult

from jobtui.inert import inert, one_line
from jobtui.models import Snapshot, WorkerRow
from jobtui.tui.palette import CellStyles, cell_styles
from jobtui.tui.panes.kinds import KindsPane, limit_text
from jobtui.tui.panes.pane import WrappingInfo
from jobtui.tui.texts import coarse_age
from jobtui.tui.widgets.keyed_table import Column, KeyedTable


class WorkersPane(KindsPane):
    kinds_table = "#worker-kinds"
    main_table = "#workers-table"

    def compose(self) -> ComposeResult:
        yield WrappingInfo(id="workers-info", classes="info")
        yield KeyedTable(id="workers-table")
        yield KeyedTable(id="worker-kinds")

    def on_mount(self) -> None:
        self.query_one("#workers-table", KeyedTable).setup_columns(
            Column("id", "id", 20, priority=0),
            Column("hb", "heartbeat", 11, priority=0),
            Column("running", "run/max", 7, priority=1),
            Column("wake", "woken by", 10, priority=1),
            Column("abandoned", "aband", 5, priority=2),
            Column("errors", "out.err", 7, priority=2),
            Column("kinds", "kinds", 16, priority=3, flex=True),
            Column("host", "host", 14, priority=4),
            Column("pid", "pid", 7, priority=5),
            Column("up", "up", 6, priority=4),
        )
        self.query_one("#worker-kinds", KeyedTable).setup_columns(
            Column("kind", "kind", 18, priority=0),
            Column("state", "state", 7, priority=0),
            Column("workers", "workers", 7, priority=0),
            Column("ready", "ready", 7, priority=1),
            Column("running", "running", 7, priority=2),
            Column("dead", "dead", 7, priority=1),
            Column("limit", "limit", 9, priority=3),
        )
        self.query_one("#workers-table").border_title = "workers"
        self.query_one("#worker-kinds").border_title = "kinds (P pause/resume · L limits)"

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
            hb = coarse_age(w.heartbeat_age_s) + (" STALE" if w.stale else "")
            rows.append(
                (
                    w.id,
                    [
                        inert(w.id, style=style or "bold"),
                        Text(hb, style=st.error if w.stale else st.success),
                        Text(f"{w.running}/{w.concurrency}", style=style),
                        wakeup_cell(w, st),
                        Text(str(w.abandoned), style=st.error if w.abandoned else style),
                        Text(str(w.outcome_errors), style=st.error if w.outcome_errors else style),
                        inert(", ".join(w.kinds) or "*", style=style),
                        inert(w.host, style=style),
                        Text(str(w.pid), style=style),
                        Text(coarse_age((now - w.started_at).total_seconds()), style=style),
                    ],
                )
            )
        self.query_one("#workers-table", KeyedTable).sync(rows)
        self._summary(snap, st)
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
                        Text(limit_text(k) if k else "", style=st.accent),
                    ],
                )
            )
        self.query_one("#worker-kinds", KeyedTable).sync(kind_rows)

    def _summary(self, snap: Snapshot, st: CellStyles) -> None:
        live = [w for w in snap.workers if not w.stale]
        polling = [w for w in live if w.wakeup_mode != "listen" or not w.listen_connected]
        abandoned = sum(w.abandoned for w in live)
        errors = [w for w in snap.workers if w.outcome_errors]
        parts: list[Text | str] = [Text(f"{len(live)} live", style="bold")]
        stale = len(snap.workers) - len(live)
        if stale:
            parts.append(Text(f" · {stale} stale", style=st.error))
        if polling:
            why = polling[0].wakeup_note or "LISTEN is not connected"
            parts.append(Text(f" · {len(polling)} polling: ", style=st.warning))
            parts.append(inert(one_line(why, 60)))
        if abandoned:
            parts.append(Text(f" · {abandoned} abandoned threads", style=st.error))
        if errors:
            total = sum(w.outcome_errors for w in errors)
            last = next((w.last_outcome_error for w in errors if w.last_outcome_error), None)
            parts.append(Text(f" · {total} outcome errors", style=st.error))
            if last:
                parts += [Text(", last: ", style=st.error), inert(one_line(last, 120))]
        self.query_one("#workers-info", WrappingInfo).set(*parts)


def wakeup_cell(w: WorkerRow, st: CellStyles) -> Text:
    """`listen`, or POLL and its interval (highlighted): how soon this worker sees a new job."""
    if w.stale:
        return Text(w.wakeup_mode, style=st.error)
    if w.wakeup_mode == "listen" and w.listen_connected:
        return Text("listen", style=st.success)
    if w.wakeup_mode == "listen":
        return Text("LISTEN LOST", style=st.error)
    return Text(f"POLL {w.poll_interval_s:g}s", style=f"bold {st.warning}")
