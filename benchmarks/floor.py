"""The floor under jobtui's drain and bulk enqueue: a bare consumer and a bare COPY, measured
on the article's plain table, on jobtui's real schema, and on steps in between.

Issue 14's targets (drain ≥ 45 000 jobs/s with 2 worker processes, 20 000 jobs in one bulk
call ≤ 0.12 s) came from the article's table. This shows what the same bare code does on each
schema, so the cost of each part of jobtui's schema is visible:

  article                              the article's DDL: jobs + jobs_pending (run_at) WHERE
                                       finished_at IS NULL, beside the primary key
  jobtui schema                        jobtui.schema.migrate(conn, "public"), the real thing
  jobtui schema, no count triggers     the same, ALTER TABLE jobs DISABLE TRIGGER USER
  jobtui schema, claim indexes only    the same, and every index dropped but the primary key
                                       and the one the claim uses (found by EXPLAIN)

and, when asked for (not by default), on steps that each take one thing away (triggers on):

  jobtui schema, no INDEX              `--drop INDEX[,INDEX…]`: jobtui's schema with that one
                                       index dropped, a variant per index named (`A+B`: one
                                       variant without both)
  jobtui schema, history table         `--history`: the finished phase moved out of `jobs`: the
                                       completion is WITH d AS (DELETE FROM jobs … RETURNING *)
                                       INSERT INTO jobs_history SELECT … (finished_at = now()),
                                       jobs_finished and jobs_finished_kind_id dropped from jobs,
                                       jobs_history a plain copy of jobs' columns with one index,
                                       (finished_at), and no primary key; and the same with
                                       a primary key (id) on jobs_history (both with --history)

`--split` also times each variant's claim and completion apart (µs a job, at the client, one
connection, no other worker), to tell which phase an index or the history table costs.

The bare worker (one asyncio psycopg connection per process) claims `--batch` jobs with the
article's UPDATE … WHERE id = ANY(ARRAY(SELECT … FOR UPDATE SKIP LOCKED)) RETURNING id (the
batch form of its `id = (SELECT … LIMIT 1)`; see CLAIM), commits, and completes them as the
article does on success (finished_at = now(), nothing else) in one UPDATE … WHERE id = ANY(…),
and commits (autocommit: one round trip a statement, no separate COMMIT). It does NOT do what
jobtui's claim also does: write locked_by and the effective max_attempts, check attempts <
max_attempts, cancel requests and paused or limited kinds, return kind and payload and decode
them, check at completion that it still holds the attempt, heartbeat, LISTEN. On the jobtui
variants it orders by jobtui's claim order (priority DESC, run_at, id) so the claim index
(jobs_claim) serves it; on the article's table by run_at (its jobs_pending index).

    .venv/bin/python -m benchmarks.floor --rounds 3 [--jobs 20000 --workers 2 --batch 100]
    .venv/bin/python -m benchmarks.floor --rounds 3 --no-product --history \
        --drop jobs_claim_kind,jobs_pending,jobs_pending_kind,jobs_running \
        --drop jobs_finished,jobs_finished_kind_id
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from typing import Any

import psycopg

from benchmarks.article import ARTICLE_DDL
from benchmarks.common import Bench, CpuSplit, ScenarioSkipped
from benchmarks.drain import POLL_S, drain_once
from benchmarks.enqueue import bare_copy, bulk_enqueue
from benchmarks.server_cost import wal_of_database
from benchmarks.systems import Jobtui

ADMIN_DSN = "postgresql://root@127.0.0.1:5432/postgres"


ARTICLE_ORDER = "run_at"
JOBTUI_ORDER = "priority DESC, run_at, id"

CLAIM_SELECT = (
    "SELECT id FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL AND run_at <= now() "
    "ORDER BY {order} LIMIT %(batch)s FOR UPDATE SKIP LOCKED"
)
# The article claims one job with `WHERE id = (SELECT … LIMIT 1 …)`, a sub-select run once (an
# InitPlan), the row then found by primary key. Its batch form is `id = ANY(ARRAY(SELECT …))`.
# Written `id IN (SELECT …)` the planner makes it a hash semi-join over a sequential scan of the
# whole table (EXPLAIN ANALYZE at 20 000 rows: 5.9 ms a claim, against 0.1 ms for the sub-select
# itself), so the drain falls to ~10 000 jobs/s for a plan accident, not for the work.
CLAIM = (
    "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id = ANY(ARRAY("
    + CLAIM_SELECT
    + ")) RETURNING id"
)
COMPLETE = "UPDATE jobs SET finished_at = now() WHERE id = ANY(%s)"
# Waiting and running rows apart: on jobtui's schema (since 0020) no index holds every unfinished
# row, and `finished_at IS NULL` alone would be a sequential scan every 10 ms.
ANY_UNFINISHED = (
    "SELECT EXISTS (SELECT 1 FROM jobs WHERE finished_at IS NULL AND locked_at IS NULL)"
    " OR EXISTS (SELECT 1 FROM jobs WHERE finished_at IS NULL AND locked_at IS NOT NULL)"
)

ARTICLE = "article"
FULL = "jobtui schema"
NO_TRIGGERS = "jobtui schema, no count triggers"
CLAIM_ONLY = "jobtui schema, claim indexes only"
PRODUCT = "jobtui worker + enqueue_many (product)"
VARIANTS = (ARTICLE, FULL, NO_TRIGGERS, CLAIM_ONLY)
ORDER = {ARTICLE: ARTICLE_ORDER, FULL: JOBTUI_ORDER, NO_TRIGGERS: JOBTUI_ORDER}
ORDER[CLAIM_ONLY] = JOBTUI_ORDER
HISTORY = "jobtui schema, history table"
HISTORY_PK = "jobtui schema, history table with primary key"
HISTORIES = (HISTORY, HISTORY_PK)
NO_INDEX = "jobtui schema, no "  # + the index's name: `--drop`'s variants
# The finished phase's indexes on jobs, which the history table variant moves off it.
FINISHED_INDEXES = ("jobs_finished", "jobs_finished_kind_id")
# The history variant's completion: the rows leave jobs and enter jobs_history, finished now.
# {columns} is jobs' columns but finished_at, in order (history_complete reads them).
COMPLETE_INTO_HISTORY = (
    "WITH d AS (DELETE FROM jobs WHERE id = ANY(%s) RETURNING {columns}) "
    "INSERT INTO jobs_history ({columns}, finished_at) SELECT {columns}, now() FROM d"
)

# What each variant's setup found (the claim index, the indexes dropped), printed once.
found: dict[str, str] = {}


# ---------------------------------------------------------------------------------------------
# Schemas


def _migrate(conn: psycopg.Connection) -> None:
    from jobtui.schema.migrator import migrate

    migrate(conn, "public")


def claim_index(conn: psycopg.Connection, order: str) -> str:
    """The index the claim's sub-select walks, from EXPLAIN with sequential scans and sorts
    discouraged (the table is still empty, so the planner would otherwise scan it)."""
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_sort = off")
    row = conn.execute(
        "EXPLAIN (FORMAT JSON) " + CLAIM_SELECT.format(order=order).replace("%(batch)s", "100")
    ).fetchone()
    conn.execute("RESET enable_seqscan")
    conn.execute("RESET enable_sort")
    names: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if "Index Name" in node:
            names.append(node["Index Name"])
        for child in node.get("Plans", []):
            walk(child)

    walk(row[0][0]["Plan"] if row else {})
    if len(names) != 1:
        raise ScenarioSkipped(f"the claim plan uses {names or 'no index'}, expected one index")
    return names[0]


def setup(variant: str, dsn: str) -> None:
    """Build `variant`'s schema in the (empty) database at `dsn`."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if variant == ARTICLE:
            conn.execute(ARTICLE_DDL)
            found[variant] = "indexes: jobs_pkey, jobs_pending (run_at) WHERE finished_at IS NULL"
            return
        _migrate(conn)
        if variant == FULL:
            return
        if variant not in VARIANTS:  # one of --drop's or --history's
            setup_step(conn, variant)
            return
        conn.execute("ALTER TABLE jobs DISABLE TRIGGER USER")
        if variant == NO_TRIGGERS:
            return
        keep = claim_index(conn, JOBTUI_ORDER)
        rows = conn.execute(
            "SELECT i.relname, c.conname FROM pg_index x "
            "JOIN pg_class i ON i.oid = x.indexrelid "
            "LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid AND c.conrelid = x.indrelid "
            "WHERE x.indrelid = 'jobs'::regclass AND NOT x.indisprimary AND i.relname <> %s",
            (keep,),
        ).fetchall()
        for index, constraint in rows:
            if constraint:
                conn.execute(f'ALTER TABLE jobs DROP CONSTRAINT "{constraint}"')
            else:
                conn.execute(f'DROP INDEX "{index}"')
        found[variant] = f"kept jobs_pkey and {keep} (the claim's); dropped {len(rows)} indexes"


