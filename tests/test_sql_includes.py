"""The SQL loader's `__statement:NAME__` includes: resolved whole, checked at load."""

from __future__ import annotations

import pytest

from jobtui.sql import queries, resolve_includes


def test_an_included_statement_is_resolved_with_its_own_includes() -> None:
    sql = {
        "a": "SELECT * FROM (__statement:b__) x",
        "b": "SELECT * FROM (__statement:c__) y",
        "c": "SELECT 1",
    }
    assert resolve_includes(sql)["a"] == "SELECT * FROM (SELECT * FROM (SELECT 1) y) x"


def test_an_unknown_name_is_a_clear_error_naming_the_statement() -> None:
    with pytest.raises(ValueError, match="'a' includes unknown statement 'nope'"):
        resolve_includes({"a": "SELECT * FROM (__statement:nope__) x"})


def test_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match="includes itself"):
        resolve_includes({"a": "__statement:b__", "b": "__statement:a__"})


def test_an_included_bare_percent_is_refused_placeholders_and_escapes_are_not() -> None:
    with pytest.raises(ValueError, match="bare '%'"):
        resolve_includes({"a": "__statement:b__", "b": "SELECT 'x' LIKE 'a%'"})
    ok = resolve_includes({"a": "__statement:b__", "b": "SELECT %(n)s, 'a%%'"})
    assert ok["a"] == "SELECT %(n)s, 'a%%'"


def test_the_queue_sample_includes_the_state_counts_in_its_own_schema() -> None:
    q = queries("other_schema")
    assert "__statement:" not in q.worker_queue_sample
    assert "__schema__" not in q.worker_queue_sample
    assert q.metrics_state_counts in q.worker_queue_sample
    assert '"public"' not in q.worker_queue_sample
