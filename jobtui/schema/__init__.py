"""Schema migrations: numbered `.sql` files in this package, applied in order."""

from jobtui.schema.migrator import (
    Migration,
    MigrationRefused,
    Recognised,
    applied_versions,
    current_version,
    load_migrations,
    migrate,
    migrate_report,
    pending_sql,
)

__all__ = [
    "Migration",
    "MigrationRefused",
    "Recognised",
    "applied_versions",
    "current_version",
    "load_migrations",
    "migrate",
    "migrate_report",
    "pending_sql",
]
