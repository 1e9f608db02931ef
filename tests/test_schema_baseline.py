"""Issue 24, "the schema in one file": 0024_baseline.sql replaced migrations 0001-0024.

The baseline must build exactly what those files built: tests/data/schema_v24.txt is the
normalised description (jobtui.schema.describe) of the schema they built, made with
`tools/schema_describe.py DSN --fresh` before they were deleted (the same text on PostgreSQL 15
and 18). A database they migrated records their versions and is at the baseline; one they left
at an older version is refused with a one-line message, nothing changed. Later migrations are
held apart by `migrate(..., up_to=24)` (tests/test_schema_v25.py holds the next).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from test_cli_support import assert_ok, assert_one_error, run_cli

from benchmarks.article import ARTICLE_DDL
from jobtui.cli import main
from jobtui.schema import Migration, load_migrations, migrate, migrator
from jobtui.schema.describe import describe

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).parent / "data" / "schema_v24.txt"
# What the previous jobtui recorded in jobtui_migrations once it had applied every file.
OLD_FILES = (
    (1, "initial"),
    (2, "browse_indexes"),
    (3, "pending_kind_covering"),
    (4, "worker_liveness"),
    (5, "worker_wakeups"),
    (6, "dead_letters_keep_unique_key"),
    (7, "claim_by_kind"),
    (10, "unique_jobs"),
    (11, "schedules"),
    (12, "kind_limits"),
    (13, "pending_kind_max_attempts"),
    (14, "audit_one_row_per_action"),
    (15, "dead_letter_counts"),
    (16, "job_counts"),
    (17, "rerun_of"),
    (18, "worker_control_kind_handlers"),
    (19, "cheaper_claim_writes"),
    (20, "one_phase_per_index"),
    (21, "fold_only_when_needed"),
    (22, "kind_flow_minutes"),
    (23, "engine_round_three"),
    (24, "counts_at_any_horizon"),
)


def _versions(conn: psycopg.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT version FROM jobtui_migrations ORDER BY 1")]


def _recorded_by_the_old_files(conn: psycopg.Connection, up_to: int) -> None:
    """The version rows the previous jobtui left after applying its files up to `up_to`."""
    conn.execute("DELETE FROM jobtui_migrations")
    for version, name in OLD_FILES:
        if version <= up_to:
            conn.execute(
                "INSERT INTO jobtui_migrations (version, name) VALUES (%s, %s)", (version, name)
            )


def test_the_baseline_is_the_first_migration_and_version_24() -> None:
    first = load_migrations()[0]
    assert (first.version, first.name) == (24, "baseline")
    assert "__schema__." in first.sql and '"public"' not in first.sql


def test_the_describe_tool_on_a_fresh_schema_prints_the_old_files_schema(empty_dsn: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "schema_describe.py"),
            empty_dsn,
            "--fresh",
            "--up-to",
            "24",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == SNAPSHOT.read_text("utf-8")


@pytest.mark.parametrize("schema", ["public", "Queue_2"])
def test_the_baseline_builds_what_migrations_0001_to_0024_built(
    empty_dsn: str, schema: str
) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert [m.version for m in migrate(conn, schema, up_to=24)] == [24]
        assert describe(conn, schema) == SNAPSHOT.read_text("utf-8")


def test_on_the_articles_table_the_baseline_builds_the_same_and_counts_its_rows(
    empty_dsn: str,
) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(ARTICLE_DDL)
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at) SELECT 'k' || (i % 3), '{}',"
            " now() + (i - 50) * interval '1 hour' FROM generate_series(1, 100) i"
        )
        conn.execute("UPDATE jobs SET attempts = 2 WHERE id % 10 = 0")
        conn.execute("UPDATE jobs SET attempts = 5 WHERE id % 13 = 0")
        conn.execute("UPDATE jobs SET locked_at = now() WHERE id % 7 = 0")
        conn.execute("UPDATE jobs SET finished_at = now() WHERE id % 11 = 0")
        assert [m.version for m in migrate(conn, "public", up_to=24)] == [24]
        assert describe(conn, "public") == SNAPSHOT.read_text("utf-8")
        counted = conn.execute(
            "SELECT kind, state, sum(n)::int FROM jobtui_job_counts()"
            " WHERE state NOT IN ('retrying', 'cancel_open') GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        rows = conn.execute(
            "SELECT kind, jobtui_job_state(attempts, max_attempts, locked_at, finished_at,"
            " cancelled_at), count(*)::int FROM jobs GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        assert counted == rows and sum(n for _, _, n in rows) == 100


def test_a_database_the_old_files_migrated_is_at_the_baseline_and_nothing_runs_again(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=24)
        _recorded_by_the_old_files(conn, 24)
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('kept', '{}')")
    # The baseline does not run again: only the migrations after it.
    shipped = load_migrations()
    after = [m for m in shipped if m.version > 24]
    out = assert_ok(run_cli("migrate", dsn=empty_dsn))
    names = ", ".join(f"{m.version:04d}_{m.name}" for m in after)
    assert f"to version {shipped[-1].version} (applied {names})" in out, out
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        before = describe(conn, "public")
    out = assert_ok(run_cli("migrate", dsn=empty_dsn))
    assert f"schema public is up to date (version {shipped[-1].version})" in out
    out = assert_ok(run_cli("migrate", "--dry-run", dsn=empty_dsn))
    assert out.startswith("-- schema public is up to date")
    # A migration numbered after the last applies on top of it, and only that one.
    nxt = shipped[-1].version + 1
    extra = Migration(
        nxt, "test_only_after_baseline", "CREATE TABLE __schema__.jobtui_test_after (x int)"
    )
    monkeypatch.setattr(migrator, "load_migrations", lambda: [*shipped, extra])
    assert main(["--dsn", empty_dsn, "migrate"]) == 0
    out = capsys.readouterr().out
    assert f"to version {nxt} (applied {nxt:04d}_test_only_after_baseline)" in out
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _versions(conn) == [v for v, _ in OLD_FILES] + [m.version for m in after] + [nxt]
        conn.execute("DROP TABLE jobtui_test_after")
        assert describe(conn, "public") == before
        assert conn.execute("SELECT kind FROM jobs").fetchall() == [("kept",)]


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_database_at_an_older_version_is_refused_in_one_line_and_left_alone(
    empty_dsn: str, dry_run: bool
) -> None:
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        migrate(conn, "public", up_to=24)
        _recorded_by_the_old_files(conn, 20)
        before = describe(conn, "public")
    args = ["migrate", "--dry-run"] if dry_run else ["migrate"]
    assert_one_error(
        run_cli(*args, dsn=empty_dsn),
        1,
        "schema public is at version 20",
        "baseline (version 24",
        "nothing was changed",
        "Recreate the schema",
        "previous jobtui version",
    )
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _versions(conn) == [v for v, _ in OLD_FILES if v <= 20]
        assert describe(conn, "public") == before
