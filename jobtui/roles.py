"""Least-privilege roles: the SQL that creates `monitor`, `operator` and `worker` group roles.

Read-only must be enforced by the database, not only hidden in the console, so jobtui ships
the GRANTs rather than leaving them to each deployment. The statements live in
`jobtui/sql/roles.sql`; here the schema and the role-name prefix are checked and substituted.
Roles are cluster-wide, which is why the prefix is a parameter (tests use a random one).
"""

from __future__ import annotations

import re

from jobtui.sql import queries

DEFAULT_PREFIX = "jobtui_"
ROLE_SUFFIXES = ("monitor", "operator", "worker")
# Lower case only: the names appear unquoted in SQL, where PostgreSQL folds to lower case.
_PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")


class InvalidRolePrefix(ValueError):
    """The prefix would not make plain lower-case role names."""


def role_names(prefix: str = DEFAULT_PREFIX) -> dict[str, str]:
    """{"monitor": "jobtui_monitor", …} for `prefix`."""
    if not _PREFIX.match(prefix):
        raise InvalidRolePrefix(
            f"invalid role prefix {prefix!r}: use lower-case letters, digits and underscores"
        )
    return {suffix: prefix + suffix for suffix in ROLE_SUFFIXES}


def roles_sql(schema: str = "public", prefix: str = DEFAULT_PREFIX) -> str:
    """The complete, idempotent script creating the three roles for `schema`."""
    names = role_names(prefix)
    body = queries(schema).roles_script.replace("__prefix__", prefix)
    header = (
        f"-- jobtui least-privilege roles for schema {schema}.\n"
        f"-- {names['monitor']}: read only (console read-only mode, stats, check).\n"
        f"-- {names['operator']}: {names['monitor']} + requeue/delete/cancel/run now/pause/prune.\n"
        f"-- {names['worker']}: what `jobtui worker` needs.\n"
        "-- They are NOLOGIN groups; give them to login roles, e.g.\n"
        f"--   CREATE ROLE alice LOGIN PASSWORD '…'; GRANT {names['operator']} TO alice;\n"
        "-- Run as the owner of jobtui's tables (or a superuser), after `jobtui migrate`.\n"
    )
    return header + body.rstrip() + "\n"


def drop_roles_sql(prefix: str = DEFAULT_PREFIX) -> str:
    """Statements that remove the roles again (their grants in this database first)."""
    names = role_names(prefix)
    lines = [f"DROP OWNED BY {names[s]};" for s in reversed(ROLE_SUFFIXES)]
    lines += [f"DROP ROLE IF EXISTS {names[s]};" for s in reversed(ROLE_SUFFIXES)]
    return "\n".join(lines) + "\n"