def setup_step(conn: psycopg.Connection, variant: str) -> None:
    """jobtui's schema (migrated on `conn`) with one thing taken away, the triggers on: an
    index (`NO_INDEX` + its name; several joined by "+" for one variant without them all), or
    the finished phase moved to a history table (`HISTORY`)."""
    drop = FINISHED_INDEXES if variant in HISTORIES else variant.removeprefix(NO_INDEX).split("+")
    for index in drop:
        row = conn.execute(
            "SELECT 1 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = 'jobs'::regclass AND i.relname = %s AND NOT x.indisprimary",
            (index,),
        ).fetchone()
        if row is None:
            raise ScenarioSkipped(f"{variant}: jobs has no index {index!r} (not the primary key)")
        conn.execute(f'DROP INDEX "{index}"')
    found[variant] = f"dropped {', '.join(drop)}; count triggers on"
    if variant in HISTORIES:
        conn.execute("CREATE TABLE jobs_history (LIKE jobs INCLUDING DEFAULTS)")
        conn.execute("CREATE INDEX jobs_history_finished ON jobs_history (finished_at)")
        found[variant] += "; jobs_history (LIKE jobs), an index on (finished_at)"
        if variant == HISTORY_PK:
            conn.execute("ALTER TABLE jobs_history ADD PRIMARY KEY (id)")
        found[variant] += " and its primary key (id)" if variant == HISTORY_PK else " alone"


