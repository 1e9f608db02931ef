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
    pattern = re.compile(r"^\s*(import textual|from textual)", re.MULTILINE)
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
