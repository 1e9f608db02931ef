"""Apply the baseline and the numbered migrations after it once each, safely from several
processes at once.

The schema starts from one baseline file (0024_baseline.sql: nothing was released before it, so
it replaced migrations 0001-0024); later changes are numbered migrations after it. A database
that the old files migrated records versions 1-24 and so is at the baseline; one that stopped
before 24 cannot be upgraded by this jobtui and is refused (MigrationRefused) with nothing
changed.

All pending migrations run in one transaction behind a transaction-level advisory lock, so two
`jobtui migrate` runs serialise and the second finds nothing to do. Before touching a `jobs`
table that already exists (say, the article's), its columns are checked; one that cannot be
extended safely is refused with nothing changed.

With a `LockWait` (what `jobtui migrate` passes) each try waits a bounded time for the locks
its migrations take, because a migration queued for ACCESS EXCLUSIVE on `jobs` stops every
claim and INSERT behind it: a try that runs out rolls back, the queue flows during a back-off,
and after the last try `MigrationBlocked` names the session that held the lock.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg.rows import dict_row

from jobtui.config import format_duration
from jobtui.inert import clean
from jobtui.sql import queries, quote_schema

# 64-bit key for pg_advisory_xact_lock; "jobtui" in ASCII.
MIGRATION_LOCK_KEY = 0x6A6F6274756900
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# The pause between tries doubles from LockWait.backoff_s up to this.
BACKOFF_CAP_S = 30.0
# How often, while a try runs, the second connection looks at who blocks it: several looks fit
# in the shortest sensible lock timeout, and each is one small catalogue query.
WATCH_INTERVAL_S = 0.1
# A try that ends in one of these rolled back having waited for a lock: try again. A deadlock
# (migrate holds `jobs`, waits for another table a session holds, which then wants `jobs`) is
# resolved by PostgreSQL failing one side; when that is migrate, a later try can succeed.
_LOCK_WAIT_ERRORS = (pgerrors.LockNotAvailable, pgerrors.DeadlockDetected)

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
# Columns jobtui needs NOT NULL, the one rule for an existing table: migrate keeps its columns
# as they are (ADD COLUMN IF NOT EXISTS skips one it has), so a nullable one keeps its NULLs,
# which the queue mishandles. A NULL run_at, attempts or max_attempts is counted waiting but
# never claimed (its test is NULL) and `jobs why` fails on it; a NULL kind fails the baseline's
# count; a NULL payload fails every claim that picks it (the worker's decode takes its len()),
# so the jobs behind it never run either; a NULL priority sorts first in `priority DESC`; a
# NULL cancel_requested is never claimed.
NOT_NULL_COLUMNS = {
    "kind",
    "payload",
    "run_at",
    "attempts",
    "max_attempts",
    "created_at",
    "priority",
    "errors",
    "cancel_requested",
}


class MigrationRefused(Exception):
    """The database holds something jobtui cannot extend safely; nothing was changed."""


@dataclass(frozen=True)
class LockWait:
    """How long each try of migrate waits for a lock, and how often it tries.

    While a migration waits in the lock queue of `jobs` (the baseline extending an existing
    article table wants ACCESS EXCLUSIVE, as does a DROP INDEX), every later claim and INSERT
    queues behind it: unbounded, one idle transaction that read `jobs` stops the whole queue. So
    each try sets `lock_timeout` to `timeout_s` (0: wait as long as it takes), a try that runs
    out rolls back (nothing applied), and the next comes `backoff_s` later, doubled each time up
    to BACKOFF_CAP_S, during which the queue flows. `watch` opens a second (autocommit)
    connection that sees, while a try waits, who holds it up, so the failure can name them;
    `on_retry(tries, pause_s, stall)` hears of each failed try."""

    timeout_s: float = 2.0
    retries: int = 5
    backoff_s: float = 1.0
    watch: Callable[[], psycopg.Connection] | None = None
    on_retry: Callable[[int, float, Stall | None], None] | None = None

    def pause(self, tries: int) -> float:
        """Seconds to wait after the `tries`-th failed try."""
        return min(self.backoff_s * 2 ** (tries - 1), BACKOFF_CAP_S)

    def timeout_setting(self) -> str:
        """`timeout_s` as a `lock_timeout` value (whole milliseconds, at least 1)."""
        return f"{max(1, round(self.timeout_s * 1000))}ms"


def lock_mode(name: str) -> str:
    """A pg_locks mode as LOCK TABLE spells it: `AccessExclusiveLock` -> `ACCESS EXCLUSIVE`."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name.removesuffix("Lock")).upper()


