"""Issue 15 item 6: `migrate` after a schema-only restore (tables present, version table empty).

A `pg_dump --schema-only` carries jobtui's tables but not the rows of `jobtui_migrations`.
`migrate` must recognise the schema by its objects and repair the version table, or refuse with
a message that says what happened; it must not re-apply every migration from the start.
"""

from __future__ import annotations

import subprocess

import psycopg
import pytest
from test_cli_support import run_cli
from topology import bindir_for

from jobtui.cli import main
from jobtui.schema import Migration, load_migrations, migrator


def _restore(source: str, target: str, *, schema_only: bool) -> None:
    """pg_dump `source` (plain SQL, same major version as the server) and load it into
    `target` with psql."""
    with psycopg.connect(source) as conn:
        major = conn.info.server_version // 10000
    bindir = bindir_for(major)
    if bindir is None:
        pytest.skip(f"issue 15: no pg_dump of PostgreSQL {major} on this machine")
    args = ["--schema-only"] if schema_only else []
    dump = subprocess.run(
        [str(bindir / "pg_dump"), *args, "--no-owner", "-d", source],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    subprocess.run(
        [str(bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target],
        input=dump,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def test_migrate_after_a_schema_only_restore_repairs_or_refuses_clearly(
    dsn: str, empty_dsn: str
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('k', '{}')")
    _restore(dsn, empty_dsn, schema_only=True)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobtui_migrations").fetchone() == (0,)
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('restored', '{}')")
    proc = run_cli("migrate", dsn=empty_dsn)
    latest = load_migrations()[-1].version
    if proc.returncode == 0:
        # Repaired: it says so, applies nothing, and the version table is complete.
        assert "applied" not in proc.stdout, proc.stdout
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            versions = [r[0] for r in conn.execute("SELECT version FROM jobtui_migrations")]
            assert max(versions) == latest
            assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)
    else:
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "restore" in lines[0] or "version" in lines[0], lines[0]


def test_a_full_restore_is_already_current(dsn: str, empty_dsn: str) -> None:
    """A full dump carries the version rows: migrate has nothing to do (works today)."""
    _restore(dsn, empty_dsn, schema_only=False)
    proc = run_cli("migrate", dsn=empty_dsn)
    assert proc.returncode == 0 and "applied" not in proc.stdout, (proc.stdout, proc.stderr)


def _restored_without_version_rows(dsn: str) -> None:
    """A schema at the baseline with no version rows: what a schema-only restore leaves (the
    baseline run by hand, the version table created empty)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(load_migrations()[0].for_schema("public"))
        conn.execute(
            "CREATE TABLE jobtui_migrations (version int primary key, name text not null, "
            "applied_at timestamptz not null default now())"
        )
        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('restored', '{}')")


def test_migrate_after_a_restore_records_the_baseline_and_applies_only_what_follows(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Recognised by its objects (an operator's own index does not stop the match); then only
    the migrations numbered after the baseline (the shipped ones and a test-only one) apply."""
    _restored_without_version_rows(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE INDEX my_own_index ON jobs (created_at)")  # an operator's own
    extra = Migration(9999, "test_only_later", "CREATE TABLE __schema__.jobtui_test_later (x int)")
    shipped = load_migrations()
    monkeypatch.setattr(migrator, "load_migrations", lambda: [*shipped, extra])
    assert main(["--dsn", empty_dsn, "migrate"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    baseline = shipped[0].version
    assert f"at version {baseline} with an empty version table" in first, first
    assert f"recorded version {baseline} without" in first, first
    after = [f"{m.version:04d}_{m.name}" for m in shipped[1:]] + ["9999_test_only_later"]
    assert second.endswith(f"(applied {', '.join(after)})"), second
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM jobtui_migrations")]
        assert sorted(versions) == [m.version for m in shipped] + [9999]
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)


def test_migrate_refuses_a_restored_schema_that_matches_no_version(empty_dsn: str) -> None:
    """Also what a schema-only restore of a schema from before the baseline meets."""
    _restored_without_version_rows(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX jobs_waiting_kind_id")  # the baseline makes it: matches none
    proc = run_cli("migrate", dsn=empty_dsn)
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "version table is empty" in lines[0] and "nothing was changed" in lines[0]
    assert "previous jobtui version" in lines[0]
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobtui_migrations").fetchone() == (0,)
        probes = "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'jobtui_probe_%%'"
        assert conn.execute(probes).fetchone() == (0,)  # the scratch schema was rolled back


def test_dry_run_on_a_restored_schema_lists_only_what_migrate_would_apply(
    empty_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _restored_without_version_rows(empty_dsn)
    extra = Migration(9999, "test_only_later", "CREATE TABLE __schema__.jobtui_test_later (x int)")
    shipped = load_migrations()
    monkeypatch.setattr(migrator, "load_migrations", lambda: [*shipped, extra])
    assert main(["--dsn", empty_dsn, "migrate", "--dry-run"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[-1] for line in out.splitlines() if line.startswith("-- migration")]
    assert listed == [f"{m.version:04d}_{m.name}" for m in shipped[1:]] + ["9999_test_only_later"]
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM jobtui_migrations").fetchone() == (0,)
