"""Workers tab: live and stale workers, and the kinds they serve with pause/resume.

Each worker shows how it is woken (LISTEN, or polling and why), threads of overrunning plain
handlers it abandoned (they still hold a slot), and outcomes it could not write; the line above
the table sums them up and quotes the last outcome error, highlighted when any is non-zero.

A worker an operator quieted or stopped (jobtui.worker_control) says so in words in its `state`
column: "quiet asked" / "stop asked" until the worker has seen the request, then "quiet" /
"stopping" (what the worker itself wrote back), so a request that has not arrived is not
mistaken for one carried out.

BINDINGS:
    tab      switch between the workers and the kinds
    Z        quiet the worker under the cursor, or resume it when it is quiet (workers table)
    X        stop the worker under the cursor: it drains and exits (workers table)
    P        pause or resume the kind under the cursor (kinds table)
    L        set the limits of the kind under the cursor (kinds table)
    enter    the kind screen of the kind under the cursor (kinds table)
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import DescendantFocus
from textual.widgets import DataTable

from jobtui.control_state import control_text
from jobtui.inert import inert, one_line
from jobtui.models import Snapshot, WorkerRow
from jobtui.tui.host import KindChosen
from jobtui.tui.palette import CellStyles, cell_styles
from jobtui.tui.panes.kinds import KindsPane, limit_text
from jobtui.tui.panes.pane import WrappingInfo
from jobtui.tui.texts import coarse_age, kind_label
from jobtui.tui.widgets.keyed_table import Column, KeyedTable
from jobtui.tui.worker_actions import WORKER_ACTIONS, WorkerControlAsked

WORKER_KEYS = ("quiet_worker", "stop_worker")  # about the workers table's cursor
KIND_KEYS = ("toggle_pause_kind", "set_limits")  # about the kinds table's cursor
WORKER_KIND_WIDTH = 18  # the kinds table's kind column, then `…` (see kind_label)


def quiet_key_action(w: WorkerRow) -> str | None:
    """What `Z` does for `w`: resume it when it is asked to be quiet, else quiet it; nothing
    once it is asked to stop (a stop cannot be undone)."""
    if w.control == "stop":
        return None
    return "resume" if w.control == "quiet" else "quiet"


class WorkersPane(KindsPane):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("Z", "quiet_worker", "Quiet/resume", id="worker.quiet"),
        Binding("X", "stop_worker", "Stop worker", id="worker.stop"),
    ]
    kinds_table = "#worker-kinds"
    main_table = "#workers-table"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.worker_rows: dict[str, WorkerRow] = {}
        self._table = "workers-table"  # the table focused last (see DeadPane)
        self._offered: tuple[bool, bool] | None = None

    def compose(self) -> ComposeResult:
        yield WrappingInfo(id="workers-info", classes="info")
        yield KeyedTable(id="workers-table")
        yield KeyedTable(id="worker-kinds")

    def on_mount(self) -> None:
        self.query_one("#workers-table", KeyedTable).setup_columns(
            Column("id", "id", 20, priority=0),
            Column("hb", "heartbeat", 11, priority=0),
            Column("control", "state", 12, priority=0),
            Column("running", "run/max", 7, priority=1, fit=True),
            Column("wake", "woken by", 10, priority=1),
            Column("abandoned", "aband", 5, priority=2, fit=True),
            Column("errors", "out.err", 7, priority=2, fit=True),
            Column("kinds", "kinds", 16, priority=3, flex=True),
            # host and pid are in the id too: they drop first.
            Column("host", "host", 14, priority=5),
            Column("pid", "pid", 7, priority=5, fit=True),
            Column("up", "up", 6, priority=4, fit=True),
        )
        self.query_one("#worker-kinds", KeyedTable).setup_columns(
            Column("kind", "kind", WORKER_KIND_WIDTH, priority=0),
            Column("state", "state", 7, priority=0),
            Column("workers", "workers", 7, priority=0, fit=True),
            Column("ready", "ready", 7, priority=1, fit=True),
            Column("running", "running", 7, priority=2, fit=True),
            Column("dead", "dead", 7, priority=1, fit=True),
            Column("limit", "limit", 9, priority=3),
        )
        self.query_one("#workers-table").border_title = "workers (Z quiet/resume · X stop)"
        self.query_one("#worker-kinds").border_title = "kinds (P pause/resume · L limits)"

    def show(self, snap: Snapshot) -> None:
        self.snapshot = snap
        st = cell_styles(self.app)
        now = snap.taken_at  # the server's clock, like the heartbeat ages
        rows = []
        workers = sorted(snap.workers, key=lambda w: (not w.stale, w.id))
        self.worker_rows = {w.id: w for w in workers}
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
                        Text(control_text(w), style=style or "bold"),
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
                        inert(kind_label(name, names, WORKER_KIND_WIDTH), style="bold"),
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
        self._offer()

    def _summary(self, snap: Snapshot, st: CellStyles) -> None:
        live = [w for w in snap.workers if not w.stale]
        polling = [w for w in live if w.wakeup_mode != "listen" or not w.listen_connected]
        abandoned = sum(w.abandoned for w in live)
        errors = [w for w in snap.workers if w.outcome_errors]
        parts: list[Text | str] = [Text(f"{len(live)} live", style="bold")]
        stale = len(snap.workers) - len(live)
        if stale:
            parts.append(Text(f" · {stale} stale", style=st.error))
        asked = Counter(control_text(w) for w in live)
        for state in ("quiet asked", "quiet", "resume asked", "stop asked", "stopping"):
            if asked[state]:
                parts.append(Text(f" · {asked[state]} {state}", style="bold"))
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

    # --- quiet, resume, stop a worker (the app confirms and writes: jobtui.tui.app) --------

    def current_worker(self) -> WorkerRow | None:
        key = self.query_one("#workers-table", KeyedTable).current_key
        return self.worker_rows.get(key) if key is not None else None

    def _can(self) -> tuple[bool, bool]:
        """(Z can act, X can act) on the worker under the cursor."""
        w = self.current_worker()
        if w is None:
            return False, False
        return quiet_key_action(w) is not None, w.control != "stop"

    def _offer(self) -> None:
        """Redraw the footer only when what Z and X can do changed (a footer redraw is a full
        line sent to the terminal)."""
        offered = self._can()
        if offered != self._offered:
            self._offered = offered
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        allowed = super().check_action(action, parameters)
        if not allowed:
            return allowed
        # Each table's keys are offered while it has the focus, so the footer names only
        # keys about the row under the cursor the operator sees (and fits in 80 columns).
        if action in KIND_KEYS:
            return self._table == "worker-kinds"
        if action not in WORKER_KEYS:
            return allowed
        if self._table != "workers-table":
            return False
        # None: shown greyed in the footer, and the key does nothing.
        return True if self._can()[WORKER_KEYS.index(action)] else None

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        if isinstance(event.widget, KeyedTable) and event.widget.id != self._table:
            self._table = event.widget.id or ""
            self.refresh_bindings()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "workers-table":
            self._offer()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a kind opens its kind screen (as on the Overview)."""
        event.stop()
        kinds = self.query_one("#worker-kinds", KeyedTable)
        if event.data_table is kinds and not kinds.on_ghost and event.row_key.value is not None:
            self.post_message(KindChosen(str(event.row_key.value)))

    def action_quiet_worker(self) -> None:
        w = self.current_worker()
        action = quiet_key_action(w) if w is not None else None
        if w is not None and action is not None:
            self.post_message(WorkerControlAsked(w.id, action))

    def action_stop_worker(self) -> None:
        w = self.current_worker()
        if w is not None and w.control != "stop":
            self.post_message(WorkerControlAsked(w.id, "stop"))

    def palette_commands(self) -> list[tuple[str, str, str]]:
        if self._table == "worker-kinds":
            return super().palette_commands()
        out: list[tuple[str, str, str]] = []
        w = self.current_worker()
        if w is None or self.console.read_only:
            return out
        action = quiet_key_action(w)
        if action is not None:
            verb, note = WORKER_ACTIONS[action]
            out.append((f"{verb} worker {w.id}", note, "quiet_worker"))
        if w.control != "stop":
            verb, note = WORKER_ACTIONS["stop"]
            out.append((f"{verb} worker {w.id}", note, "stop_worker"))
        return out


def wakeup_cell(w: WorkerRow, st: CellStyles) -> Text:
    """`listen`, or POLL and its interval (highlighted): how soon this worker sees a new job."""
    if w.stale:
        return Text(w.wakeup_mode, style=st.error)
    if w.wakeup_mode == "listen" and w.listen_connected:
        return Text("listen", style=st.success)
    if w.wakeup_mode == "listen":
        return Text("LISTEN LOST", style=st.error)
    return Text(f"POLL {w.poll_interval_s:g}s", style=f"bold {st.warning}")