@dataclass(frozen=True)
class LockHolder:
    """A session that kept migrate waiting. `held`: the modes it holds on what migrate waited
    for; None when it holds none and is only queued ahead of migrate."""

    pid: int
    user: str | None
    application: str
    state: str | None
    xact_age_s: float | None
    held: str | None

    def describe(self, target: str) -> str:
        """`pid 42 (user app, application 'psql', idle in transaction, transaction open 3m05s),
        which holds ACCESS SHARE on jobs`: what an operator needs to find and end it."""
        app = f"application {clean(self.application)!r}" if self.application else "no application"
        age = (
            "no transaction open"
            if self.xact_age_s is None
            else f"transaction open {format_duration(self.xact_age_s)}"
        )
        doing = (
            f"holds {self.held} on {target}"
            if self.held
            else f"is queued ahead of migrate for {target}"
        )
        return (
            f"pid {self.pid} (user {clean(self.user or '?')}, {app}, "
            f"{clean(self.state or 'state unknown')}, {age}), which {doing}"
        )


@dataclass(frozen=True)
class Stall:
    """What one try of migrate waited for (`target`, in mode `wanted`) and who held it up,
    holders first, oldest transaction first."""

    target: str
    wanted: str
    holders: tuple[LockHolder, ...]


class MigrationBlocked(Exception):
    """Every try of migrate ran out of lock time; each rolled back, so nothing was applied."""

    def __init__(self, tries: int, timeout_s: float, stall: Stall | None) -> None:
        self.tries = tries
        self.timeout_s = timeout_s
        self.stall = stall
        super().__init__(self.message())

    def message(self) -> str:
        head = f"{self.tries} {'try' if self.tries == 1 else 'tries'} of {self.timeout_s:g}s"
        stall = self.stall
        if stall is None or not stall.holders:
            return (
                f"migrate could not get the locks its migrations need in {head}; nothing was "
                "applied. Who held them was not seen: look for a long transaction in the "
                "Database tab of `jobtui` or in pg_stat_activity, end it, then run migrate again"
            )
        first = stall.holders[0]
        more = len(stall.holders) - 1
        others = f" (and {more} more session{'s' if more > 1 else ''})" if more else ""
        return (
            f"migrate could not get {stall.wanted} on {stall.target} in {head}; nothing was "
            f"applied. Blocked by {first.describe(stall.target)}{others}. End that "
            f"transaction, or cancel or terminate pid {first.pid} in the Database tab of "
            f"`jobtui` or with SELECT pg_terminate_backend({first.pid}); then run migrate again"
        )


def _stall(rows: list[dict[str, Any]]) -> Stall:
    """A Stall from migrate_blockers rows (what was waited for repeats on every row)."""
    holders = tuple(
        LockHolder(
            pid=int(r["pid"]),
            user=r["usename"],
            application=r["application_name"] or "",
            state=r["state"],
            xact_age_s=r["xact_age_s"],
            held=", ".join(lock_mode(m) for m in r["held"].split(", ")) if r["held"] else None,
        )
        for r in rows
    )
    first = rows[0]
    target = first["relation"] or f"a {first['locktype']} lock"
    return Stall(target=clean(target), wanted=lock_mode(first["wanted"]), holders=holders)