def history_complete(dsn: str) -> str:
    """The history variant's completion, with jobs' columns (but finished_at) spelt out."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'jobs'::regclass AND attnum > 0 "
            "AND NOT attisdropped AND attname <> 'finished_at' ORDER BY attnum"
        ).fetchall()
    columns = ", ".join(f'"{r[0]}"' for r in rows)
    return COMPLETE_INTO_HISTORY.format(columns=columns)


# ---------------------------------------------------------------------------------------------
# The bare worker


async def _bare_loop(
    dsn: str, order: str, batch: int, ready: Barrier, go: Barrier, complete: str
) -> None:
    # Autocommit: each UPDATE is its own transaction, committed with it, one round trip each.
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        claim = CLAIM.format(order=order)
        await asyncio.to_thread(ready.wait)  # connected: the parent takes its CPU baseline
        await asyncio.to_thread(go.wait)
        while True:
            cur = await conn.execute(claim, {"batch": batch})
            ids = [r[0] for r in await cur.fetchall()]
            if not ids:  # nothing ready and unlocked: the other workers finish what they hold
                return
            await conn.execute(complete, (ids,))


def bare_worker(
    dsn: str, order: str, batch: int, ready: Barrier, go: Barrier, complete: str = COMPLETE
) -> None:
    asyncio.run(_bare_loop(dsn, order, batch, ready, go, complete))


def load(dsn: str, n: int) -> None:
    """`n` ready no-op jobs, then ANALYZE (not timed)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (kind, payload) "
            "SELECT 'noop', jsonb_build_object('n', i) FROM generate_series(1, %s) i",
            (n,),
        )
        conn.execute("ANALYZE jobs")


