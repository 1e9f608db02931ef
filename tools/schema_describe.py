"""Print the normalised description of a schema jobtui migrated (jobtui.schema.describe).

    python tools/schema_describe.py DSN [--fresh [--up-to VERSION]]

With `--fresh`, migrate a new scratch schema first (up to VERSION, else every shipped
migration), describe it and drop it: what the shipped migrations build. tests/data/
schema_v24.txt is this output for the 24 migration files that the baseline replaced (made with
--fresh before they were deleted), and tests/data/schema_v25.txt for the baseline and 0025 (made
with --fresh --up-to 25); the tests compare against them.
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
    parser.add_argument(
        "--up-to", type=int, default=None, metavar="VERSION", help="with --fresh: stop there"
    )
    args = parser.parse_args(argv)
    try:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            if not args.fresh:
                sys.stdout.write(describe(conn, args.schema))
                return 0
            scratch = f"jobtui_describe_{secrets.token_hex(4)}"
            try:
                migrate(conn, scratch, up_to=args.up_to)
                sys.stdout.write(describe(conn, scratch))
            finally:
                conn.execute(queries(scratch).migrate_drop_scratch_schema)
    except psycopg.Error as exc:
        print(f"schema_describe: {exc.diag.message_primary or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
