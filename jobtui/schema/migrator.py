"""Apply the numbered migrations once each, safely from several processes at once.

All pending migrations run in one transaction behind a transaction-level advisory lock, so two
`jobtui migrate` runs serialise and the second finds nothing to do. Before touching a `jobs`
table that already exists (say, the article's), its columns are checked; one that cannot be
extended safely is refused with nothing changed.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from importlib import resources

import psycopg

from jobtui.sql import queries, quote_schema

# 64-bit key for pg_advisory_xact_lock; "jobtui" in ASCII.
MIGRATION_LOCK_KEY = 0x6A6F6274756900
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

# The article's columns (name -> type as format_type() spells it) and the ones jobtui adds.
ARTICLE_COLUMNS = {
    "id": "bigint",
    "kind": "text",
    "payload": "jsonb",
    "run_at": "timestamp with time zone",
    "attempts": "integer",
    "max_attempts": "integer",
    "locked_at": "timestamp with time zone",
    "finished_at": "timestamp with time zone",
    "last_error": "text",
}
ADDED_COLUMNS = {
    "created_at": "timestamp with time zone",
    "priority": "integer",
    "locked_by": "text",
    "errors": "jsonb",
    "cancel_requested": "boolean",
    "cancelled_at": "timestamp with time zone",
}


class MigrationRefused(Exception):
    """The database holds something jobtui cannot extend safely; nothing was changed."""


@dataclass(frozen=True)
class Recognised:
    """A schema found with jobtui's objects but no version rows (a schema-only restore): the
    versions its objects show were recorded without running them again."""

    version: int
    recorded: list[int]

    def message(self, schema: str) -> str:
        return (
            f"recognised an existing jobtui schema {schema} at version {self.version} with an "
            "empty version table (a schema-only restore?); recorded versions "
            f"{self.recorded[0]}-{self.recorded[-1]} without running them again"
        )


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def for_schema(self, schema: str) -> str:
        return self.sql.replace("__schema__", quote_schema(schema))


def load_migrations() -> list[Migration]:
    """Every migration shipped with jobtui, in version order."""
    found = []
    for entry in resources.files(__package__).iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def applied_versions(conn: psycopg.Connection, schema: str) -> set[int]:
    """Versions already applied; empty when the version table does not exist yet."""
    q = queries(schema)
    exists = conn.execute(q.migrate_version_table_exists).fetchone()
    if not exists or not exists[0]:
        return set()
    rows = conn.execute(q.migrate_applied_versions).fetchall()
    return {int(r[0]) for r in rows}


def current_version(conn: psycopg.Connection, schema: str) -> int:
    """The highest applied version, 0 for a database jobtui has never migrated."""
    versions = applied_versions(conn, schema)
    return max(versions) if versions else 0


def pending_sql(conn: psycopg.Connection, schema: str) -> list[tuple[Migration, str]]:
    """The migrations not yet applied, each with its SQL for `schema` (for `--dry-run`).

    A restored schema without version rows counts as at the version its objects show (what
    `migrate` would record); one matching no version raises MigrationRefused as migrate would.
    """
    done = applied_versions(conn, schema)
    if not done and restored_without_versions(conn, schema):
        version = recognise_version(conn, schema)
        if version is None:
            raise _unrecognised(schema)
        done = {m.version for m in load_migrations() if m.version <= version}
    return [(m, m.for_schema(schema)) for m in load_migrations() if m.version not in done]


def restored_without_versions(conn: psycopg.Connection, schema: str) -> bool:
    """jobtui's own tables exist (not only the article's `jobs`): with no version rows, a
    schema-only restore or a lost version table."""
    row = conn.execute(queries(schema).migrate_jobtui_tables_exist).fetchone()
    return bool(row and row[0])


def check_existing_jobs_table(conn: psycopg.Connection, schema: str) -> None:
    """Refuse a `jobs` table whose columns differ from the article's or clash with ours."""
    q = queries(schema)
    rows = conn.execute(q.migrate_jobs_columns, (schema,)).fetchall()
    if not rows:
        kind = conn.execute(q.migrate_jobs_relkind, (schema,)).fetchone()
        if kind is not None:
            raise MigrationRefused(
                f"{schema}.jobs exists but is not a table; jobtui needs that name; nothing changed"
            )
        return
    columns: dict[str, str] = dict(rows)
    problems = []
    for name, wanted in ARTICLE_COLUMNS.items():
        have = columns.get(name)
        if have is None:
            problems.append(f"column {name} is missing")
        elif have != wanted:
            problems.append(f"column {name} is {have}, jobtui needs {wanted}")
    for name, wanted in ADDED_COLUMNS.items():
        have = columns.get(name)
        if have is not None and have != wanted:
            problems.append(f"column {name} is {have}, jobtui needs {wanted}")
    if problems:
        raise MigrationRefused(
            f"{schema}.jobs exists and cannot be extended safely ({'; '.join(problems)}); "
            "nothing was changed"
        )