def wal_position(conn: psycopg.Connection) -> str:
    """The flushed end of WAL: pg_waldump reads files, so a range that ends past what is
    written fails (the insert position can be ahead of it)."""
    row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    return str(row[0]) if row else "0/0"


def drain_bare(bench: Bench, dsn: str, variant: str, n: int, workers: int, batch: int) -> dict:
    load(dsn, n)
    complete = history_complete(dsn) if variant in HISTORIES else COMPLETE
    order = ORDER.get(variant, JOBTUI_ORDER)
    ctx = mp.get_context("spawn")
    ready, go = ctx.Barrier(workers + 1), ctx.Barrier(workers + 1)
    procs = [
        ctx.Process(target=bare_worker, args=(dsn, order, batch, ready, go, complete))
        for _ in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            info = conn.execute(
                "SELECT current_setting('data_directory'), oid FROM pg_database "
                "WHERE datname = current_database()"
            ).fetchone()
            cpu = CpuSplit(bench, {p.pid for p in procs if p.pid})
            ready.wait(timeout=60)
            lsn0 = wal_position(conn)
            if cpu.available:
                cpu.start()
            go.wait(timeout=60)
            t0 = time.perf_counter()
            while True:
                row = conn.execute(ANY_UNFINISHED).fetchone()
                seconds = time.perf_counter() - t0
                if cpu.available:
                    cpu.sample()
                if row is not None and not row[0]:
                    break
                if not any(p.is_alive() for p in procs):
                    raise ScenarioSkipped(f"{variant}: the workers ended with jobs unfinished")
                time.sleep(POLL_S)
            split = cpu.split() if cpu.available else {}
            lsn1 = wal_position(conn)
            diff = conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (lsn1, lsn0)).fetchone()
        wal_all = float(diff[0]) if diff else float("nan")
        wal_ours = float("nan")
        if info:
            wal_ours = wal_of_database(f"{info[0]}/pg_wal", int(info[1]), lsn0, lsn1)[1]
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.terminate()
    return {
        "seconds": seconds,
        "rate": n / seconds,
        **split,
        "wal_bytes_per_job": wal_ours / n,
        "wal_cluster_bytes_per_job": wal_all / n,
    }


def drain_serial(dsn: str, variant: str, n: int, batch: int) -> dict[str, float]:
    """`--split`: the same claim and completion from one connection, one after the other, each
    statement timed at the client (its round trip included): what each phase costs a job with no
    other worker beside it."""
    load(dsn, n)
    complete = history_complete(dsn) if variant in HISTORIES else COMPLETE
    claim = CLAIM.format(order=ORDER.get(variant, JOBTUI_ORDER))
    claim_s = complete_s = 0.0
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            t0 = time.perf_counter()
            ids = [r[0] for r in conn.execute(claim, {"batch": batch}).fetchall()]
            t1 = time.perf_counter()
            claim_s += t1 - t0
            if not ids:
                break
            conn.execute(complete, (ids,))
            complete_s += time.perf_counter() - t1
    return {"claim_us_per_job": claim_s / n * 1e6, "complete_us_per_job": complete_s / n * 1e6}


# ---------------------------------------------------------------------------------------------
# Rounds


def one_copy(bench: Bench, template: str, n: int, product: bool) -> float:
    with bench.fresh_db("floor", template=template) as dsn, psycopg.connect(dsn) as conn:
        conn.autocommit = True
        return (bulk_enqueue if product else bare_copy)(conn, n)


def one_drain(bench: Bench, template: str, variant: str, args: argparse.Namespace) -> dict:
    with bench.fresh_db("floor", template=template) as dsn:
        return drain_bare(bench, dsn, variant, args.jobs, args.workers, args.batch)


