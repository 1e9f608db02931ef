"""Pure parts of the console: the filter language and text comparison (escaping: test_inert.py)."""

from __future__ import annotations

import pytest
from rich.text import Text

from jobtui.models import DeadFilter, JobFilter
from jobtui.tui.filters import (
    FilterError,
    format_dead_filter,
    format_job_filter,
    parse_dead_filter,
    parse_job_filter,
)
from jobtui.tui.texts import same


def test_job_filter_round_trip() -> None:
    flt = parse_job_filter('state:ready,running kind:email.send "connection refused" 42')
    assert flt == JobFilter(
        states=("ready", "running"), kind="email.send", text="connection refused 42"
    )
    assert parse_job_filter(format_job_filter(flt)) == flt
    assert parse_job_filter("") == JobFilter()


def test_job_filter_refuses_unknown_state() -> None:
    with pytest.raises(FilterError, match="unknown state 'redy'"):
        parse_job_filter("state:redy")
    with pytest.raises(FilterError, match="needs a value"):
        parse_job_filter("kind:")


def test_dead_filter_round_trip() -> None:
    flt = parse_dead_filter('kind:billing sig:"CardDeclined: card ending N" error:timeout 17')
    assert flt == DeadFilter(
        kind="billing", signature="CardDeclined: card ending N", error="timeout", text="17"
    )
    assert parse_dead_filter(format_dead_filter(flt)) == flt


def test_unbalanced_quotes_do_not_crash() -> None:
    assert parse_dead_filter('error:"oops').error == '"oops'


def test_nothing_outside_tui_imports_textual() -> None:
    import re
    from pathlib import Path

    import jobtui

    root = Path(jobtui.__file__).parent
    pattern = re.compile(r"^\s*(import textual|from textual)\b", re.MULTILINE)  # not textual_serve
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "tui" not in path.relative_to(root).parts and pattern.search(path.read_text("utf-8"))
    ]
    assert offenders == []


def test_same_text_sees_style_changes() -> None:
    """Widgets skip redraws of equal texts; a colour change alone must still count."""
    assert Text("5", style="red") == Text("5")  # rich's own equality ignores the style
    assert not same(Text("5", style="red"), Text("5"))
    assert not same(Text.assemble(("5", "bold")), Text.assemble("5"))
    assert not same("5", Text("5"))
    assert same(Text.assemble(("a", "dim"), "b"), Text.assemble(("a", "dim"), "b"))


def test_coarse_age_ticks_rarely() -> None:
    from jobtui.tui.texts import coarse_age

    assert [coarse_age(s) for s in (0, 3, 16, 44, 119, 120, 3599, 3600, 90000)] == [
        "15s", "15s", "30s", "45s", "1m", "2m", "59m", "1h00m", "1d1h",
    ]  # fmt: skip
    # Under a minute in quarter minutes: a young row of a live table redraws at most 3 times
    # in its first minute (it was 11 times in 5 s steps).
    assert len({coarse_age(s) for s in range(60)}) == 4
    # Issue 26 item 13: past a minute an age moves in minutes (a static row a minute old
    # no longer redraws every 5 s).
    assert len({coarse_age(s) for s in range(60, 120)}) == 1
    # … and from 45 s on: "1m" follows "45s" (a "60s" between them was one redraw more).
    assert [coarse_age(s) for s in (45, 46, 59, 60)] == ["45s", "1m", "1m", "1m"]
    assert coarse_age(None) == "–"
    # Between 2 min and 1 h the text changes once a minute, not once a second.
    assert len({coarse_age(s) for s in range(600, 660)}) == 1


def test_differing_part_keeps_the_difference_in_view() -> None:
    from jobtui.tui.texts import differing_part

    head = "ConnectTimeout: host api.example.com did not answer in time while posting "
    a, b = head + "/orders", head + "/refunds"
    assert differing_part("short", [a, b], 20) == "short"
    shown = {differing_part(x, [a, b], 30) for x in (a, b)}
    assert len(shown) == 2 and all(len(s) <= 30 and s.startswith("…") for s in shown)
    assert differing_part(a, [a, b], 30).endswith("/orders")
    assert differing_part(a, [a], 30) == a  # nothing to tell apart: the table cuts the end


