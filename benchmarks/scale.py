"""Issue 15 item 7: the console's queries at scale, with a stale visibility map.

The data: 2,000,000 finished jobs, 200,000 ready (a tenth retrying), 50,000 scheduled and
100,000 dead letters across 20 kinds, built once with generate_series as a template database
(`jobtui_scale_<tag>`; `--rebuild` makes it again). Half the dead letters and all scheduled jobs
are added *after* the template's VACUUM, and 20,000 ready rows are updated, so every run sees
dead tuples and pages the visibility map does not cover: what a queue looks like between
autovacuum runs, or with autovacuum off (as on this machine).

It prints p50/p95 over `--runs` of: the Overview snapshot (jobtui.metrics.snapshot), each
console tab's reads (Jobs: first page and its count; Dead letters: groups and first page;
Workers and Kinds come from the snapshot), the dead-letter groups query alone, and a filter
(a kind and a payload search), each with jit on and off (a session setting: the snapshot and
the browse reads now say `SET LOCAL jit = off` themselves, so on this version the two columns
differ only by noise; run on an older checkout to see what it saved), and once more after a
VACUUM, with a fresh visibility map.

    .venv/bin/python benchmarks/scale.py --dsn postgresql://root@127.0.0.1:5432/postgres
    PYTHONPATH=/path/to/older/checkout .venv/bin/python benchmarks/scale.py   # "before"

Issue 24 (counts at any horizon): `--reminders 200000` adds that many jobs scheduled over the
next 30 days (reminders, trial expiries) to the run's copy, and `--counts` measures only the
snapshot (p50/p95) and `jobtui stats --json` as a whole process (median of 10 runs).

    .venv/bin/python benchmarks/scale.py --reminders 200000 --counts
    .venv/bin/python benchmarks/scale.py --counts --compare /path/to/older/checkout
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import hashlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo, sql

if __package__ in (None, ""):
    sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH

from benchmarks.bigdata import TRACEBACK, insert_dead

KINDS = [f"kind{i:02d}.work" for i in range(20)]
FINISHED, READY, SCHEDULED, DEAD = 2_000_000, 200_000, 50_000, 100_000


def _tag() -> str:
    from jobtui.schema import load_migrations

    # The migrations' text, not only their names: a template built by an earlier draft of a
    # migration (a changed trigger, say) must not be measured as this version.
    text = "\n".join(f"{m.version}:{m.name}:{m.sql}" for m in load_migrations())
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def build(dsn: str) -> None:
    """The part of the data set that was there at the last VACUUM."""
    from jobtui.schema import migrate

    t0 = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, "public")
        conn.execute(
            """
            INSERT INTO jobs (kind, payload, run_at, attempts, created_at, locked_at, locked_by,
                              finished_at)
            SELECT (%(kinds)s::text[])[1 + g %% 20],
                   jsonb_build_object('order_id', g, 'customer', 'cust-' || (g %% 5000)),
                   ts, 1, ts, ts, 'bench:1:seed', ts + interval '40 ms'
            FROM (SELECT g, now() - interval '2 days' * g / %(n)s AS ts
                  FROM generate_series(1, %(n)s) g) s
            """,
            {"kinds": KINDS, "n": FINISHED},
        )
        conn.execute(
            """
            INSERT INTO jobs (kind, payload, run_at, attempts, created_at, last_error, errors)
            SELECT (%(kinds)s::text[])[1 + g %% 20],
                   jsonb_build_object('order_id', g, 'customer', 'cust-' || (g %% 5000)),
                   ts, CASE WHEN g %% 10 = 0 THEN 1 ELSE 0 END, ts,
                   CASE WHEN g %% 10 = 0 THEN 'TimeoutError: upstream took 31s' END,
                   CASE WHEN g %% 10 = 0 THEN jsonb_build_array(jsonb_build_object(
                     'attempt', 1, 'at', ts::text, 'error', 'TimeoutError: upstream took 31s',
                     'traceback', %(tb)s::text, 'worker', 'bench:1:seed'))
                   ELSE '[]'::jsonb END
            FROM (SELECT g, now() - interval '1 hour' * g / %(n)s AS ts
                  FROM generate_series(1, %(n)s) g) s
            """,
            {"kinds": KINDS, "n": READY, "tb": TRACEBACK},
        )
        insert_dead(conn, DEAD // 2, KINDS)
        conn.execute(
            """
            INSERT INTO kind_stats (minute, kind, done, failed, dead, runtime_sum_ms, hist)
            SELECT date_trunc('minute', now()) - interval '1 minute' * m, k, 600, m %% 7, 0,
                   24000, '{120,200,150,80,30,12,5,2,1,0,0,0,0,0,0,0,0}'::int[]
            FROM generate_series(0, 1439) m, unnest(%(kinds)s::text[]) k
            """,
            {"kinds": KINDS},
        )
        conn.execute(
            """
            INSERT INTO workers (id, host, pid, kinds, concurrency, running)
            SELECT 'bench:' || i || ':w', 'bench', i, %(kinds)s, 10, 0
            FROM generate_series(1, 4) i
            """,
            {"kinds": KINDS},
        )
        conn.execute("VACUUM (ANALYZE)")
    print(f"template built in {time.monotonic() - t0:.0f}s", flush=True)


def stale(dsn: str, reminders: int = 0) -> None:
    """What changed since that VACUUM: dead tuples and pages the visibility map misses; and
    `reminders` jobs due over the next 30 days, evenly."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO jobs (kind, payload, run_at)
            SELECT (%(kinds)s::text[])[1 + g %% 20], jsonb_build_object('reminder', g),
                   now() + interval '30 days' * g / %(n)s
            FROM generate_series(1, %(n)s) g
            """,
            {"kinds": KINDS, "n": reminders},
        )
        insert_dead(conn, DEAD - DEAD // 2, KINDS)
        conn.execute(
            """
            INSERT INTO jobs (kind, payload, run_at)
            SELECT (%(kinds)s::text[])[1 + g %% 20], jsonb_build_object('order_id', -g),
                   now() + interval '1 minute' * (1 + g %% 600)
            FROM generate_series(1, %(n)s) g
            """,
            {"kinds": KINDS, "n": SCHEDULED},
        )
        conn.execute(
            "UPDATE jobs SET run_at = run_at WHERE id IN (SELECT id FROM jobs"
            " WHERE finished_at IS NULL ORDER BY id LIMIT 20000)"
        )
        conn.execute("ANALYZE")  # statistics are fresh; the visibility map is not
        conn.execute("SELECT pg_stat_reset()")  # index use counted from here (print_index_use)


def cached_database(admin: str, name: str, rebuild: bool, make: Callable[[str], None]) -> str:
    """Database `name`, made by `make(dsn)` unless it exists already (or `rebuild`)."""
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists and not rebuild:
            return name
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    make(conninfo.make_conninfo(admin, dbname=name))
    return name


def ensure_template(admin: str, rebuild: bool) -> str:
    return cached_database(admin, f"jobtui_scale_{_tag()}", rebuild, build)


def copy_of(admin: str, template: str) -> str:
    """A copy of the template for this run only (its own name: runs by others may share the
    template). Copying waits while another run is copying it (a template must be idle)."""
    name = f"{template}_run{os.getpid()}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        for attempt in range(120):
            try:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(template)
                    )
                )
                break
            except psycopg.errors.ObjectInUse:
                if attempt == 119:
                    raise
                time.sleep(1)
    return name


Probe = Callable[[psycopg.AsyncConnection], Awaitable[Any]]


def probes() -> dict[str, Probe]:
    from jobtui import browse, kindinfo, metrics
    from jobtui.models import PENDING_STATES, DeadFilter, JobFilter

    s = "public"
    unfinished = JobFilter(states=PENDING_STATES)
    succeeded = JobFilter(states=("succeeded",))
    return {
        "snapshot (Overview, Kinds, Workers)": lambda c: metrics.snapshot(c, s),
        "Jobs tab: first page": lambda c: browse.list_jobs(c, s, unfinished, limit=100),
        "Jobs tab: count (unfinished, `#`)": lambda c: browse.count_jobs(c, s, unfinished),
        "all jobs (`a`): first page": lambda c: browse.list_jobs(c, s, JobFilter(), limit=100),
        "all jobs: count": lambda c: browse.count_jobs(c, s, JobFilter()),
        "kind screen (one kind, hour)": lambda c: kindinfo.load(c, s, KINDS[4], "hour"),
        "filter: jobs succeeded": lambda c: browse.list_jobs(c, s, succeeded, limit=100),
        "filter: jobs succeeded + text": lambda c: browse.list_jobs(
            c, s, JobFilter(states=("succeeded",), text="no-such-text-zq"), limit=100
        ),
        "Dead tab: groups": lambda c: browse.dead_groups(c, s, DeadFilter()),
        "Dead tab: first page": lambda c: browse.list_dead(c, s, DeadFilter(), limit=100),
        "filter: jobs kind + ready": lambda c: browse.list_jobs(
            c, s, JobFilter(states=("ready",), kind=KINDS[3]), limit=100
        ),
        "filter: jobs kind + ready, count": lambda c: browse.count_jobs(
            c, s, JobFilter(states=("ready",), kind=KINDS[3])
        ),
        "filter: dead kind + error text": lambda c: browse.list_dead(
            c, s, DeadFilter(kind=KINDS[5], error="timeout"), limit=100
        ),
        "filter: jobs payload search": lambda c: browse.list_jobs(
            c, s, JobFilter(text="cust-4242"), limit=100
        ),
    }


def p95(times: list[float]) -> float:
    """The 95th percentile of sorted times (nearest rank)."""
    return times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


async def measure(dsn: str, runs: int, jit: str) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f"SET jit = {jit}")
        for label, probe in probes().items():
            times = []
            for i in range(runs + 2):
                t0 = time.perf_counter()
                await probe(conn)
                if i >= 2:  # two warm-up runs
                    times.append((time.perf_counter() - t0) * 1000)
            times.sort()
            out[label] = (statistics.median(times), p95(times))
    return out


def measure_counts(dsn: str, runs: int, compare: str | None = None) -> None:
    """The snapshot's p50/p95 and `jobtui stats --json`'s whole-process median (issue 24);
    with `compare` (a checkout's root) that checkout's `stats --json` too, interleaved."""
    import jobtui
    from jobtui import metrics

    with psycopg.connect(dsn, autocommit=True) as conn:  # as a worker's housekeeper would
        conn.execute("SELECT jobtui_fold_job_counts()")

    async def snapshots() -> list[float]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            times = []
            for i in range(runs + 2):
                t0 = time.perf_counter()
                await metrics.snapshot(conn, "public")
                if i >= 2:  # two warm-up runs
                    times.append((time.perf_counter() - t0) * 1000)
            return sorted(times)

    times = asyncio.run(snapshots())
    # Bytecode as an installed package has it: with PYTHONDONTWRITEBYTECODE set (as in some
    # shells and CI) an editable checkout would compile every jobtui module in every run.
    compileall.compile_dir(str(Path(jobtui.__file__).parent), quiet=1)
    commands = {
        "`python -c pass`": [sys.executable, "-c", "pass"],
        "`python -c 'import psycopg'`": [sys.executable, "-c", "import psycopg"],
        "`jobtui stats --json`": [sys.executable, "-m", "jobtui", "stats", "--json", "--dsn", dsn],
    }
    envs: dict[str, dict[str, str] | None] = dict.fromkeys(commands)
    if compare:  # the same command with an older checkout's jobtui, in the same loop
        compileall.compile_dir(str(Path(compare) / "jobtui"), quiet=1)
        label = f"`jobtui stats --json` ({compare})"
        commands[label] = commands["`jobtui stats --json`"]
        envs[label] = {**os.environ, "PYTHONPATH": compare}
    whole: dict[str, list[float]] = {label: [] for label in commands}
    for i in range(11):  # interleaved, so a busy moment of the machine hits each alike
        for label, cmd in commands.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, cwd="/", env=envs[label])
            if i:  # one warm-up run
                whole[label].append((time.perf_counter() - t0) * 1000)
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM job_counts").fetchone()
    print(
        f"snapshot p50 {statistics.median(times):.1f} ms, p95 {p95(times):.1f} ms ({runs} runs); "
        f"job_counts holds {row[0] if row else 0:,} rows",
        flush=True,
    )
    for label, ms in whole.items():
        print(
            f"{label:48} median {statistics.median(ms):4.0f} ms (min {min(ms):.0f}, max "
            f"{max(ms):.0f}; 10 runs, whole process)",
            flush=True,
        )
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (a shared machine)")


def print_index_use(dsn: str) -> None:
    """Which indexes on `jobs` the console's reads used (scans while measuring): an index no
    read here and no worker statement uses costs every write and serves nothing."""
    time.sleep(1.0)  # backends report their counters when idle, within a second
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexrelname, idx_scan FROM pg_stat_user_indexes"
            " WHERE relname = 'jobs' ORDER BY idx_scan DESC, indexrelname"
        ).fetchall()
    print("\nindex scans on jobs while measuring: " + ", ".join(f"{n} {c}" for n, c in rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="postgresql://root@127.0.0.1:5432/postgres")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--reminders", type=int, default=0, help="jobs due over the next 30 days")
    ap.add_argument("--counts", action="store_true", help="only the snapshot and stats --json")
    ap.add_argument(
        "--compare",
        metavar="CHECKOUT",
        help="with --counts: also time that checkout's `jobtui stats --json` in the same loop",
    )
    args = ap.parse_args()
    import jobtui

    print(f"jobtui from {Path(jobtui.__file__).parent}", flush=True)
    template = ensure_template(args.dsn, args.rebuild)
    db = copy_of(args.dsn, template)
    try:
        dsn = conninfo.make_conninfo(args.dsn, dbname=db)
        stale(dsn, args.reminders)
        print(
            f"{FINISHED:,} finished, {READY:,} ready, {SCHEDULED:,} scheduled, {DEAD:,} dead "
            f"letters, {len(KINDS)} kinds; {DEAD - DEAD // 2:,} dead letters, {SCHEDULED:,} "
            "scheduled and 20,000 updated ready rows since the last VACUUM; "
            f"{args.reminders:,} reminders over the next 30 days",
            flush=True,
        )
        if args.counts:
            measure_counts(dsn, args.runs, args.compare)
            return
        results = {jit: asyncio.run(measure(dsn, args.runs, jit)) for jit in ("on", "off")}
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) jobs, dead_letters")
        results["vacuumed"] = asyncio.run(measure(dsn, args.runs, "on"))
        print(
            f"\n{'query':40} {'jit on p50/p95 ms':>20} {'jit off p50/p95 ms':>20}"
            f" {'after VACUUM p50/p95':>22}"
        )
        for label in results["on"]:
            on, off, vac = (results[k][label] for k in ("on", "off", "vacuumed"))
            print(
                f"{label:40} {on[0]:9.1f} /{on[1]:7.1f} {off[0]:9.1f} /{off[1]:7.1f}"
                f" {vac[0]:11.1f} /{vac[1]:7.1f}"
            )
        print_index_use(dsn)
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(db)))


if __name__ == "__main__":
    main()
