"""`jobtui jobs why ID`: the answer as text and JSON, and one-line errors for a bad id."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
from test_cli_support import assert_ok, assert_one_error, run_cli

from jobtui.enqueue import enqueue


def test_why_text_and_json(dsn: str, conn: psycopg.Connection) -> None:
    job = enqueue(conn, "report", {}, delay=timedelta(hours=2))
    text = assert_ok(run_cli("jobs", "why", str(job), dsn=dsn))
    lines = text.splitlines()
    assert lines[0] == f"job {job} (report): scheduled"
    assert lines[1].startswith("- it is scheduled for later: ")
    assert lines[2] == "- no live worker handles kind 'report'"
    assert len(lines) == 3
    data = json.loads(assert_ok(run_cli("jobs", "why", str(job), "--json", dsn=dsn)))
    assert data["id"] == job and data["state"] == "scheduled" and data["position"] is None
    assert [r["code"] for r in data["reasons"]] == ["scheduled", "no_worker"]
    assert all(r["blocking"] for r in data["reasons"])


def test_why_hostile_kind_is_inert(dsn: str, conn: psycopg.Connection) -> None:
    job = enqueue(conn, "evil\x1b[2J", {})
    text = assert_ok(run_cli("jobs", "why", str(job), dsn=dsn))
    assert "\x1b" not in text and "evil" in text


def test_why_bad_ids(dsn: str) -> None:
    assert_one_error(
        run_cli("jobs", "why", "987654", dsn=dsn), 1, "no job or dead letter with id 987654"
    )
    assert_one_error(run_cli("jobs", "why", "abc", dsn=dsn), 2, "job ids are whole numbers")
    assert_one_error(run_cli("jobs", "why", "0", dsn=dsn), 2, "job ids are positive")
