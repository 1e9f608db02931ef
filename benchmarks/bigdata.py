"""The large data set the read scenarios share, made in SQL with generate_series (fast).

1 000 000 finished jobs over the last day, 100 000 ready jobs (a tenth of them retrying), 100 000
dead letters with a handful of error shapes (so grouping has work to do), ten kinds, a day of
per-minute kind_stats and queue_samples, and two worker rows. Built once per run as a template
database; each scenario gets its own copy.
"""

from __future__ import annotations

import time

import psycopg

from benchmarks.common import SCHEMA, Bench

KINDS = (
    "email.send",
    "report.render",
    "invoice.pdf",
    "webhook.deliver",
    "image.resize",
    "sms.send",
    "search.index",
    "cache.warm",
    "export.csv",
    "billing.charge",
)
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/jobs.py", line 42, in handle\n'
    "    result = await client.call(payload)\n"
    '  File "/srv/app/client.py", line 118, in call\n'
    "    raise error\n"
)


def sizes(bench: Bench) -> dict[str, int]:
    return {
        "finished": bench.scale(1_000_000, 50_000),
        "ready": bench.scale(100_000, 5_000),
        "dead": bench.scale(100_000, 5_000),
    }


def build(dsn: str, finished: int, ready: int, dead: int) -> None:
    from jobtui.schema import migrate

    t0 = time.monotonic()
    kinds = list(KINDS)
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, SCHEMA)
        conn.execute(
            """
            INSERT INTO jobs (kind, payload, run_at, attempts, created_at, locked_at, locked_by,
                              finished_at)
            SELECT (%(kinds)s::text[])[1 + g %% 10],
                   jsonb_build_object('order_id', g, 'customer', 'cust-' || (g %% 5000),
                                      'ref', md5(g::text)),
                   ts, 1, ts, ts, 'bench-host:1:seed', ts + interval '40 ms'
            FROM (SELECT g, now() - interval '1 day' * g / %(n)s AS ts
                  FROM generate_series(1, %(n)s) g) s
            """,
            {"kinds": kinds, "n": finished},
        )
        conn.execute(
            """
            INSERT INTO jobs (kind, payload, run_at, attempts, created_at, last_error, errors)
            SELECT (%(kinds)s::text[])[1 + g %% 10],
                   jsonb_build_object('order_id', g, 'customer', 'cust-' || (g %% 5000),
                                      'ref', md5(g::text)),
                   ts, CASE WHEN g %% 10 = 0 THEN 1 ELSE 0 END, ts,
                   CASE WHEN g %% 10 = 0 THEN 'TimeoutError: upstream took 31s' END,
                   CASE WHEN g %% 10 = 0 THEN jsonb_build_array(jsonb_build_object(
                     'attempt', 1, 'at', ts::text, 'error', 'TimeoutError: upstream took 31s',
                     'traceback', %(tb)s::text, 'worker', 'bench-host:1:seed'))
                   ELSE '[]'::jsonb END
            FROM (SELECT g, now() - interval '1 hour' * g / %(n)s AS ts
                  FROM generate_series(1, %(n)s) g) s
            """,
            {"kinds": kinds, "n": ready, "tb": TRACEBACK},
        )
        insert_dead(conn, dead, kinds)
        conn.execute(
            """
            INSERT INTO kind_stats (minute, kind, done, failed, dead, runtime_sum_ms, hist)
            SELECT date_trunc('minute', now()) - interval '1 minute' * m, k,
                   600 + (m %% 60), m %% 7, m %% 3, 40.0 * 600,
                   '{120,200,150,80,30,12,5,2,1,0,0,0,0,0,0,0,0}'::int[]
            FROM generate_series(0, 1439) m, unnest(%(kinds)s::text[]) k
            """,
            {"kinds": kinds},
        )
        conn.execute(
            """
            INSERT INTO queue_samples (minute, ready, scheduled, running, retrying, dead,
                                       oldest_ready_age_s)
            SELECT date_trunc('minute', now()) - interval '1 minute' * m,
                   %(ready)s, 0, 20, %(ready)s / 10, %(dead)s, 3600
            FROM generate_series(0, 1439) m
            """,
            {"ready": ready, "dead": dead},
        )
        conn.execute(
            """
            INSERT INTO workers (id, host, pid, kinds, concurrency, running)
            VALUES ('bench-host:101:aaaa', 'bench-host', 101, %(kinds)s, 10, 0),
                   ('bench-host:102:bbbb', 'bench-host', 102, %(kinds)s, 10, 0)
            """,
            {"kinds": kinds},
        )
        conn.execute("VACUUM (ANALYZE)")
    print(
        f"    data set: {finished} finished, {ready} ready, {dead} dead "
        f"built in {time.monotonic() - t0:.0f}s",
        flush=True,
    )


def insert_dead(conn: psycopg.Connection, n: int, kinds: list[str]) -> None:
    """`n` dead letters spread over `kinds`, ids taken from the jobs sequence as the engine does."""
    conn.execute(
        """
        INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,
                                  last_error, errors, reason, died_at)
        SELECT nextval(pg_get_serial_sequence('jobs', 'id')), kind, payload, 5, 5, ts, ts, err,
               jsonb_build_array(jsonb_build_object('attempt', 5, 'at', ts::text, 'error', err,
                                 'traceback', %(tb)s::text, 'worker', 'bench-host:1:seed')),
               'failed', ts
        FROM (SELECT (%(kinds)s::text[])[1 + g %% cardinality(%(kinds)s::text[])] AS kind,
                     jsonb_build_object('order_id', g,
                                        'customer', 'cust-' || (g %% 5000)) AS payload,
                     now() - interval '1 day' * g / %(n)s AS ts,
                     CASE g %% 4
                       WHEN 0 THEN 'ValueError: order ' || g || ' not found'
                       WHEN 1 THEN 'TimeoutError: handler exceeded 30s'
                       WHEN 2 THEN 'ConnectionError: could not reach 10.0.'
                                   || (g %% 255) || '.1:443'
                       ELSE 'KeyError: ''customer_' || g || ''''
                     END AS err
              FROM generate_series(1, %(n)s) g) s
        """,
        {"kinds": kinds, "n": n, "tb": TRACEBACK},
    )


def template(bench: Bench) -> str:
    """The shared data set's template database (built on first use in this run)."""
    s = sizes(bench)
    return bench.template("big", lambda dsn: build(dsn, s["finished"], s["ready"], s["dead"]))
