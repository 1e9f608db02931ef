"""What migration 0016's counting triggers cost a producer: single-row INSERTs into `jobs` with
the triggers enabled and disabled (`ALTER TABLE jobs DISABLE TRIGGER USER`), in interleaved
rounds, on a scratch database that is dropped afterwards.

    .venv/bin/python benchmarks/trigger_cost.py --dsn postgresql://root@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import conninfo, sql

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parent.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://root@127.0.0.1:5432/postgres")
    parser.add_argument("--rows", type=int, default=2000, help="INSERTs per round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    from jobtui.schema import migrate

    name = f"jobtui_trigcost_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = conninfo.make_conninfo(args.dsn, dbname=name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            migrate(conn, "public")
            spent: dict[str, list[float]] = {"enabled": [], "disabled": []}
            for r in range(args.rounds):
                order = ("enabled", "disabled") if r % 2 == 0 else ("disabled", "enabled")
                for mode in order:
                    switch = "ENABLE" if mode == "enabled" else "DISABLE"
                    conn.execute(f"ALTER TABLE jobs {switch} TRIGGER USER")
                    t0 = time.perf_counter()
                    for _ in range(args.rows):
                        conn.execute("INSERT INTO jobs (kind, payload) VALUES ('bench', '{}')")
                    spent[mode].append((time.perf_counter() - t0) / args.rows * 1e6)
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
    for mode, values in spent.items():
        shown = ", ".join(f"{v:.0f}" for v in values)
        print(
            f"single-row INSERT, triggers {mode}: median {statistics.median(values):.0f} µs"
            f" ({shown})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