def _fingerprint(conn: psycopg.Connection, schema: str) -> set[str]:
    """The schema's objects as lines with its own name stripped (see migrate_fingerprint)."""
    q = queries(schema)
    row = conn.execute(q.migrate_quote_ident, {"schema": schema}).fetchone()
    assert row is not None
    prefixes = {f"{row[0]}.", f"{quote_schema(schema)}."}
    lines = set()
    for (line,) in conn.execute(q.migrate_fingerprint, {"schema": schema}).fetchall():
        for prefix in prefixes:
            line = line.replace(prefix, "")
        lines.add(line)
    return lines


def recognise_version(conn: psycopg.Connection, schema: str) -> int | None:
    """The highest migration version whose objects the schema has (each migration applied,
    in order, to an empty scratch schema that is rolled back); None when none matches.

    Objects an operator added (an extra index, say) do not stop the match: a version matches
    when every object it creates is present exactly as it creates it.
    """
    have = _fingerprint(conn, schema)
    probe = f"jobtui_probe_{secrets.token_hex(6)}"
    found: int | None = None
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(queries(probe).migrate_create_probe_schema)
            for migration in load_migrations():
                conn.execute(migration.for_schema(probe))
                if _fingerprint(conn, probe) <= have:
                    found = migration.version
    except psycopg.errors.InsufficientPrivilege as exc:
        raise MigrationRefused(
            f"schema {schema} has jobtui's tables but its version table is empty (a schema-only "
            "restore?); telling its version needs a scratch schema, which this role may not "
            f"create ({exc.diag.message_primary}); nothing was changed. Run migrate as the "
            "database owner, or restore the jobtui_migrations rows from the dump"
        ) from None
    return found


def _unrecognised(schema: str) -> MigrationRefused:
    return MigrationRefused(
        f"schema {schema} has jobtui's tables but its version table is empty (a schema-only "
        "restore?) and its objects match no jobtui version, so migrate will not re-run "
        "migrations over it; nothing was changed. Restore the jobtui_migrations rows from "
        "the dump, or insert them by hand for the version the schema is at"
    )


def _repair_version_table(conn: psycopg.Connection, schema: str) -> Recognised:
    """Record the versions a restored schema's objects show, or refuse saying what happened."""
    version = recognise_version(conn, schema)
    if version is None:
        raise _unrecognised(schema)
    q = queries(schema)
    recorded = []
    for migration in load_migrations():
        if migration.version > version:
            break
        conn.execute(q.migrate_record_version, (migration.version, migration.name))
        recorded.append(migration.version)
    return Recognised(version, recorded)


def migrate(conn: psycopg.Connection, schema: str) -> list[Migration]:
    """Apply pending migrations in one transaction; return those applied (maybe none).

    `conn` must not be inside a transaction. Safe to call from several processes at once.
    """
    return migrate_report(conn, schema)[0]


def migrate_report(
    conn: psycopg.Connection, schema: str
) -> tuple[list[Migration], Recognised | None]:
    """`migrate`, also saying whether a restored schema's version table was repaired first."""
    q = queries(schema)
    applied: list[Migration] = []
    recognised: Recognised | None = None
    with conn.transaction():
        conn.execute(q.migrate_lock, (MIGRATION_LOCK_KEY,))
        has_schema = conn.execute(q.migrate_schema_exists, (schema,)).fetchone()
        if not has_schema:
            conn.execute(q.migrate_create_schema)
        conn.execute(q.migrate_create_version_table)
        done = applied_versions(conn, schema)
        if not done and restored_without_versions(conn, schema):
            recognised = _repair_version_table(conn, schema)
            done = set(recognised.recorded)
        todo = [m for m in load_migrations() if m.version not in done]
        if todo and 1 not in done:
            check_existing_jobs_table(conn, schema)
        for migration in todo:
            conn.execute(migration.for_schema(schema))
            conn.execute(q.migrate_record_version, (migration.version, migration.name))
            applied.append(migration)
    if applied:
        # After the commit: ANALYZE reads a sample of `jobs` (a second or more on a large
        # table), and inside the transaction every lock a migration took (0019's DROP INDEX:
        # ACCESS EXCLUSIVE, reads wait too) would be held until it ends.
        with conn.transaction():  # committed on a connection that is not in autocommit too
            conn.execute(q.migrate_analyze_jobs)
    return applied, recognised
