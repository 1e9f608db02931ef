"""Exporting dead letters: JSON Lines and CSV that read back to the same rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb

from jobtui import export
from jobtui.models import DeadFilter

S = "public"


def fill(conn: psycopg.Connection, n: int) -> list[int]:
    rows = conn.execute(
        """INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at,
               run_at, last_error, errors, reason)
           SELECT g, CASE WHEN g %% 3 = 0 THEN 'sms' ELSE 'email' END,
                  %s || jsonb_build_object('n', g), 2, 2, now(), now(),
                  'ValueError: bad "quote", comma' || E'\\nsecond line', %s, 'failed'
           FROM generate_series(1, %s) g
           RETURNING id""",
        (
            Jsonb({"text": 'naïve, "quoted"\nnewline', "nested": {"a": [1, 2]}}),
            Jsonb(
                [
                    {
                        "attempt": 1,
                        "at": "2026-01-01T00:00:00+00:00",
                        "error": "ValueError: x",
                        "traceback": "Traceback (most recent call last):\n  ...",
                        "worker": "h:1:a",
                    }
                ]
            ),
            n,
        ),
    ).fetchall()
    return [r[0] for r in rows]


def db_rows(conn: psycopg.Connection, ids: list[int]) -> dict[int, tuple[object, ...]]:
    got = conn.execute(
        "SELECT id, kind, payload, errors, last_error, error_signature, attempts "
        "FROM dead_letters WHERE id = ANY(%s)",
        (ids,),
    ).fetchall()
    return {r[0]: r[1:] for r in got}


async def test_jsonl_round_trip_across_pages(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, tmp_path: Path
) -> None:
    ids = fill(conn, 2500)
    out = tmp_path / "dead.jsonl"
    n = await export.export_dead(aconn, S, out, flt=DeadFilter(kind="email"))
    emails = [i for i in ids if i % 3]
    assert n == len(emails)
    recs = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    assert [r["id"] for r in recs] == sorted(emails, reverse=True)
    expected = db_rows(conn, emails)
    for r in recs:
        kind, payload, errors, last_error, sig, attempts = expected[r["id"]]
        assert (r["kind"], r["payload"], r["errors"], r["last_error"]) == (
            kind,
            payload,
            errors,
            last_error,
        )
        assert (r["error_signature"], r["attempts"], r["reason"]) == (sig, attempts, "failed")
    assert not list(tmp_path.glob(".*.part"))


async def test_csv_round_trip_by_ids(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, tmp_path: Path
) -> None:
    ids = fill(conn, 20)
    chosen = [ids[0], ids[5], ids[7], 999_999]
    out = tmp_path / "dead.csv"
    assert await export.export_dead(aconn, S, out, ids=chosen, fmt="csv") == 3
    with out.open(encoding="utf-8", newline="") as f:
        recs = list(csv.DictReader(f))
    assert [int(r["id"]) for r in recs] == sorted(chosen[:3], reverse=True)
    expected = db_rows(conn, chosen)
    for r in recs:
        kind, payload, errors, last_error, _sig, attempts = expected[int(r["id"])]
        assert r["kind"] == kind and int(r["attempts"]) == attempts
        assert json.loads(r["payload"]) == payload and json.loads(r["errors"]) == errors
        assert r["last_error"] == last_error
    # ids and filter together narrow each other.
    sms = await export.export_dead(
        aconn, S, tmp_path / "sms.csv", ids=ids, flt=DeadFilter(kind="sms"), fmt="csv"
    )
    assert sms == len([i for i in ids if i % 3 == 0])
    assert await export.export_dead(aconn, S, tmp_path / "none.jsonl", ids=[]) == 0
    assert (tmp_path / "none.jsonl").read_text() == ""


async def test_bad_format_or_path_is_refused(
    aconn: psycopg.AsyncConnection, tmp_path: Path
) -> None:
    with pytest.raises(export.InvalidExport, match="unknown export format"):
        await export.export_dead(aconn, S, tmp_path / "x", fmt="xml")
    with pytest.raises(export.InvalidExport, match="directory"):
        await export.export_dead(aconn, S, tmp_path)
    with pytest.raises(export.InvalidExport, match="cannot write"):
        await export.export_dead(aconn, S, tmp_path / "missing" / "x.jsonl")
    assert list(tmp_path.iterdir()) == []


async def test_no_overwrite_leaves_an_existing_file(
    aconn: psycopg.AsyncConnection, conn: psycopg.Connection, tmp_path: Path
) -> None:
    fill(conn, 3)
    target = tmp_path / "dead.jsonl"
    target.write_text("keep me\n")
    with pytest.raises(export.ExportExists, match="exists; not overwritten"):
        await export.export_dead(aconn, S, target, overwrite=False)
    assert target.read_text() == "keep me\n"
    assert [p.name for p in tmp_path.iterdir()] == ["dead.jsonl"]  # no partial file left
    fresh = tmp_path / "new.jsonl"
    assert await export.export_dead(aconn, S, fresh, overwrite=False) == 3
    assert len(fresh.read_text().splitlines()) == 3
    assert await export.export_dead(aconn, S, target) == 3  # the default replaces, as before
    assert len(target.read_text().splitlines()) == 3


def test_state_dir_and_default_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert export.state_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "jobtui"
    home = Path.home() / ".local" / "state" / "jobtui"
    assert export.state_dir({}) == home
    assert export.state_dir({"XDG_STATE_HOME": "relative/dir"}) == home  # XDG: absolute only
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    path = export.default_export_path("csv")
    assert path.parent == tmp_path / "jobtui" / "exports"
    assert path.name.startswith("jobtui-dead-") and path.suffix == ".csv"