class _BlockerWatch:
    """A second connection that, while a try runs, keeps its latest sight of who blocks it.

    It only informs: a failed look ends the watch and migrate goes on without it."""

    def __init__(self, conn: psycopg.Connection, schema: str) -> None:
        self.conn = conn
        self.sql = queries(schema).migrate_blockers
        self.seen: Stall | None = None
        self._stop = threading.Event()

    @contextmanager
    def watching(self, pid: int) -> Iterator[None]:
        """Watch backend `pid` until the block ends; `seen` starts afresh each time."""
        self.seen = None
        self._stop.clear()
        thread = threading.Thread(
            target=self._run, args=(pid,), name="jobtui-migrate-watch", daemon=True
        )
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()

    def _run(self, pid: int) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            try:
                with self.conn.cursor(row_factory=dict_row) as cur:
                    rows = cur.execute(self.sql, {"pid": pid}).fetchall()
            except psycopg.Error:
                return
            if rows:
                self.seen = _stall(rows)


@dataclass(frozen=True)
class Recognised:
    """A schema found with jobtui's objects but no version rows (a schema-only restore): the
    versions its objects show were recorded without running them again."""

    version: int
    recorded: list[int]

    def message(self, schema: str) -> str:
        first, last = self.recorded[0], self.recorded[-1]
        versions = f"version {first}" if first == last else f"versions {first}-{last}"
        return (
            f"recognised an existing jobtui schema {schema} at version {self.version} with an "
            f"empty version table (a schema-only restore?); recorded {versions} without "
            "running them again"
        )


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def for_schema(self, schema: str) -> str:
        return self.sql.replace("__schema__", quote_schema(schema))


def load_migrations() -> list[Migration]:
    """Every migration shipped with jobtui, in version order: the baseline first."""
    found = []
    for entry in resources.files(__package__).iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def refuse_before_baseline(done: set[int], schema: str) -> None:
    """Refuse a schema migrated by jobtui but not to the baseline (versions recorded, the
    baseline's not among them): the files that led from there to it no longer ship."""
    baseline = load_migrations()[0]
    if not done or baseline.version in done:
        return
    raise MigrationRefused(
        f"schema {schema} is at version {max(done)}, from before this jobtui's baseline "
        f"(version {baseline.version}, which replaced the unreleased migrations "
        f"0001-{baseline.version:04d}), and cannot be upgraded from there; nothing was "
        "changed. Recreate the schema (drop it and run migrate), or first run migrate with the "
        "previous jobtui version, which still ships those migrations"
    )


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
    """The migrations not yet applied, each with its SQL for `schema` (for `--dry-run`); a
    `jobs` table migrate would refuse (check_existing_jobs_table) is refused here too.

    A restored schema without version rows counts as at the version its objects show (what
    `migrate` would record); one matching no version raises MigrationRefused as migrate would.
    """
    done = applied_versions(conn, schema)
    if not done and restored_without_versions(conn, schema):
        version = recognise_version(conn, schema)
        if version is None:
            raise _unrecognised(schema)
        done = {m.version for m in load_migrations() if m.version <= version}
    refuse_before_baseline(done, schema)
    if not done:  # as migrate: a jobs table it would refuse is refused here, not printed over
        check_existing_jobs_table(conn, schema)
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
    columns: dict[str, str] = {name: type_ for name, type_, *_ in rows}
    nullable = {name for name, _, notnull, *_ in rows if not notnull}
    domains = {name for name, _, _, domain, *_ in rows if domain}
    # NOT NULL by its domain: no NULL rows, but the column allows NULL once of the base type.
    domain_not_null = {name for name, _, _, _, not_null, *_ in rows if not_null}
    defaults = {name: default for name, *_, default, _ in rows if default is not None}
    int_sequences = {name: seq for name, *_, seq in rows if seq is not None}
    row = conn.execute(q.migrate_quote_ident, {"schema": schema}).fetchone()
    table = f"{row[0] if row else schema}.jobs"
    problems, fixes, nulls, sequences, missing = [], [], [], [], False
    for name, wanted in (ARTICLE_COLUMNS | ADDED_COLUMNS).items():
        have = columns.get(name)
        if have is None:
            if name in ARTICLE_COLUMNS:
                problems.append(f"column {name} is missing")
                missing = True
            continue
        if have != wanted:
            what = f"{have}, a domain" if name in domains else have
            problems.append(f"column {name} is {what}, jobtui needs {wanted}")
            fixes.extend(_type_fix(name, wanted, defaults.get(name)))
            if name in int_sequences:
                sequences.append(int_sequences[name])
        if name in NOT_NULL_COLUMNS and name in nullable:
            if name not in domain_not_null:
                problems.append(f"column {name} allows NULL, jobtui needs it NOT NULL")
                nulls.append(name)
            fixes.append(f"ALTER COLUMN {name} SET NOT NULL")
    if not problems:
        return
    if missing:  # not the article's table: another `jobs` is in the way
        hint = (
            "it is not the article's jobs table: put jobtui's tables in a schema of their "
            "own with --schema (or $JOBTUI_SCHEMA)"
        )
    else:
        first = f"give the NULL rows of {', '.join(nulls)} a value, then " if nulls else ""
        hint = f"to extend it, {first}run ALTER TABLE {table} {', '.join(fixes)}"
        hint += "".join(f"; ALTER SEQUENCE {seq} AS bigint" for seq in sequences)
    raise MigrationRefused(
        f"{schema}.jobs exists and cannot be extended safely ({'; '.join(problems)}); "
        f"nothing was changed; {hint}"
    )


