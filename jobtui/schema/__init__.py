"""Schema migrations: numbered `.sql` files in this package, applied in order."""

from jobtui.schema.migrator import (
    LockHolder,
    LockWait,
    MigrateResult,
    Migration,
    MigrationBlocked,
    MigrationRefused,
    Recognised,
    Stall,
    applied_versions,
    current_version,
    load_migrations,
    migrate,
    migrate_report,
    pending_sql,
)

__all__ = [
    "LockHolder",
    "LockWait",
    "MigrateResult",
    "Migration",
    "MigrationBlocked",
    "MigrationRefused",
    "Recognised",
    "Stall",
    "applied_versions",
    "current_version",
    "load_migrations",
    "migrate",
    "migrate_report",
    "pending_sql",
]
