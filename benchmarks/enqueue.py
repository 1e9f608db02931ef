"""Enqueue cost: N single `enqueue` calls against a bare INSERT per job, and one `enqueue_many`.

Both single loops run on the same autocommit connection (each call its own transaction, as an
application enqueuing outside a transaction would), alternating which goes first, with the table
truncated in between. The ratio is jobtui's time over the bare INSERT's.

The floors of issue 24 are on the article's plain `jobs` table (benchmarks/article.py), in a
database of its own, in the same run: one INSERT + NOTIFY statement per job there (`article`,
interleaved with the other loops), and one COPY for the bulk call. The bare INSERT into
jobtui's own table hides what jobtui's schema (its indexes, its count triggers) costs.
"""

from __future__ import annotations

import time

import psycopg
from psycopg.types.json import Jsonb

from benchmarks.article import ARTICLE_DDL
from benchmarks.common import SCHEMA, Bench, Figure, analyze, at_most


def _bare(conn: psycopg.Connection, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        conn.execute("INSERT INTO jobs (kind, payload) VALUES (%s, %s)", ("bench", Jsonb({"i": i})))
    return time.perf_counter() - t0


ARTICLE_ENQUEUE = """
WITH ins AS (INSERT INTO jobs (kind, payload) VALUES (%s, %s) RETURNING id)
SELECT id, pg_notify('jobs', 'bench') FROM ins
"""


def _article(conn: psycopg.Connection, n: int) -> float:
    """The floor: the article's table, its producer's INSERT with a NOTIFY, one statement."""
    t0 = time.perf_counter()
    for i in range(n):
        conn.execute(ARTICLE_ENQUEUE, ("bench", Jsonb({"i": i}))).fetchone()
    return time.perf_counter() - t0


def _single(conn: psycopg.Connection, n: int) -> float:
    from jobtui.enqueue import enqueue

    t0 = time.perf_counter()
    for i in range(n):
        enqueue(conn, "bench", {"i": i}, schema=SCHEMA)
    return time.perf_counter() - t0


def _statement(conn: psycopg.Connection, n: int) -> float:
    """enqueue's own SQL with ready-made parameters: its cost without the Python around it."""
    from datetime import timedelta

    from jobtui.sql import notify_channel, queries

    sql, channel = queries(SCHEMA).enqueue, notify_channel(SCHEMA)
    t0 = time.perf_counter()
    for i in range(n):
        conn.execute(
            sql,
            {
                "kind": "bench",
                "payload": Jsonb({"i": i}),
                "run_at": None,
                "delay": timedelta(0),
                "max_attempts": 5,
                "priority": 0,
                "channel": channel,
            },
        ).fetchone()
    return time.perf_counter() - t0


def bulk_enqueue(conn: psycopg.Connection, n: int) -> float:
    from jobtui.enqueue import enqueue_many

    jobs = [{"kind": "bench", "payload": {"i": i}} for i in range(n)]
    t0 = time.perf_counter()
    enqueue_many(conn, jobs, schema=SCHEMA)
    return time.perf_counter() - t0


def bare_copy(conn: psycopg.Connection, n: int) -> float:
    """The floor for a bulk call: the same rows by one COPY of ready-made text, no checks."""
    text = "".join(f'bench\t{{"i": {i}}}\n' for i in range(n))
    t0 = time.perf_counter()
    with (
        conn.transaction(),
        conn.cursor() as cur,
        cur.copy("COPY jobs (kind, payload) FROM STDIN") as copy,
    ):
        copy.write(text)
    return time.perf_counter() - t0


BLOCK = 500


def run(bench: Bench) -> list[Figure]:
    """Per run: the three single-job loops interleaved in blocks of 500, then one bulk call."""
    n = bench.scale(20_000, 2_000)
    runs = bench.n_runs(3)
    loops = {"bare": _bare, "enqueue": _single, "statement": _statement, "article": _article}
    totals: dict[str, list[float]] = {name: [] for name in loops}
    bulk: list[float] = []
    copy: list[float] = []
    article_copy: list[float] = []
    with (
        bench.fresh_db("enqueue") as dsn,
        bench.fresh_db("enqueue_article", migrate=False) as article_dsn,
    ):
        with psycopg.connect(article_dsn, autocommit=True) as article:
            article.execute(ARTICLE_DDL)
        analyze(dsn)
        analyze(article_dsn)
        with (
            psycopg.connect(dsn, autocommit=True) as conn,
            psycopg.connect(article_dsn, autocommit=True) as article,
        ):
            conns = {name: article if name == "article" else conn for name in loops}
            for name, fn in loops.items():
                fn(conns[name], 200)  # warm up: prepared statements, caches
            for r in range(runs):
                conn.execute("TRUNCATE jobs")
                article.execute("TRUNCATE jobs")
                spent = dict.fromkeys(loops, 0.0)
                order = list(loops)
                for block in range(0, n, BLOCK):
                    # Interleaved, rotating order: drift and neighbours' noise hit all of them.
                    turn = block // BLOCK % len(order)
                    for name in order[turn:] + order[:turn]:
                        spent[name] += loops[name](conns[name], min(BLOCK, n - block))
                for name, seconds in spent.items():
                    totals[name].append(seconds)
                # Rotating which of the three bulk loads goes first.
                loads = [
                    (conn, bulk, bulk_enqueue),
                    (conn, copy, bare_copy),
                    (article, article_copy, bare_copy),
                ]
                for target, into, fn in loads[r % 3 :] + loads[: r % 3]:
                    target.execute("TRUNCATE jobs")
                    into.append(fn(target, n))
                print(
                    f"    run {r + 1}: bare {spent['bare']:.2f}s, enqueue {spent['enqueue']:.2f}s "
                    f"({spent['enqueue'] / spent['bare']:.2f}× bare, "
                    f"{spent['enqueue'] / spent['article']:.2f}× the article's INSERT + NOTIFY "
                    f"{spent['article']:.2f}s), its SQL alone {spent['statement']:.2f}s, "
                    f"enqueue_many {bulk[-1] * 1000:.0f} ms, bare COPY {copy[-1] * 1000:.0f} ms, "
                    f"on the article's table {article_copy[-1] * 1000:.0f} ms "
                    f"({bulk[-1] / article_copy[-1]:.2f}×)",
                    flush=True,
                )

    def per_job(values: list[float]) -> list[float]:
        return [v / n * 1e6 for v in values]

    ratio = [e / b for e, b in zip(totals["enqueue"], totals["bare"], strict=True)]
    floor = [e / b for e, b in zip(totals["enqueue"], totals["article"], strict=True)]
    bulk_floor = [e / b for e, b in zip(bulk, article_copy, strict=True)]
    return [
        Figure("enqueue", f"enqueue {n} single calls", "µs/job", per_job(totals["enqueue"])),
        Figure("enqueue", f"bare INSERT {n} single statements", "µs/job", per_job(totals["bare"])),
        Figure(
            "enqueue",
            "enqueue's SQL alone (INSERT + NOTIFY)",
            "µs/job",
            per_job(totals["statement"]),
        ),
        Figure(
            "enqueue",
            "single enqueue / bare INSERT",
            "×",
            ratio,
            target="≤ 1.1×",
            check=at_most(1.1),
            digits=2,
        ),
        Figure(
            "enqueue",
            f"enqueue_many {n} jobs, one call",
            "s",
            bulk,
            target="≤ 0.12 s"
            if n == 20_000
            else f"≤ {0.12 * n / 20_000:.3f} s (0.12 s per 20 000)",
            check=at_most(0.12 * n / 20_000),
            digits=3,
        ),
        Figure("enqueue", f"bare COPY {n} rows, same table", "s", copy, digits=3),
        Figure(
            "enqueue",
            f"article's table: INSERT + NOTIFY {n} single statements",
            "µs/job",
            per_job(totals["article"]),
        ),
        Figure(
            "enqueue",
            "single enqueue / article's INSERT + NOTIFY",
            "×",
            floor,
            target="≤ 1.1× (issue 24)",
            check=at_most(1.1),
            digits=2,
        ),
        Figure("enqueue", f"article's table: COPY {n} rows", "s", article_copy, digits=3),
        Figure(
            "enqueue",
            "enqueue_many / article's COPY",
            "×",
            bulk_floor,
            target="≤ 1.3× (issue 24)",
            check=at_most(1.3),
            digits=2,
        ),
    ]
