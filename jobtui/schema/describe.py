"""A schema's objects as text that no server version, owner or schema name changes.

`describe(conn, schema)` lists every table, column, constraint, index, sequence, function (with
its body), trigger, view and grant of `schema`, one item each, sorted, with the schema's own name
spelled `__schema__`. Two schemas with the same description behave the same for every statement
jobtui runs. tools/schema_describe.py prints it; tests/test_schema_baseline.py compares the
baseline's with tests/data/schema_v24.txt, the description of the schema the 24 migration files
built before they were folded into the baseline; tests/test_schema_v25.py the baseline and 0025
with tests/data/schema_v25.txt.
"""

from __future__ import annotations

import psycopg

from jobtui.sql import queries, quote_schema


def describe(conn: psycopg.Connection, schema: str) -> str:
    """The normalised description of `schema`, one item a paragraph, ending in a newline."""
    q = queries(schema)
    with conn.transaction():
        conn.execute(q.migrate_describe_search_path)
        rows = conn.execute(q.migrate_describe, {"schema": schema}).fetchall()
    names = [f"{quote_schema(schema)}.", f"{schema}."]
    items = []
    for (item,) in rows:
        for name in names:
            item = item.replace(name, "__schema__.")
        items.append("\n".join(line.rstrip() for line in item.strip("\n").splitlines()))
    return "\n".join(sorted(items)) + "\n"
