"""Requeue every dead letter of one kind on the large data set, then count that nothing was lost
or duplicated.

The copy of the data set gets N extra dead letters of kind `bench.requeue`, their ids are noted
in a side table, and `ops.requeue_dead_matching(DeadFilter(kind=…))` is timed. Afterwards:
lost = noted ids in neither table, duplicated = noted ids in both tables plus rows of that kind
in `jobs` whose id was never noted; and jobs + dead_letters must total what they did before.
"""

from __future__ import annotations

import asyncio
import time

import psycopg

from benchmarks import bigdata
from benchmarks.common import SCHEMA, Bench, Figure, ScenarioSkipped, at_most

KIND = "bench.requeue"


def _total(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM dead_letters)"
    ).fetchone()
    return int(row[0]) if row else -1


def once(bench: Bench, n: int) -> tuple[float, int, int, int]:
    """(seconds, requeued, lost, duplicated) on a fresh copy of the data set."""
    from jobtui.models import DeadFilter
    from jobtui.ops import Actor, requeue_dead_matching

    with bench.fresh_db("requeue", template=bigdata.template(bench)) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            bigdata.insert_dead(conn, n, [KIND])
            conn.execute(
                "CREATE TABLE bench_noted AS SELECT id FROM dead_letters WHERE kind = %s", (KIND,)
            )
            conn.execute("ANALYZE")
            before = _total(conn)

        async def go() -> tuple[float, int]:
            aconn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
            try:
                t0 = time.perf_counter()
                count = await requeue_dead_matching(
                    aconn, SCHEMA, DeadFilter(kind=KIND), actor=Actor.current()
                )
                return time.perf_counter() - t0, count
            finally:
                await aconn.close()

        seconds, count = asyncio.run(go())
        with psycopg.connect(dsn, autocommit=True) as conn:
            # Fresh statistics for the check: 100 000 rows just moved, and a plan made from the
            # old ones ran the anti-joins below as nested loops for minutes.
            conn.execute("ANALYZE jobs, dead_letters, bench_noted")
            row = conn.execute(
                """
                SELECT
                  (SELECT count(*) FROM bench_noted b
                    WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = b.id)
                      AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = b.id)),
                  (SELECT count(*) FROM bench_noted b
                    WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.id = b.id)
                      AND EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = b.id))
                  + (SELECT count(*) FROM jobs j WHERE j.kind = %s
                      AND NOT EXISTS (SELECT 1 FROM bench_noted b WHERE b.id = j.id)),
                  (SELECT count(*) FROM dead_letters WHERE kind = %s)
                """,
                (KIND, KIND),
            ).fetchone()
            assert row is not None
            lost, duplicated, left = (int(x) for x in row)
            after = _total(conn)
        if after != before:
            duplicated += max(0, after - before)
            lost += max(0, before - after)
        print(
            f"    requeued {count} in {seconds:.2f}s; lost {lost}, duplicated {duplicated}, "
            f"left in dead letters {left}",
            flush=True,
        )
        if left:
            raise ScenarioSkipped(f"{left} dead letters of {KIND} were not requeued")
        return seconds, count, lost, duplicated


def run(bench: Bench) -> list[Figure]:
    n = bench.scale(100_000, 5_000)
    results = [once(bench, n) for _ in range(bench.n_runs(1 if bench.quick else 2))]
    seconds = [r[0] for r in results]
    bad = float(sum(r[2] + r[3] for r in results))
    return [
        Figure(
            "requeue",
            f"requeue {n} dead letters of one kind",
            "s",
            seconds,
            target="≤ 5 s" if n == 100_000 else f"≤ {5 * n / 100_000:.2f} s (5 s per 100 000)",
            check=at_most(5 * n / 100_000),
            digits=2,
        ),
        Figure(
            "requeue",
            f"lost + duplicated, all {len(results)} runs",
            "rows",
            [bad],
            target="= 0",
            check=lambda v: v == 0,
            digits=0,
        ),
    ]
