"""Where a pickup's time goes: jobtui's bundled worker beside a bare consumer from the article.

    python -m benchmarks.pickup_breakdown [--jobs 200] [--interval 0.02] [--rounds 3]
                                          [--workers 2] [--dsn ADMIN_DSN]
                                          [--systems jobtui,article[,bare,bare-sql]]
                                          [--producer jobtui|bare] [--baseline DIR]

Each run makes a fresh jobtui database, starts `--workers` consumer processes, then a separate
producer process enqueues `--jobs` jobs one at a time, `--interval` apart, into the idle queue
(jobtui.enqueue on an autocommit psycopg async connection, for both consumers, so only the
consumer differs; `--producer bare`: one INSERT … pg_notify statement instead; `--warm` jobs
first, not counted). Both consumers read the same `jobs`
table with the same driver (psycopg async) on this machine; every timestamp is `time.time()`.

The consumers are timed from inside, by wrapping methods at run time in their own process (the
product carries no timing code): for jobtui, Dispatcher.poke (a NOTIFY heard), the
dispatcher's claim task, WorkerDB.claim (the claim statement sent and returned) and
statements.decode_rows (its rows back from the server), and the handler. The bare consumer
(LISTEN on one connection; on each NOTIFY, UPDATE … FOR UPDATE SKIP LOCKED … RETURNING on a
second one until nothing is left, the handler called inline) stamps the same points itself.

Phases per job, each p50/p95 over every job of every round:
  enqueue call             producer: enqueue call start → return (the commit is inside it)
  return → NOTIFY heard    enqueue returned → the listener handed the NOTIFY on (signed: the
                           NOTIFY and the producer's reply leave the server at the same commit)
  NOTIFY → claim task      poke → the dispatcher's claim task running (wake-up, task hops)
  claim task → sent        limits read (every 5 s) and the like before the claim statement
  claim round trip         claim statement sent → rows back from the server
  decode                   payload JSON decoded (jobtui: its own decode, bare: psycopg's)
  claimed → handler        claim returned → the handler's first line
  total                    enqueue call start → handler start
`article` (issue 24's floor, in the default systems) is the bare consumer on the article's own
plain `jobs` table (benchmarks/article.py, a database of its own) with the article's claim, fed
by one INSERT … pg_notify statement: what a user would otherwise write. `bare` runs on jobtui's
schema, which hides what the schema costs (its indexes and count triggers on every write).
`--systems jobtui,bare,bare-sql` adds the bare consumer sending jobtui's own claim statement
(worker_claim, with the worker's parameters): what it adds to bare is the statement's, what
jobtui adds to it is the worker's. Rounds rotate which consumer goes first, and the machine is
shared, so the script also prints each consumer's per-round ratio to bare (total p50, p95).
`--baseline DIR --systems jobtui,baseline,…` also runs the bundled worker from another source
tree (DIR holds its `jobtui/`, e.g. `git archive HEAD~1 | tar -x -C DIR`; the driver, the
producer and the stamps stay this tree's), interleaved with this tree's in the same rounds, and
prints the per-round ratio of the two: an A/B of a worker change on a machine too noisy for
two runs apart to be compared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if os.environ.get("JOBTUI_BENCH_SRC"):  # a `baseline` worker: jobtui from that tree
    sys.path.insert(0, os.environ["JOBTUI_BENCH_SRC"])

import psycopg

from benchmarks.article import ARTICLE_CLAIM, ARTICLE_DDL
from benchmarks.common import SCHEMA, Bench, analyze, percentile, spawn, stop, wait_for
from benchmarks.systems import Jobtui, listening_sessions

DEFAULT_ADMIN_DSN = "postgresql://root@127.0.0.1:5432/postgres"
SYSTEMS = ("jobtui", "baseline", "article", "bare", "bare-sql")
FLOORS = ("article", "bare")  # the consumers the others are divided by
PHASES = (
    ("enqueue call", "t_call", "t_ret"),
    ("return → NOTIFY heard", "t_ret", "notify"),
    ("NOTIFY → claim task", "notify", "task"),
    ("claim task → sent", "task", "sent"),
    ("claim round trip", "sent", "fetched"),
    ("decode", "fetched", "claimed"),
    ("claimed → handler", "claimed", "handler"),
    ("total", "t_call", "handler"),
)

# ---------------------------------------------------------------------------------- consumers

Events = dict[str, list[Any]]


def _dump(events: Events, out: str) -> None:
    Path(out).write_text(json.dumps(events))


def run_jobtui_worker(dsn: str, out: str, concurrency: int) -> None:
    """jobtui's bundled worker, as `jobtui worker --concurrency N` runs it, with its pickup path
    stamped by wrappers installed here."""
    from jobtui.registry import Registry
    from jobtui.worker import WorkerSettings, run_worker, statements
    from jobtui.worker.dispatcher import Dispatcher

    events: Events = {"poke": [], "task": [], "claim": [], "limits": [], "handler": []}
    fetched = [0.0]

    poke = Dispatcher.poke

    def stamped_poke(self: Dispatcher) -> None:
        events["poke"].append(time.time())
        poke(self)

    claim_task = Dispatcher._claim

    async def stamped_claim_task(self: Dispatcher, *args: Any, **kwargs: Any) -> None:
        events["task"].append(time.time())
        await claim_task(self, *args, **kwargs)

    decode_rows = statements.decode_rows

    async def stamped_decode(
        rows: list[tuple[Any, ...]], executor: Any = None
    ) -> list[tuple[Any, ...]]:
        fetched[0] = time.time()
        return await decode_rows(rows, executor)

    claim = statements.WorkerDB.claim

    async def stamped_claim(
        self: statements.WorkerDB, link: Any, kinds: list[str], limit: int, **kw: Any
    ) -> list[tuple[Any, ...]]:
        sent = time.time()
        rows = await claim(self, link, kinds, limit, **kw)
        seq = [r[2].get("i") if isinstance(r[2], dict) else None for r in rows]
        events["claim"].append((sent, fetched[0], time.time(), seq))
        return rows

    limited_kinds = statements.WorkerDB.limited_kinds

    async def stamped_limited_kinds(self: statements.WorkerDB, link: Any) -> set[str]:
        t0 = time.time()
        try:
            return await limited_kinds(self, link)
        finally:
            events["limits"].append((t0, time.time()))

    Dispatcher.poke = stamped_poke  # type: ignore[method-assign]
    Dispatcher._claim = stamped_claim_task  # type: ignore[method-assign]
    statements.decode_rows = stamped_decode
    statements.WorkerDB.claim = stamped_claim  # type: ignore[method-assign]
    statements.WorkerDB.limited_kinds = stamped_limited_kinds  # type: ignore[method-assign]

    registry = Registry()

    @registry.handler("latency")
    async def latency(payload: dict[str, Any]) -> None:
        events["handler"].append((time.time(), payload.get("i")))

    @registry.handler("noop")  # the latency benchmark's worker handles these two kinds
    async def noop(payload: Any) -> None:
        pass

    try:
        asyncio.run(run_worker(dsn, SCHEMA, registry, WorkerSettings(concurrency=concurrency)))
    finally:
        _dump(events, out)


BARE_CLAIM = """
UPDATE jobs SET locked_at = now(), locked_by = %(me)s, attempts = attempts + 1
WHERE id = (SELECT id FROM jobs
            WHERE finished_at IS NULL AND locked_at IS NULL AND run_at <= now()
            ORDER BY priority DESC, run_at, id
            LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, payload
"""
BARE_DONE = "UPDATE jobs SET finished_at = now() WHERE id = %(id)s"


async def bare_consumer(
    dsn: str, out: str, jobtui_sql: bool = False, article: bool = False
) -> None:
    """The article's consumer: LISTEN, and on each NOTIFY claim one job at a time until none
    is left, calling the handler inline, then mark it done. With `jobtui_sql` (`bare-sql`),
    the claim is jobtui's own worker_claim statement, with the parameters the worker sends, so
    the claim's statement and the worker around it can be told apart. With `article`, the
    article's claim on its own table."""
    from jobtui.sql import notify_channel, queries

    events: Events = {"poke": [], "task": [], "claim": [], "limits": [], "handler": []}
    me = f"bare-{os.getpid()}"
    sql = BARE_CLAIM
    params: dict[str, Any] = {"me": me}
    if article:
        sql, params = ARTICLE_CLAIM, {}
    if jobtui_sql:
        sql = queries(SCHEMA).worker_claim
        params = {"kinds": ["latency", "noop"], "worker": me, "limit": 200, "limits": "{}"}
    listen = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    work = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await listen.execute(f'LISTEN "{notify_channel(SCHEMA)}"')
        async for _ in listen.notifies():
            heard = time.time()
            events["poke"].append(heard)
            events["task"].append(heard)
            while True:
                sent = time.time()
                cur = await work.execute(sql, params)
                row = await cur.fetchone()
                fetched = time.time()
                if row is None:
                    break
                payload = json.loads(row[2]) if jobtui_sql else row[2 if article else 1]
                claimed = time.time()
                events["claim"].append((sent, fetched, claimed, [payload.get("i")]))
                events["handler"].append((time.time(), payload.get("i")))
                await work.execute(BARE_DONE, {"id": row[0]})
    except asyncio.CancelledError:
        pass
    finally:
        _dump(events, out)
        await listen.close()
        await work.close()


BARE_ENQUEUE = """
WITH ins AS (INSERT INTO jobs (kind, payload) VALUES ('latency', %(payload)s::jsonb) RETURNING id)
SELECT id, pg_notify(%(channel)s, 'latency') FROM ins
"""


async def produce(
    dsn: str, out: str, jobs: int, warm: int, interval: float, bare: bool = False
) -> None:
    """Enqueue `warm` then `jobs` jobs one at a time; (i, call start, call return) per job.
    With `bare`, by one INSERT … pg_notify statement instead of jobtui.enqueue."""
    from jobtui.enqueue import enqueue
    from jobtui.sql import notify_channel

    channel = notify_channel(SCHEMA)
    stamps = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for i in range(-warm, jobs):
            if i == 0:
                await asyncio.sleep(0.5)  # the warm-up's outcomes written: idle again
            t = time.time()
            if bare:
                payload = json.dumps({"t": t, "i": i})
                await conn.execute(BARE_ENQUEUE, {"payload": payload, "channel": channel})
            else:
                await enqueue(conn, "latency", {"t": t, "i": i})
            back = time.time()
            if i >= 0:
                stamps.append((i, t, back))
            await asyncio.sleep(max(0.0, interval - (time.time() - t)))
    Path(out).write_text(json.dumps(stamps))


# ----------------------------------------------------------------------------------- analysis


def job_timelines(stamps: list[Any], workers: list[Events]) -> tuple[list[dict[str, float]], int]:
    """Each job's moments (t_call, t_ret, notify, task, sent, fetched, claimed, handler), from
    the worker that ran it: the claim that returned it, the last claim task started before that
    claim and the last NOTIFY heard before that task. Jobs whose chain is not whole (started by
    a poll, not a NOTIFY) are counted, not timed."""
    where: dict[int, tuple[Events, tuple[Any, ...], float]] = {}
    for ev in workers:
        for sent, fetched, claimed, seq in ev["claim"]:
            for i in seq:
                if i is not None and i >= 0:
                    where[i] = (ev, (sent, fetched, claimed), 0.0)
        for at, i in ev["handler"]:
            if i is not None and i in where:
                where[i] = (where[i][0], where[i][1], at)
    lines, untimed = [], 0
    for i, t_call, t_ret in stamps:
        found = where.get(i)
        if found is None or not found[2]:
            untimed += 1
            continue
        ev, (sent, fetched, claimed), handler = found
        task = max((t for t in ev["task"] if t_call <= t <= sent), default=None)
        notify = max((t for t in ev["poke"] if t_call <= t <= (task or 0)), default=None)
        if task is None or notify is None:
            untimed += 1
            continue
        read = any(task <= t0 and t1 <= sent for t0, t1 in ev["limits"])
        lines.append(
            {
                "limits_read": 1.0 if read else 0.0,
                "t_call": t_call,
                "t_ret": t_ret,
                "notify": notify,
                "task": task,
                "sent": sent,
                "fetched": fetched,
                "claimed": claimed,
                "handler": handler,
            }
        )
    return lines, untimed


def phase_values(lines: list[dict[str, float]]) -> dict[str, list[float]]:
    return {name: [(line[b] - line[a]) * 1000 for line in lines] for name, a, b in PHASES}


# ------------------------------------------------------------------------------------- driver


def _self_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.pickup_breakdown", *args]


def one_run(bench: Bench, system: str, args: argparse.Namespace) -> tuple[list[Any], int]:
    """One run on a fresh database: every job's timeline, and how many could not be timed."""
    with bench.fresh_db(f"pickup_{system}", migrate=system != "article") as dsn:
        if system == "article":
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(ARTICLE_DDL)
        analyze(dsn)
        procs = []
        outs = []
        try:
            for w in range(args.workers):
                out = bench.tmp / f"{system}-{w}-{time.time_ns()}.json"
                outs.append(out)
                role = "jobtui" if system == "baseline" else system
                cmd = _self_cmd(f"{role}-worker", dsn, str(out), str(args.concurrency))
                log = bench.tmp / f"{system}-{w}.log"
                env = {"JOBTUI_BENCH_SRC": args.baseline} if system == "baseline" else {}
                procs.append((spawn(cmd, log, **env), log))
            if system in ("jobtui", "baseline"):
                Jobtui().wait_ready(dsn, procs)
            else:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    wait_for(
                        lambda: listening_sessions(conn) >= args.workers,
                        60,
                        "bare consumers listen",
                        procs=procs,
                    )
            stamps_file = bench.tmp / f"producer-{time.time_ns()}.json"
            cmd = _self_cmd(
                "producer", dsn, str(stamps_file), str(args.jobs), str(args.warm),
                str(args.interval), "bare" if system == "article" else args.producer,
            )  # fmt: skip
            subprocess.run(cmd, check=True, cwd=Path(__file__).resolve().parent.parent)
            with psycopg.connect(dsn, autocommit=True) as conn:
                wait_for(
                    lambda: _all_finished(conn),
                    30,
                    f"{system}: every job finished",
                    procs=procs,
                )
        finally:
            for proc, _ in procs:
                stop(proc)
        stamps = json.loads(stamps_file.read_text())
        workers = [json.loads(out.read_text()) for out in outs]
    return job_timelines(stamps, workers)


def _all_finished(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT count(*) FROM jobs WHERE finished_at IS NULL").fetchone()
    return row is not None and row[0] == 0


def p(values: list[float], q: float) -> str:
    return f"{percentile(values, q):7.3f}" if values else "      –"


def print_table(per_system: dict[str, list[dict[str, float]]]) -> None:
    names = [s for s in SYSTEMS if per_system.get(s)]
    phases = {s: phase_values(per_system[s]) for s in names}
    floor = next((f for f in FLOORS if f in names), None)
    others = [s for s in names if s != floor] if floor else []
    head = f"{'phase (ms)':<24}" + "".join(f"{s + ' p50':>14}{s + ' p95':>14}" for s in names)
    head += "".join(f"{s + ' Δp50':>18}" for s in others)
    print(head)
    print("-" * len(head))
    for name, _, _ in PHASES:
        row = f"{name:<24}"
        for s in names:
            row += f"{p(phases[s][name], 50):>14}{p(phases[s][name], 95):>14}"
        base = percentile(phases[floor][name], 50) if floor else 0.0
        for s in others:
            a = percentile(phases[s][name], 50)
            ratio = f" ({a / base:.2f}×)" if base > 0.05 and a > 0 else ""  # not of µs
            row += f"{f'{a - base:+.3f}{ratio}':>18}"
        print(row)
    for s in names:
        tot = phases[s]["total"]
        reads = sum(int(line["limits_read"]) for line in per_system[s])
        print(
            f"{s}: {len(tot)} jobs timed, total p99 {percentile(tot, 99):.3f} ms, max "
            f"{max(tot):.3f} ms; claims that read the limits first: {reads}"
        )


def measure(
    args: argparse.Namespace,
) -> tuple[dict[str, list[dict[str, float]]], dict[str, list[tuple[float, float, float]]]]:
    """Every job's timeline per system, and each round's total p50/p95/p99 per system."""
    bench = Bench(args.dsn, quick=False, runs=args.rounds, origin="JOBTUI_BENCH_DSN")
    systems = args.systems
    per_system: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
    per_round: dict[str, list[tuple[float, float, float]]] = {s: [] for s in systems}
    print(
        f"pickup breakdown: {args.jobs} jobs {args.interval * 1000:g} ms apart, "
        f"{args.workers} consumer process(es), {args.rounds} round(s), producer "
        f"{args.producer}, server {args.dsn}",
        flush=True,
    )
    try:
        for r in range(args.rounds):
            order = systems[r % len(systems) :] + systems[: r % len(systems)]
            for system in order:
                lines, untimed = one_run(bench, system, args)
                per_system[system] += lines
                tot = phase_values(lines)["total"]
                per_round[system].append(
                    (percentile(tot, 50), percentile(tot, 95), percentile(tot, 99))
                )
                print(
                    f"  round {r + 1} {system}: total p50 {percentile(tot, 50):.3f} ms, "
                    f"p95 {percentile(tot, 95):.3f} ms ({len(lines)} timed, {untimed} not)",
                    flush=True,
                )
    finally:
        bench.cleanup()
    return per_system, per_round


def run(args: argparse.Namespace) -> int:
    systems = args.systems
    per_system, per_round = measure(args)
    print()
    print_table(per_system)
    for floor in (f for f in FLOORS if f in systems):
        for system in systems:
            if system == floor or system in FLOORS[: FLOORS.index(floor)]:
                continue
            a, b = per_round[system], per_round[floor]
            r50 = [x[0] / y[0] for x, y in zip(a, b, strict=True)]
            r99 = [x[2] / y[2] for x, y in zip(a, b, strict=True)]
            print(
                f"per-round total ratio {system} / {floor}: p50 "
                + ", ".join(f"{v:.2f}" for v in r50)
                + f" (median {statistics.median(r50):.2f}); p99 "
                + ", ".join(f"{v:.2f}" for v in r99)
                + f" (median {statistics.median(r99):.2f})"
            )
    if "jobtui" in systems and "baseline" in systems:
        a, b = per_round["jobtui"], per_round["baseline"]
        r50 = [x[0] / y[0] for x, y in zip(a, b, strict=True)]
        print(
            f"per-round total ratio jobtui / baseline ({args.baseline}): p50 "
            + ", ".join(f"{v:.2f}" for v in r50)
            + f" (median {statistics.median(r50):.2f})"
        )
    if "jobtui" in systems and "article" in systems:
        mine = phase_values(per_system["jobtui"])["total"]
        floor_ = phase_values(per_system["article"])["total"]
        print(
            f"jobtui / the article's consumer, every job of every round: p50 "
            f"{percentile(mine, 50):.2f} / {percentile(floor_, 50):.2f} ms = "
            f"{percentile(mine, 50) / percentile(floor_, 50):.2f}× (target ≤ 1.2×), p99 "
            f"{percentile(mine, 99):.2f} / {percentile(floor_, 99):.2f} ms = "
            f"{percentile(mine, 99) / percentile(floor_, 99):.2f}× (target ≤ 1.5×)"
        )
    return 0


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="benchmarks.pickup_breakdown", description=__doc__)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--interval", type=float, default=0.020)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=Jobtui.concurrency)
    ap.add_argument("--dsn", default=os.environ.get("JOBTUI_BENCH_DSN", DEFAULT_ADMIN_DSN))
    ap.add_argument(
        "--systems",
        default="jobtui,article,bare",
        help=f"comma-separated, from {', '.join(SYSTEMS)} (article: the bare consumer on the "
        "article's own table; bare-sql: the bare consumer sending jobtui's own claim statement; "
        "baseline: the bundled worker from --baseline's tree)",
    )
    ap.add_argument(
        "--baseline",
        metavar="DIR",
        help="a source tree holding another version's jobtui/, run as the `baseline` system",
    )
    ap.add_argument(
        "--producer",
        choices=("jobtui", "bare"),
        default="jobtui",
        help="jobtui.enqueue (default) or one bare INSERT … pg_notify statement, for both",
    )
    args = ap.parse_args(argv)
    args.systems = [x.strip() for x in args.systems.split(",") if x.strip()]
    unknown = sorted(set(args.systems) - set(SYSTEMS))
    if unknown or not args.systems:
        ap.error(f"--systems: unknown {', '.join(unknown) or '(none given)'}")
    if ("baseline" in args.systems) != bool(args.baseline):
        ap.error("the `baseline` system and --baseline DIR go together")
    if args.baseline:
        args.baseline = str(Path(args.baseline).resolve())
        if not (Path(args.baseline) / "jobtui" / "worker").is_dir():
            ap.error(f"--baseline: no jobtui/worker/ under {args.baseline}")
    if args.jobs < 1 or args.rounds < 1 or args.workers < 1 or args.interval <= 0:
        ap.error("--jobs, --rounds and --workers must be at least 1, --interval positive")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    role = argv[0] if argv else ""
    if role == "jobtui-worker":
        run_jobtui_worker(argv[1], argv[2], int(argv[3]))
        return 0
    if role in ("bare-worker", "bare-sql-worker", "article-worker"):
        asyncio.run(
            bare_consumer(
                argv[1],
                argv[2],
                jobtui_sql=role == "bare-sql-worker",
                article=role == "article-worker",
            )
        )
        return 0
    if role == "producer":
        bare = argv[6] == "bare"
        asyncio.run(produce(argv[1], argv[2], int(argv[3]), int(argv[4]), float(argv[5]), bare))
        return 0
    return run(parse(argv))


if __name__ == "__main__":
    sys.exit(main())
