"""Overview tab: headline tiles, hour-long sparklines, and the per-kind table.

BINDINGS:
    P        pause or resume the kind under the cursor
    L        set the kind's concurrency and rate limits (asks first)
    enter    show that kind's jobs

The `limit` column shows the limits in force: `≤5` running at most, `2/w` per worker, `100/m`
starts per minute. Rows a consumer gave up on (attempts used up, never moved to dead letters)
are counted as EXHAUSTED in the status, never as ready.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.events import Resize
from textual.widgets import DataTable

from jobtui.inert import inert
from jobtui.models import KindFigures, Snapshot
from jobtui.tui.host import KindChosen
from jobtui.tui.palette import cell_styles, level_of
from jobtui.tui.panes.kinds import KindsPane, limit_text
from jobtui.tui.texts import coarse_age
from jobtui.tui.widgets.keyed_table import Column, KeyedTable
from jobtui.tui.widgets.tiles import Spark, Tile

FAILING_RATE = 0.10
NARROW_BELOW = 80  # columns: tiles on one line each, below this
SPARKS_FROM_ROWS = 24  # rows: sparklines only on a screen at least this tall


def compact(n: float) -> str:
    """12, 1.2k, 3.4M: numbers that fit a narrow tile."""
    if n < 1000:
        return f"{n:.0f}" if float(n).is_integer() else f"{n:.1f}"
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f}ms" if value < 1000 else f"{value / 1000:.1f}s"


class OverviewPane(KindsPane):
    kinds_table = "#kinds"
    main_table = "#kinds"

    def compose(self) -> ComposeResult:
        with Horizontal(id="tiles"):
            yield Tile("ready", id="t-ready")
            yield Tile("sched", id="t-scheduled")
            yield Tile("running", "run", id="t-running")
            yield Tile("retry", id="t-retrying")
            yield Tile("dead", id="t-dead")
            yield Tile("oldest", "old", id="t-oldest")
            yield Tile("done/m", id="t-done")
            yield Tile("fail", id="t-fail")
        with Horizontal(id="sparks"):
            yield Spark("depth", id="s-depth")
            yield Spark("oldest age", id="s-oldest")
            yield Spark("done/min", id="s-done")
        yield KeyedTable(id="kinds")

    def on_mount(self) -> None:
        # What says something is wrong first (status: FAIL, PAUSED, no worker; the oldest
        # ready age); it takes the spare width. The rest drop from the right as space runs out.
        self.query_one("#kinds", KeyedTable).setup_columns(
            Column("kind", "kind", 15, priority=0),
            Column("ready", "ready", 5, priority=1),
            Column("status", "status", 27, priority=0, flex=True),
            Column("oldest", "oldest", 6, priority=0),
            Column("dead", "dead", 5, priority=2),
            Column("fail", "fail%", 5, priority=3),
            Column("running", "run", 4, priority=4),
            Column("retrying", "retry", 5, priority=4),
            Column("done", "done/m", 6, priority=5),
            Column("limit", "limit", 9, priority=6),
            Column("p95", "p95", 6, priority=7),
            Column("p50", "p50", 6, priority=8),
        )

    def on_resize(self, event: Resize) -> None:
        """Below 80 columns the tiles go one line each, four to a row; on a short screen the
        sparklines make way for the kinds (what is wrong is in the table, not the trend)."""
        narrow = self.app.size.width < NARROW_BELOW
        self.query_one("#tiles").set_class(narrow, "-narrow")
        for tile in self.query(Tile):
            tile.set_narrow(narrow)
        self.query_one("#sparks").display = self.app.size.height >= SPARKS_FROM_ROWS

    def _trouble(self, k: KindFigures) -> int:
        cfg = self.console.config
        level = level_of(k.oldest_ready_age_s, cfg.oldest_warn_s, cfg.oldest_crit_s)
        score = {"ok": 0, "warn": 2, "crit": 4}[level]
        if k.failure_rate >= FAILING_RATE:
            score += 4
        if not k.handled and (k.ready or k.retrying or k.scheduled):
            score += 3
        if k.paused:
            score += 1
        if k.dead or k.exhausted:
            score += 1
        return score

    def show(self, snap: Snapshot) -> None:
        self.snapshot = snap
        cfg = self.console.config
        t = snap.totals
        for tile_id, value in (
            ("#t-ready", t.ready),
            ("#t-scheduled", t.scheduled),
            ("#t-running", t.running),
            ("#t-retrying", t.retrying),
        ):
            self.query_one(tile_id, Tile).set(compact(value))
        self.query_one("#t-dead", Tile).set(
            compact(t.dead), "crit" if t.dead else None, " ✗" if t.dead else ""
        )
        level = level_of(snap.oldest_ready_age_s, cfg.oldest_warn_s, cfg.oldest_crit_s)
        note = {"ok": "", "warn": " !", "crit": " !!"}[level]
        self.query_one("#t-oldest", Tile).set(coarse_age(snap.oldest_ready_age_s), level, note)
        self.query_one("#t-done", Tile).set(compact(round(snap.done_per_min, 1)))
        fail_level = "crit" if snap.failure_rate >= FAILING_RATE else None
        self.query_one("#t-fail", Tile).set(
            f"{snap.failure_rate * 100:.1f}%", fail_level, " ✗" if fail_level else ""
        )

        history = snap.history
        depth = [float(p.ready or 0) for p in history]
        oldest = [float(p.oldest_ready_age_s or 0) for p in history]
        done = [float(p.done) for p in history]
        self.query_one("#s-depth", Spark).set(
            depth, compact(t.ready), compact(max(depth, default=0))
        )
        self.query_one("#s-oldest", Spark).set(
            oldest,
            coarse_age(snap.oldest_ready_age_s),
            coarse_age(max(oldest, default=0)),
        )
        self.query_one("#s-done", Spark).set(
            done, f"{compact(round(snap.done_per_min, 1))}/m", compact(max(done, default=0))
        )

        st = cell_styles(self.app)
        # By trouble, then by name: not by age, which changes on every refresh and would
        # re-sort the rows under the operator's cursor.
        kinds = sorted(snap.kinds, key=lambda k: (-self._trouble(k), k.kind))
        rows = []
        for k in kinds:
            failing = k.failure_rate >= FAILING_RATE
            age_level = level_of(k.oldest_ready_age_s, cfg.oldest_warn_s, cfg.oldest_crit_s)
            row_style = st.error if failing else ""
            notes = []
            if failing:
                notes.append("✗ FAIL")
            if k.paused:
                notes.append("⏸ PAUSED")
            if k.exhausted:
                notes.append(f"{compact(k.exhausted)} EXHAUSTED")
            if not k.handled:
                # In full when it is the only note; short next to others, so all fit.
                notes.append("no worker" if notes else "no worker handles this kind")
            status_style = (
                st.error
                if failing
                else (st.warning if (k.paused or not k.handled or k.exhausted) else st.muted)
            )
            age_style = {"ok": row_style, "warn": st.warning, "crit": st.error}[age_level]
            name = inert(k.kind, style=row_style or "bold")
            rows.append(
                (
                    k.kind,
                    [
                        name,
                        Text(compact(k.ready), style=row_style),
                        Text(", ".join(notes) or "ok", style=status_style),
                        Text(coarse_age(k.oldest_ready_age_s), style=age_style),
                        Text(compact(k.dead), style=st.error if k.dead else row_style),
                        Text(f"{k.failure_rate * 100:.0f}%", style=row_style),
                        Text(compact(k.running), style=row_style),
                        Text(compact(k.retrying), style=row_style),
                        Text(compact(round(k.done_per_min, 1)), style=row_style),
                        Text(limit_text(k), style=st.accent),
                        Text(_ms(k.p95_ms), style=row_style),
                        Text(_ms(k.p50_ms), style=row_style),
                    ],
                )
            )
        self.query_one("#kinds", KeyedTable).sync(rows)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(KindChosen(str(event.row_key.value)))