def test_sort_value_reads_figures_back() -> None:
    from jobtui.tui.sorting import sort_value

    cells = ["10", "9", "1.2k", "3m", "1h05m", "in 4m", "45s", "12%", "abc", "250ms", "1/5"]
    ordered = sorted(cells, key=sort_value)
    assert ordered.index("9") < ordered.index("10") < ordered.index("1.2k")
    assert ordered.index("in 4m") == 0  # a future time sorts before every age
    assert ordered.index("45s") < ordered.index("3m") < ordered.index("1h05m")
    assert ordered[-1] == "abc"  # text after numbers
    assert sort_value("250ms") < sort_value("1/5")


def test_fit_columns_drops_by_priority_and_gives_the_rest_to_flex() -> None:
    from jobtui.tui.widgets.keyed_table import Column, fit_columns

    cols = [
        Column("kind", "kind", 10, priority=0),
        Column("status", "status", 10, priority=0, flex=True),
        Column("a", "a", 10, priority=2),
        Column("b", "b", 10, priority=1),
    ]
    assert fit_columns(cols, 100, 0) == (["kind", "status", "a", "b"], 52)
    shown, spare = fit_columns(cols, 41, 0)  # 12 + 12 + 12 (b) + "+1→" 5 = 41
    assert shown == ["kind", "status", "b"] and spare == 0
    shown, spare = fit_columns(cols, 20, 0)  # the never-dropped ones shrink the flex column
    assert shown == ["kind", "status"] and spare == -5  # at most half its width


def test_kind_prefix_resolves_or_names_the_candidates() -> None:
    from jobtui.tui.filters import complete_kind, resolve_kind

    known = ["email.send", "email.digest", "sms.send"]
    assert parse_job_filter("kind:sms", known).kind == "sms.send"
    assert parse_dead_filter("kind:EMAIL.S", known).kind == "email.send"
    with pytest.raises(FilterError, match="matches 2 kinds"):
        parse_job_filter("kind:email", known)
    assert resolve_kind("gone.kind", known) == "gone.kind"  # finished-only kinds still work
    assert resolve_kind("email", []) == "email"  # no list: as typed
    assert complete_kind("state:ready kind:sm", known) == "state:ready kind:sms.send"
    assert complete_kind("kind:", known) is None and complete_kind("text", known) is None


def test_live_figures_move_in_steps_nobody_acts_on() -> None:
    """Issue 26 item 13 (round four): what ticked on every refresh of the live demo moves in
    coarser steps: the header's db time, the alarm line's failure rate, the kinds' run times."""
    from jobtui.alerts import MEASURES, Level, Verdict
    from jobtui.tui.app import db_time_text
    from jobtui.tui.panes.overview import _ms
    from jobtui.tui.widgets.alarms import steady_text

    assert {db_time_text(ms) for ms in (3, 9, 12, 27, 49)} == {"<50 ms"}
    assert db_time_text(130) == "100 ms" and db_time_text(1500) == "1.5 s"
    rates = [0.416, 0.419, 0.423, 0.4249]
    said = {
        steady_text(
            Verdict(
                "failure_rate", "export_crm", Level.CRIT, r, 0.3,
                f"export_crm: failure rate {MEASURES['failure_rate'].shown(r)} > 30%",
            )
        )
        for r in rates
    }  # fmt: skip
    assert said == {"export_crm: failure rate 42% > 30%"}
    assert {_ms(v) for v in (851, 850, 846, 848)} == {"850ms"}
    assert [_ms(v) for v in (None, 7.4, 99.6, 996, 4830)] == ["–", "7ms", "100ms", "1.0s", "4.8s"]
