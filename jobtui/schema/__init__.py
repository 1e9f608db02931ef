"""Schema migrations: numbered `.sql` files in this package, applied in order."""

from jobtui.schema.migrator import (
    Migration,
    MigrationRefused,
    applied_versions,
    current_version,
    load_migrations,
    migrate,
    pending_sql,
)

__all__ = [
    "Migration",
    "MigrationRefused",
    "applied_versions",
    "current_version",
    "load_migrations",
    "migrate",
    "pending_sql",
]