def _type_fix(name: str, wanted: str, default: str | None) -> list[str]:
    """The ALTER COLUMN clauses giving column `name` the type `wanted`. A default is dropped
    first and set again cast, in the same ALTER TABLE: PostgreSQL casts it by an assignment
    cast only, so `payload text DEFAULT '{}'` failed the hint's ALTER with "default for column
    payload cannot be cast automatically to type jsonb"."""
    change = f"ALTER COLUMN {name} TYPE {wanted} USING {name}::{wanted}"
    if default is None:
        return [change]
    return [
        f"ALTER COLUMN {name} DROP DEFAULT",
        change,
        f"ALTER COLUMN {name} SET DEFAULT ({default})::{wanted}",
    ]


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
    when every object it creates is present exactly as it creates it, and none of those the
    migration dropped or replaced is.
    """
    have = _fingerprint(conn, schema)
    probe = f"jobtui_probe_{secrets.token_hex(6)}"
    found: int | None = None
    built: set[str] = set()
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(queries(probe).migrate_create_probe_schema)
            for migration in load_migrations():
                conn.execute(migration.for_schema(probe))
                before, built = built, _fingerprint(conn, probe)
                # What the migration dropped or replaced must be gone too: else a schema one
                # version older (0025 only drops indexes) would match the newer version.
                if built <= have and not (before - built) & have:
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
        "restore?) and its objects match no jobtui version from the baseline on, so migrate "
        "will not re-run migrations over it; nothing was changed. Restore the "
        "jobtui_migrations rows from the dump, or insert them by hand for the version the "
        "schema is at (a schema from before the baseline: migrate it with the previous "
        "jobtui version first, or recreate it)"
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


@dataclass(frozen=True)
class MigrateResult:
    """What `migrate_report` did. `recognised`: a restored schema's version table was repaired
    first. `analyzed` is False when ANALYZE of `jobs` could not get its lock in time (the
    migrations are committed; autovacuum analyses the table later)."""

    applied: list[Migration]
    recognised: Recognised | None
    analyzed: bool = True


def migrate(
    conn: psycopg.Connection,
    schema: str,
    lock: LockWait | None = None,
    *,
    up_to: int | None = None,
) -> list[Migration]:
    """Apply pending migrations in one transaction; return those applied (maybe none).

    `conn` must not be inside a transaction. Safe to call from several processes at once.
    Without `lock` it waits for locks as long as it takes; with one, see LockWait. `up_to`
    stops after that version (the tests that hold a version's schema to its description).
    """
    return migrate_report(conn, schema, lock, up_to=up_to).applied


def migrate_report(
    conn: psycopg.Connection,
    schema: str,
    lock: LockWait | None = None,
    *,
    up_to: int | None = None,
) -> MigrateResult:
    """`migrate`, also saying whether a restored schema's version table was repaired first.

    Raises MigrationBlocked when every try of `lock` ran out of lock time (nothing applied).
    """
    if lock is None or lock.timeout_s <= 0:
        applied, recognised = _apply(conn, schema, None, None, up_to)
    else:
        applied, recognised = _apply_with_retries(conn, schema, lock, up_to)
    analyzed = True
    if applied:
        # After the commit: ANALYZE reads a sample of `jobs` (a second or more on a large
        # table), and inside the transaction every lock a migration took (ACCESS EXCLUSIVE on
        # `jobs` for the baseline or a DROP INDEX: reads wait too) would be held until it
        # ends. Its own lock (SHARE UPDATE EXCLUSIVE) lets claims and INSERTs through but
        # waits for a VACUUM: bounded too.
        try:
            with conn.transaction():  # committed on a connection that is not in autocommit too
                if lock is not None and lock.timeout_s > 0:
                    timeout = {"timeout": lock.timeout_setting()}
                    conn.execute(queries(schema).migrate_lock_timeout, timeout)
                conn.execute(queries(schema).migrate_analyze_jobs)
        except pgerrors.LockNotAvailable:
            analyzed = False
    return MigrateResult(applied, recognised, analyzed)


def _apply_with_retries(
    conn: psycopg.Connection, schema: str, lock: LockWait, up_to: int | None
) -> tuple[list[Migration], Recognised | None]:
    """Try `lock.retries + 1` times, each bounded by `lock.timeout_s` per lock."""
    watch_conn: psycopg.Connection | None = None
    if lock.watch is not None:
        try:
            watch_conn = lock.watch()
        except psycopg.Error:
            watch_conn = None  # no second connection to spare: migrate, without naming blockers
    watch = _BlockerWatch(watch_conn, schema) if watch_conn is not None else None
    try:
        tries = 0
        while True:
            tries += 1
            try:
                return _apply(conn, schema, lock, watch, up_to)
            except _LOCK_WAIT_ERRORS:
                seen = watch.seen if watch is not None else None
                if tries > lock.retries:
                    raise MigrationBlocked(tries, lock.timeout_s, seen) from None
            pause = lock.pause(tries)
            if lock.on_retry is not None:
                lock.on_retry(tries, pause, seen)
            time.sleep(pause)
    finally:
        if watch_conn is not None:
            watch_conn.close()


def _apply(
    conn: psycopg.Connection,
    schema: str,
    lock: LockWait | None,
    watch: _BlockerWatch | None,
    up_to: int | None = None,
) -> tuple[list[Migration], Recognised | None]:
    """One try: the pending migrations in one transaction (rolled back if anything fails)."""
    q = queries(schema)
    applied: list[Migration] = []
    recognised: Recognised | None = None
    with conn.transaction():
        # Waiting here is only for another migrate, whose tries are bounded too, and while
        # queued here this one holds no lock anyone waits for: the lock timeout comes after.
        conn.execute(q.migrate_lock, (MIGRATION_LOCK_KEY,))
        pid = conn.info.backend_pid
        if lock is not None:
            row = conn.execute(
                q.migrate_lock_timeout, {"timeout": lock.timeout_setting()}
            ).fetchone()
            assert row is not None
            pid = int(row[1])  # behind a transaction pooler, this transaction's own backend
        with watch.watching(pid) if watch is not None else nullcontext():
            has_schema = conn.execute(q.migrate_schema_exists, (schema,)).fetchone()
            if not has_schema:
                conn.execute(q.migrate_create_schema)
            conn.execute(q.migrate_create_version_table)
            done = applied_versions(conn, schema)
            if not done and restored_without_versions(conn, schema):
                recognised = _repair_version_table(conn, schema)
                done = set(recognised.recorded)
            refuse_before_baseline(done, schema)
            todo = [
                m
                for m in load_migrations()
                if m.version not in done and (up_to is None or m.version <= up_to)
            ]
            if not done:
                check_existing_jobs_table(conn, schema)
            for migration in todo:
                conn.execute(migration.for_schema(schema))
                conn.execute(q.migrate_record_version, (migration.version, migration.name))
                applied.append(migration)
    return applied, recognised
