"""Issue 24: what each of a job's own writes costs on jobtui's schema, part by part.

One job's life is three single-row statements: the producer's INSERT (with its NOTIFY, one
statement), a consumer's claim (the article's `id = (SELECT … LIMIT 1 FOR UPDATE SKIP LOCKED)`)
and its completion (`finished_at = now()`). This times each, one job at a time on autocommit
connections, on the variants of benchmarks/floor.py plus one (each its own database):

  article                              the article's DDL (primary key + jobs_pending)
  jobtui schema                        the real thing (7 indexes, count triggers)
  jobtui schema, no count triggers     ALTER TABLE jobs DISABLE TRIGGER USER
  jobtui schema, claim indexes only    no triggers, every index dropped but the primary key
                                       and the claim's
  jobtui schema, claim indexes only, triggers on

Blocks of `--block` jobs rotate over the variants, so the machine's drift hits all of them; it
prints each write's mean per job and its ratio to the article's. Same statements everywhere:
what differs is only the schema under them.

    .venv/bin/python -m benchmarks.write_cost [--jobs 4000 --rounds 2 --block 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from psycopg.types.json import Jsonb

from benchmarks.common import Bench
from benchmarks.enqueue import ARTICLE_ENQUEUE
from benchmarks.floor import (
    ARTICLE,
    ARTICLE_ORDER,
    CLAIM_ONLY,
    CLAIM_SELECT,
    FULL,
    JOBTUI_ORDER,
    NO_TRIGGERS,
    found,
    setup,
)

ADMIN_DSN = "postgresql://root@127.0.0.1:5432/postgres"
INDEXES_ONLY = "jobtui schema, claim indexes only, triggers on"
VARIANTS = (ARTICLE, FULL, NO_TRIGGERS, CLAIM_ONLY, INDEXES_ONLY)
WRITES = ("insert + notify", "claim one", "complete one")
CLAIM_ONE = (
    "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id = ("
    + CLAIM_SELECT.replace("%(batch)s", "1")
    + ") RETURNING id"
)
COMPLETE_ONE = "UPDATE jobs SET finished_at = now() WHERE id = %s"


def block(conn: psycopg.Connection, variant: str, n: int, spent: dict[str, float]) -> None:
    """`n` jobs through their three writes, one statement at a time, each kind of write timed."""
    claim = CLAIM_ONE.format(order=ARTICLE_ORDER if variant == ARTICLE else JOBTUI_ORDER)
    t0 = time.perf_counter()
    for i in range(n):
        conn.execute(ARTICLE_ENQUEUE, ("bench", Jsonb({"i": i}))).fetchone()
    t1 = time.perf_counter()
    ids = []
    for _ in range(n):
        row = conn.execute(claim).fetchone()
        assert row is not None
        ids.append(row[0])
    t2 = time.perf_counter()
    for job in ids:
        conn.execute(COMPLETE_ONE, (job,))
    t3 = time.perf_counter()
    for write, seconds in zip(WRITES, (t1 - t0, t2 - t1, t3 - t2), strict=True):
        spent[write] += seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=4000, help="jobs per variant per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--block", type=int, default=200)
    ap.add_argument("--dsn", default=ADMIN_DSN)
    args = ap.parse_args()
    bench = Bench(args.dsn, quick=False, runs=args.rounds, origin="JOBTUI_BENCH_DSN")
    per_job: dict[str, dict[str, list[float]]] = {v: {w: [] for w in WRITES} for v in VARIANTS}
    try:
        for r in range(args.rounds):
            with ExitStack() as stack:
                dsns = {
                    v: stack.enter_context(bench.fresh_db(f"writes{i}", migrate=False))
                    for i, v in enumerate(VARIANTS)
                }
                for v, dsn in dsns.items():
                    setup(CLAIM_ONLY if v == INDEXES_ONLY else v, dsn)
                    with psycopg.connect(dsn, autocommit=True) as conn:
                        if v == INDEXES_ONLY:
                            conn.execute("ALTER TABLE jobs ENABLE TRIGGER USER")
                        conn.execute("ANALYZE jobs")
                conns = {
                    v: stack.enter_context(psycopg.connect(dsn, autocommit=True))
                    for v, dsn in dsns.items()
                }
                spent = {v: dict.fromkeys(WRITES, 0.0) for v in VARIANTS}
                for v, conn in conns.items():
                    block(conn, v, 50, dict.fromkeys(WRITES, 0.0))  # warm up
                for b, start in enumerate(range(0, args.jobs, args.block)):
                    turn = b % len(VARIANTS)
                    for v in VARIANTS[turn:] + VARIANTS[:turn]:
                        block(conns[v], v, min(args.block, args.jobs - start), spent[v])
                for v in VARIANTS:
                    for w in WRITES:
                        per_job[v][w].append(spent[v][w] / args.jobs * 1e6)
            print(f"  round {r + 1} done", flush=True)
    finally:
        bench.cleanup()
    print(
        f"\nµs per job, median of {args.rounds} round(s) of {args.jobs} jobs per variant "
        "(a shared 2-core machine: noisy)"
    )
    print(f"{'variant':48}" + "".join(f"{w:>24}" for w in WRITES))
    base = {w: statistics.median(per_job[ARTICLE][w]) for w in WRITES}
    for v in VARIANTS:
        cells = ""
        for w in WRITES:
            us = statistics.median(per_job[v][w])
            cells += f"{us:14.0f} ({us / base[w]:4.2f}×)"
        print(f"{v:48}{cells}")
    for v, text in found.items():
        print(f"  {v}: {text}")


if __name__ == "__main__":
    main()
