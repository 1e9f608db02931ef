"""Print the normalised description of a schema jobtui migrated (jobtui.schema.describe).

    python tools/schema_describe.py DSN [--fresh]

With `--fresh`, migrate a new scratch schema first, describe it and drop it: what the shipped
migrations build. tests/data/schema_v24.txt is this output for the 24 migration files that the
baseline replaced (made with --fresh before they were deleted); the test compares against it.
"""

from __future__ import annotations

import argparse
import secrets
import sys

import psycopg

from jobtui.schema import migrate
from jobtui.schema.describe import describe
from jobtui.sql import queries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dsn", help="the database to connect to")
    parser.add_argument("--schema", default="public", help="the schema to describe")
    parser.add_argument(
        "--fresh", action="store_true", help="migrate a scratch schema, describe it, drop it"
    )
    args = parser.parse_args(argv)
    try:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            if not args.fresh:
                sys.stdout.write(describe(conn, args.schema))
                return 0
            scratch = f"jobtui_describe_{secrets.token_hex(4)}"
            try:
                migrate(conn, scratch)
                sys.stdout.write(describe(conn, scratch))
            finally:
                conn.execute(queries(scratch).migrate_drop_scratch_schema)
    except psycopg.Error as exc:
        print(f"schema_describe: {exc.diag.message_primary or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