def run(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    bench = Bench(admin_dsn=args.dsn, quick=False, runs=args.rounds, origin="floor --dsn")
    variants = [*VARIANTS, *extra_variants(args)]
    results: dict[str, dict[str, list[float]]] = {v: {} for v in (*variants, PRODUCT)}

    def add(variant: str, key: str, value: float) -> None:
        results[variant].setdefault(key, []).append(value)

    templates = {v: bench.template(template_key(v), _setup_for(v)) for v in variants}
    names = [*variants, PRODUCT] if args.product else variants
    try:
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            print(f"round {r + 1}: {', '.join(order)}", flush=True)
            for variant in order:
                if variant == PRODUCT:
                    rec = drain_once(bench, Jobtui(), args.jobs, args.workers)
                    add(variant, "rate", rec["rate"])
                    for key in ("server_cpu_s", "workers_cpu_s"):
                        if key in rec:
                            add(variant, key, rec[key])
                    add(variant, "copy_s", one_copy(bench, templates[FULL], args.jobs, True))
                    continue
                add(variant, "copy_s", one_copy(bench, templates[variant], args.jobs, False))
                for key, value in one_drain(bench, templates[variant], variant, args).items():
                    add(variant, key, value)
                if args.split:
                    with bench.fresh_db("floor", template=templates[variant]) as dsn:
                        for key, value in drain_serial(dsn, variant, args.jobs, args.batch).items():
                            add(variant, key, value)
                print(f"  {variant}: {_brief(results[variant])}", flush=True)
    finally:
        bench.cleanup()
    return results


def extra_variants(args: argparse.Namespace) -> list[str]:
    """The variants `--drop` and `--history` ask for, after the default ones."""
    names = [NO_INDEX + index for index in args.drop]
    return [*names, *HISTORIES] if args.history else names


def template_key(variant: str) -> str:
    """The variant's name as part of a database name (bench_tpl_KEY_xxxxxxxx, within
    PostgreSQL's 63 bytes: a longer name would be cut, and two variants could then collide)."""
    key = variant.replace(" ", "_").replace(",", "").replace("+", "_")
    if len(key) <= 40:
        return key
    return key[:31] + "_" + hashlib.sha1(variant.encode()).hexdigest()[:8]


def _setup_for(variant: str) -> Callable[[str], None]:
    return lambda dsn: setup(variant, dsn)


def _brief(figures: dict[str, list[float]]) -> str:
    return ", ".join(f"{k} {v[-1]:.3g}" for k, v in figures.items())


# ---------------------------------------------------------------------------------------------
# Output


def spread(values: list[float] | None, fmt: str) -> str:
    """median [min–max]; runs without a figure (NaN: pg_waldump could not read the range) are
    left out and counted."""
    kept = [v for v in values or [] if not math.isnan(v)]
    if not kept:
        return "-"
    med = statistics.median(kept)
    text = f"{med:{fmt}} [{min(kept):{fmt}}–{max(kept):{fmt}}]"
    missing = len(values or []) - len(kept)
    return text + (f" ({missing} n/a)" if missing else "")


COLUMNS = (
    ("bulk COPY s", "copy_s", ".3f"),
    ("drain jobs/s", "rate", ",.0f"),
    ("server CPU s", "server_cpu_s", ".2f"),
    ("workers CPU s", "workers_cpu_s", ".2f"),
    ("WAL bytes/job", "wal_bytes_per_job", ",.0f"),
)
SPLIT_COLUMNS = (
    ("claim µs/job, 1 conn", "claim_us_per_job", ".2f"),
    ("completion µs/job, 1 conn", "complete_us_per_job", ".2f"),
)


def columns(results: dict[str, dict[str, list[float]]]) -> tuple[tuple[str, str, str], ...]:
    """COLUMNS, and `--split`'s when it ran."""
    split = any("claim_us_per_job" in figures for figures in results.values())
    return (*COLUMNS, *SPLIT_COLUMNS) if split else COLUMNS


def print_ratios(results: dict[str, dict[str, list[float]]]) -> None:
    """Each variant's medians over the article's (only when extra variants were asked for)."""
    base = results[ARTICLE]
    print("each over the article's table (ratio of medians):")
    for variant, figures in results.items():
        if variant in (ARTICLE, PRODUCT) or not figures:
            continue
        cells = []
        for title, key, _ in columns(results):
            mine = [v for v in figures.get(key, []) if not math.isnan(v)]
            theirs = [v for v in base.get(key, []) if not math.isnan(v)]
            if mine and theirs and statistics.median(theirs):
                ratio = statistics.median(mine) / statistics.median(theirs)
                cells.append(f"{title} {ratio:.2f}×")
        print(f"  {variant}: {', '.join(cells)}")


def print_table(results: dict[str, dict[str, list[float]]]) -> None:
    shown = columns(results)
    header = ["variant", *(c[0] for c in shown)]
    rows = [header]
    for variant, figures in results.items():
        if figures:
            rows.append([variant, *(spread(figures.get(key), fmt) for _, key, fmt in shown)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for i, row in enumerate(rows):
        print(" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if i == 0:
            print("-+-".join("-" * w for w in widths))


def print_targets(results: dict[str, dict[str, list[float]]]) -> None:
    """The target against the best variant that still carries jobtui's full schema (the
    bare code on it), beside the article's table: a target the article's table misses too is
    bounded by this machine at this load, not by the schema."""

    def med(variant: str, key: str) -> float:
        return statistics.median(results[variant][key])

    rate, floor_rate = med(FULL, "rate"), med(ARTICLE, "rate")
    print(
        f"drain ≥ 45 000 jobs/s: {FULL}, bare loop {rate:,.0f} jobs/s "
        f"({'met' if rate >= 45000 else 'MISSED'}); article's table {floor_rate:,.0f} "
        f"({'met' if floor_rate >= 45000 else 'MISSED'}); schema costs "
        f"{1 - rate / floor_rate:.0%} of the article's rate"
    )
    copy, floor_copy = med(FULL, "copy_s"), med(ARTICLE, "copy_s")
    print(
        f"enqueue 20 000 ≤ 0.120 s: {FULL}, bare COPY {copy:.3f} s "
        f"({'met' if copy <= 0.12 else 'MISSED'}); article's table {floor_copy:.3f} s "
        f"({'met' if floor_copy <= 0.12 else 'MISSED'}); {copy / floor_copy:.1f}× the article's"
    )
    if results[PRODUCT].get("copy_s"):
        many = statistics.median(results[PRODUCT]["copy_s"])
        print(f"  (jobtui's enqueue_many on {FULL}: {many:.3f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("JOBTUI_BENCH_DSN", ADMIN_DSN))
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--json", help="save the raw per-round figures here")
    parser.add_argument(
        "--no-product",
        dest="product",
        action="store_false",
        help="skip jobtui's own worker drain and enqueue_many",
    )
    parser.add_argument(
        "--drop",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        action="extend",
        default=[],
        metavar="INDEX[,INDEX…]",
        help="also run jobtui's schema with each named index dropped, one variant per index "
        "(INDEX+INDEX: one variant without both)",
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="also run jobtui's schema with finished jobs moved to a history table (without and "
        "with a primary key on it)",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="also time each variant's claim and completion apart, from one connection",
    )
    args = parser.parse_args()
    if min(args.jobs, args.rounds, args.workers, args.batch) < 1:
        parser.error("--jobs, --rounds, --workers and --batch must be at least 1")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    try:
        results = run(args)
    except (psycopg.Error, ScenarioSkipped) as exc:
        raise SystemExit(f"floor: {exc}") from None
    print()
    for variant, text in found.items():
        print(f"{variant}: {text}")
    print(
        f"{args.jobs} jobs, {args.workers} bare worker processes, batch {args.batch}, "
        f"{args.rounds} rounds; median [min–max]; WAL counts this database's transactions only "
        "(pg_waldump, with full-page images); server CPU is every postmaster child's (others' "
        "sessions included); the product row's bulk column is enqueue_many on the full schema, "
        "its drain is benchmarks.drain's jobtui run (concurrency 200)"
    )
    print_table(results)
    print_targets(results)
    if args.drop or args.history or args.split:
        print_ratios(results)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "results": results, "found": found}, fh, indent=2)


if __name__ == "__main__":
    main()
