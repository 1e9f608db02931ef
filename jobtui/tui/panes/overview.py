"""Overview tab: the alarms firing, headline tiles, hour-long sparklines, the per-kind table.

BINDINGS:
    A        every alarm firing (the list above shows the first few)
    P        pause or resume the kind under the cursor
    L        set the kind's concurrency and rate limits (asks first)
    enter    show that kind's jobs

Every warning and critical mark here comes from the alert rules (`jobtui.alerts.evaluate` on
the snapshot, with the config file's rules): the alarm list on the first line, the tiles' and
the kinds' levels. `jobtui check` judges the same rules, so the two cannot disagree.

The `limit` column shows the limits in force: `≤5` running at most, `2/w` per worker, `100/m`
starts per minute. The `drain` column estimates when the kind's ready backlog is gone at the
last minutes' rates (`~4m`), says `! not draining` when arrivals keep up with completions, and
is empty with no backlog. Rows a consumer gave up on (attempts used up, never moved to dead
letters) are counted as EXHAUSTED in the status, never as ready.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.widgets import DataTable

from jobtui import alerts
from jobtui.alerts import Firing, Level
from jobtui.inert import inert
from jobtui.models import KindFigures, Snapshot
from jobtui.tui.host import KindChosen, host
from jobtui.tui.keys import key_display
from jobtui.tui.palette import CellStyles, cell_styles
from jobtui.tui.panes.kinds import KindsPane, limit_text
from jobtui.tui.screens.alarms import AlarmsScreen
from jobtui.tui.texts import KIND_COLUMN_WIDTH, coarse_age, coarse_seconds, drain_text, kind_label
from jobtui.tui.widgets.alarms import AlarmList
from jobtui.tui.widgets.keyed_table import Column, KeyedTable
from jobtui.tui.widgets.tiles import Spark, Tile

NARROW_BELOW = 80  # columns: tiles on one line each, below this
SPARKS_FROM_ROWS = 24  # rows: sparklines only on a screen at least this tall
KIND_WIDTH = (6, KIND_COLUMN_WIDTH)  # the kind column fits the longest name within these widths
STATUS_WIDTH = 27  # the kinds' status column, when the screen has room
STATUS_AT_LEAST = 12  # cells the status keeps before a figure drops ("✗ FAIL, ⏸ P…")
STATUS_SHRINK = STATUS_WIDTH - STATUS_AT_LEAST
TILE_LEVEL = {Level.OK: "ok", Level.WARN: "warn", Level.CRIT: "crit"}
TILE_NOTE = {Level.OK: "", Level.WARN: " !", Level.CRIT: " !!"}
# Rules whose cell alone would not say it in the status column (fail, paused, exhausted and no
# worker have their own words above).
RULE_NOTES = {
    "oldest_ready": "OLD",
    "dead_letters": "DEAD",
    "drain_time": "DRAIN",
    "ready": "BACKLOG",
}
TROUBLE = {Level.WARN: 2, Level.CRIT: 4}  # how much a firing rule lifts its kind in the table


def compact(n: float) -> str:
    """12, 1.2k, 3.4M: numbers that fit a narrow tile."""
    if n < 1000:
        return f"{n:.0f}" if float(n).is_integer() else f"{n:.1f}"
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _ms(value: float | None) -> str:
    """A run time to two significant figures (`850ms`, `4.8s`): a live p95 moved by a
    millisecond or two on every refresh (`851ms`, `850ms`), a redraw of its row for nothing."""
    if value is None:
        return "–"
    shown = round(value) if value < 100 else round(value, -1)
    return f"{shown:.0f}ms" if shown < 1000 else f"{value / 1000:.1f}s"


def kind_columns(kind_width: int) -> list[Column]:
    """The kinds table's columns. What says something is wrong never drops (the status: FAIL,
    PAUSED, no worker; the oldest ready age), and the status gives up to all but
    `STATUS_AT_LEAST` cells (its words shorten, ending in `…`) before a figure drops: at 60
    columns a kind with a 15-letter name and three problems keeps its dead letters in view
    (the status then shows the first problem or two; the kind screen and the alarms say all).
    Then the figures drop from the least asked for: at 80 columns the depth (ready), the
    oldest age, the dead letters and the run time (p95) stay beside the status, then the
    failure rate. The kind column is as wide as
    the longest name (at most 15, then `…`); figures are never cut (`fit`). A kind's retrying
    jobs are in its kind screen (enter) and the retry tile, not a column."""
    return [
        Column("kind", "kind", kind_width, priority=0),
        Column("ready", "ready", 5, priority=1, fit=True),
        Column("status", "status", STATUS_WIDTH, priority=0, flex=True, shrink=STATUS_SHRINK),
        Column("oldest", "oldest", 6, priority=0, fit=True),
        Column("dead", "dead", 5, priority=2, fit=True),
        Column("p95", "p95", 6, priority=3, fit=True),
        Column("fail", "fail%", 5, priority=4, fit=True),
        Column("drain", "drain", 14, priority=5),
        Column("done", "done/m", 6, priority=6, fit=True),
        Column("running", "run", 4, priority=7, fit=True),
        Column("limit", "limit", 9, priority=8),
        Column("p50", "p50", 6, priority=9, fit=True),
    ]


FIGURES_EVERY_S = 6.0  # seconds: the live figures' redraw, while the same alarms fire
SAMPLES_LATE = 2  # minutes: a sample this late means no worker writes them now


def samples_stopped(snap: Snapshot) -> str | None:
    """`stopped 14m ago` / `no worker samples` when the queue samples (written by
    workers) stopped, so a chart of them would be stale; None while they are current."""
    sampled = [i for i, p in enumerate(snap.history) if p.ready is not None]
    if not snap.history:
        return None
    if not sampled:
        return "no worker samples"  # whole in a chart 26 columns wide (80 columns)
    late = len(snap.history) - 1 - sampled[-1]
    if late < SAMPLES_LATE:
        return None
    return f"stopped {late}m ago"


def worst(firings: list[Firing], rule: str) -> Level:
    """The highest level at which `rule` fires, for any kind or the whole queue."""
    return max((f.level for f in firings if f.rule == rule), default=Level.OK)


def level_style(level: Level, st: CellStyles, calm: str = "") -> str:
    return {Level.OK: calm, Level.WARN: st.warning, Level.CRIT: st.error}[level]


class OverviewPane(KindsPane):
    # The alarms firing (rule, kind, level) and the kinds, as last drawn.
    _shape: tuple[tuple[tuple[str, str | None, Level], ...], tuple[str, ...]] | None = None
    _drawn_at = 0.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("A", "alarms", "Alarms", id="overview.alarms"),
    ]
    kinds_table = "#kinds"
    main_table = "#kinds"
    kind_width = KIND_WIDTH[1]

    def compose(self) -> ComposeResult:
        # The count line names the key that opens every alarm as the keymap binds it.
        keys = host(self.app).config.keymap.get("overview.alarms", "A")
        yield AlarmList(key=key_display(keys), id="alarms")
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
        self.query_one("#kinds", KeyedTable).setup_columns(*kind_columns(self.kind_width))

    def on_resize(self, event: Resize) -> None:
        """Below 80 columns the tiles go one line each, four to a row; on a short screen the
        sparklines make way for the kinds (what is wrong is in the table, not the trend)."""
        narrow = self.app.size.width < NARROW_BELOW
        self.query_one("#tiles").set_class(narrow, "-narrow")
        for tile in self.query(Tile):
            tile.set_narrow(narrow)
        self.query_one("#sparks").display = self.app.size.height >= SPARKS_FROM_ROWS

    def _fit_kind_column(self, kinds: list[Text]) -> None:
        """Size the kind column to the longest name; the table is laid out again only when
        that width changes (kinds come or go), never on an ordinary refresh."""
        low, high = KIND_WIDTH
        width = min(high, max([low, *(k.cell_len for k in kinds)]))
        if width != self.kind_width:
            self.kind_width = width
            self.query_one("#kinds", KeyedTable).setup_columns(*kind_columns(width))

    def show(self, snap: Snapshot) -> None:
        self.snapshot = snap
        firings = alerts.evaluate(snap, self.console.config.alerts)
        # While the same alarms fire for the same kinds, the figures are redrawn at most every
        # FIGURES_EVERY_S (live, every count changes on every refresh: most of what the
        # Overview sent); a new alarm, a kind coming or going, or a key pressed shows at once.
        # An alarm that stops firing (or drops a level) waits for the next redraw like the
        # figures: a failure rate at its threshold flapped the alarm, the tiles, the charts
        # and the kinds' rows on and off every refresh (most of a loud window's bytes).
        now = time.monotonic()
        shape = (
            tuple((f.rule, f.kind, f.level) for f in firings),
            tuple(sorted(k.kind for k in snap.kinds)),
        )
        if not self._news(shape) and now - self._drawn_at < FIGURES_EVERY_S:
            return
        self._shape, self._drawn_at = shape, now
        self.query_one("#alarms", AlarmList).show(firings)
        self._show_tiles(snap, firings)
        self._show_sparks(snap)
        marks = alerts.by_kind(firings)
        st = cell_styles(self.app)

        def trouble(k: KindFigures) -> int:
            levels = marks.get(k.kind, {}).values()
            return sum(TROUBLE[lv] for lv in levels) + k.paused + bool(k.exhausted)

        # By trouble (the rules firing for the kind), then by name: not by age, which changes
        # on every refresh and would re-sort the rows under the operator's cursor.
        kinds = sorted(snap.kinds, key=lambda k: (-trouble(k), k.kind))
        names = [k.kind for k in kinds]
        rows = [
            (
                k.kind,
                self._cells(k, kind_label(k.kind, names, KIND_WIDTH[1]), marks.get(k.kind, {}), st),
            )
            for k in kinds
        ]
        self._fit_kind_column([row[0] for _, row in rows])
        self.query_one("#kinds", KeyedTable).sync(rows)

    def _news(
        self, shape: tuple[tuple[tuple[str, str | None, Level], ...], tuple[str, ...]]
    ) -> bool:
        """Whether `shape` (the alarms firing, the kinds) has something the screen must show
        at once: a kind come or gone, or an alarm new or worse than the one drawn."""
        if self._shape is None or shape[1] != self._shape[1]:
            return True
        drawn = {(rule, kind): level for rule, kind, level in self._shape[0]}
        return any(drawn.get((rule, kind), Level.OK) < level for rule, kind, level in shape[0])

    def _show_tiles(self, snap: Snapshot, firings: list[Firing]) -> None:
        t = snap.totals
        for tile_id, value in (
            ("#t-ready", t.ready),
            ("#t-scheduled", t.scheduled),
            ("#t-running", t.running),
            ("#t-retrying", t.retrying),
        ):
            self.query_one(tile_id, Tile).set(compact(value))
        # A dead letter always waits for an operator's decision: the tile stands out whenever
        # there is one (the rule's level is in the alarm list and the kinds' dead column).
        self.query_one("#t-dead", Tile).set(
            compact(t.dead), "crit" if t.dead else None, " ✗" if t.dead else ""
        )
        oldest = worst(firings, "oldest_ready")
        self.query_one("#t-oldest", Tile).set(
            coarse_age(snap.oldest_ready_age_s), TILE_LEVEL[oldest], TILE_NOTE[oldest]
        )
        self.query_one("#t-done", Tile).set(compact(round(snap.done_per_min, 1)))
        failing = worst(firings, "failure_rate")
        self.query_one("#t-fail", Tile).set(
            f"{snap.failure_rate * 100:.1f}%",
            TILE_LEVEL[failing] if failing else None,
            TILE_NOTE[failing],
        )

    def _show_sparks(self, snap: Snapshot) -> None:
        """The hour's charts. Depth and oldest age come from the samples workers write once a
        minute; when the samples stop the chart says since when instead of a peak it no longer
        knows, and its last point is the figure read now (it exists without a worker). The
        titles name the chart only: the tiles above show the figures now, and a title that
        changed on every refresh redrew the chart's border."""
        history = snap.history
        depth = [float(p.ready or 0) for p in history]
        oldest = [float(p.oldest_ready_age_s or 0) for p in history]
        done = [float(p.done) for p in history]
        stopped = samples_stopped(snap)
        if history and stopped:
            # No worker samples: the figures read now are the only current point. (While
            # samples come, the chart moves once a minute: a live last point redrew all three
            # charts on every refresh, most of the live Overview's bytes.)
            depth[-1] = float(snap.totals.ready)
            oldest[-1] = coarse_seconds(snap.oldest_ready_age_s)
        self.query_one("#s-depth", Spark).set(depth, "", compact(max(depth, default=0)), stopped)
        self.query_one("#s-oldest", Spark).set(
            oldest, "", coarse_age(max(oldest, default=0)), stopped
        )
        # Finished minutes only: the current minute's count grows on every refresh, and a
        # chart whose last bar grows is redrawn (border and all) every 2 s.
        done = done[:-1] or [0.0]
        self.query_one("#s-done", Spark).set(done, "", compact(max(done, default=0)))

    @staticmethod
    def _cells(
        k: KindFigures, label: str, fired: Mapping[str, Level], st: CellStyles
    ) -> list[Text]:
        """One kind's cells (`label`: its name as shown), each rule's level marking the cell of
        the figure it judges."""

        def level(rule: str) -> Level:
            return fired.get(rule, Level.OK)

        failing = level("failure_rate")
        row_style = level_style(failing, st)
        # What stops work first (as the alarms are ordered): failing, paused, no worker,
        # then what else fires, critical first. "no worker" is in full only when alone.
        notes = []
        if failing:
            notes.append("✗ FAIL")
        if k.paused:
            notes.append("⏸ PAUSED")
        if not k.handled:
            notes.append("no worker")
        if k.exhausted:
            notes.append(f"{compact(k.exhausted)} EXHAUSTED")
        # Every other rule that fires for the kind is named here too, so "ok" means that
        # nothing fires (the alarm line above lists the same rules, with their figures).
        fired_notes = [
            (level(rule), f"{'✗' if level(rule) is Level.CRIT else '!'} {word}")
            for rule, word in RULE_NOTES.items()
            if level(rule)
        ]
        notes += [note for _, note in sorted(fired_notes, key=lambda n: -n[0])]
        if notes == ["no worker"]:
            notes = ["no worker handles this kind"]
        status_level = max([failing, level("no_worker"), *(level(r) for r in RULE_NOTES)])
        status_style = level_style(status_level, st, "bold" if notes else st.muted)
        drain = drain_text(k.drain_s, k.not_draining)
        drain_style = level_style(level("drain_time"), st, "bold" if k.not_draining else "")
        return [
            inert(label, style=row_style or "bold"),
            Text(compact(k.ready), style=row_style),
            Text(", ".join(notes) or "ok", style=status_style),
            Text(
                coarse_age(k.oldest_ready_age_s),
                style=level_style(level("oldest_ready"), st, row_style),
            ),
            Text(compact(k.dead), style=level_style(level("dead_letters"), st, row_style)),
            Text(_ms(k.p95_ms), style=row_style),
            Text(f"{k.failure_rate * 100:.0f}%", style=row_style),
            Text(drain, style=drain_style),
            Text(compact(round(k.done_per_min, 1)), style=row_style),
            Text(compact(k.running), style=row_style),
            Text(limit_text(k), style=st.accent),
            Text(_ms(k.p50_ms), style=row_style),
        ]

    def action_alarms(self) -> None:
        """Every alarm firing now, in a screen of its own."""
        self.app.push_screen(AlarmsScreen(self.query_one("#alarms", AlarmList).firings))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(KindChosen(str(event.row_key.value)))
