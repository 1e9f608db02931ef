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
  jobtui schema as of 0024             the real schema with the two indexes of waiting rows in
                                       id order that migration 0025 dropped put back: a waiting
                                       row entered seven indexes, not five
  jobtui schema as of 0024, no count triggers
                                       the same, triggers disabled: the indexes' part alone
  jobtui schema, jobtui's own statements
                                       the real schema, the product's own statements: the
                                       enqueue API, the worker's claim (worker_claim, one job)
                                       and completion (worker_complete), whose claim does
                                       more than the article's (paused and limited kinds,
                                       attempt limits, payload size)

Blocks of `--block` jobs rotate over the variants, so the machine's drift hits all of them; it
prints each write's mean per job and its ratio to the article's. Same statements everywhere
(but the last variant's): what differs is only the schema under them.

`--in-server` times the same statements inside the server instead: a procedure per variant
runs `--block` jobs through each write, one statement and one COMMIT per job (as autocommit
would, with synchronous_commit off so no flush is timed), clocked by clock_timestamp(). No
round trip, no client: only what the schema charges each write, which on a busy 2-core machine
the round trips (about 0.1-1 ms each) drown.

    .venv/bin/python -m benchmarks.write_cost [--jobs 4000 --rounds 2 --block 200] [--in-server]
        [--record benchmarks/results.json]

`--record FILE` puts the run (each variant's µs per job by round and its ratio to the article's,
the rounds, jobs, date, command and the machine's load) under the "write_cost" key of a results
JSON, in place of the one there; `make bench-table` (benchmarks/table.py) writes it into
docs/performance.md between `<!-- write-cost:start -->` and `<!-- write-cost:end -->`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from psycopg.types.json import Jsonb

from benchmarks.common import Bench, machine_info, record_entry
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
from benchmarks.table import WRITE_COST
from jobtui import enqueue
from jobtui.sql import queries

ADMIN_DSN = "postgresql://root@127.0.0.1:5432/postgres"
INDEXES_ONLY = "jobtui schema, claim indexes only, triggers on"
OWN = "jobtui schema, jobtui's own statements"
AT_0024 = "jobtui schema as of 0024"
AT_0024_NT = "jobtui schema as of 0024, no count triggers"
# What migration 0025 dropped, as 0024_baseline.sql made it.
DROPPED_BY_0025 = (
    "CREATE INDEX jobs_waiting_id ON jobs (id) WHERE finished_at IS NULL AND locked_at IS NULL",
    "CREATE INDEX jobs_waiting_kind_id ON jobs (kind, id)"
    " WHERE finished_at IS NULL AND locked_at IS NULL",
)
VARIANTS = (ARTICLE, AT_0024, FULL, AT_0024_NT, NO_TRIGGERS, CLAIM_ONLY, INDEXES_ONLY, OWN)
SETUP_AS = {INDEXES_ONLY: CLAIM_ONLY, OWN: FULL, AT_0024: FULL, AT_0024_NT: NO_TRIGGERS}
WRITES = ("insert + notify", "claim one", "complete one")
CLAIM_ONE = (
    "UPDATE jobs SET locked_at = now(), attempts = attempts + 1 WHERE id = ("
    + CLAIM_SELECT.replace("%(batch)s", "1")
    + ") RETURNING id"
)
COMPLETE_ONE = "UPDATE jobs SET finished_at = now() WHERE id = %s"


def own_block(conn: psycopg.Connection, n: int, spent: dict[str, float]) -> None:
    """`block` with jobtui's own statements: jobtui.enqueue, worker_claim, worker_complete."""
    q = queries("public")
    me = {"worker": "bench:1", "kinds": ["bench"], "limit": 1}
    t0 = time.perf_counter()
    for i in range(n):
        enqueue(conn, "bench", {"i": i})
    t1 = time.perf_counter()
    claimed = []
    for _ in range(n):
        row = conn.execute(q.worker_claim, me).fetchone()
        assert row is not None
        claimed.append((row[0], row[3]))
    t2 = time.perf_counter()
    for job, attempt in claimed:
        done = {"ids": [job], "worker": me["worker"], "by_id": json.dumps({str(job): attempt})}
        assert conn.execute(q.worker_complete, done).fetchone() is not None
    t3 = time.perf_counter()
    for write, seconds in zip(WRITES, (t1 - t0, t2 - t1, t3 - t2), strict=True):
        spent[write] += seconds


def block(conn: psycopg.Connection, variant: str, n: int, spent: dict[str, float]) -> None:
    """`n` jobs through their three writes, one statement at a time, each kind of write timed."""
    if variant == OWN:
        own_block(conn, n, spent)
        return
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


def _literal(sql: str, values: dict[str, str]) -> str:
    """A psycopg statement with its %(name)s / %s placeholders written as SQL expressions."""
    for name, value in values.items():
        sql = sql.replace(f"%({name})s", value)
    return sql.replace("%%", "%")


def in_server_statements(variant: str) -> tuple[str, str, str]:
    """(enqueue, claim, complete) of one job for the procedure: plpgsql, `INTO rec_` where a
    statement returns rows; the claimed job's id and attempt are `jid_` and `att_`."""
    if variant == OWN:
        q = queries("public")
        enq = _literal(
            q.enqueue,
            {
                "kind": "'bench'",
                "payload": "'{}'",
                "run_at": "NULL",
                "delay": "'0'",
                "max_attempts": "5",
                "priority": "0",
                "channel": "'jobs'",
            },
        )
        claim = _literal(
            q.worker_claim, {"worker": "'bench:1'", "kinds": "ARRAY['bench']", "limit": "1"}
        )
        done = _literal(
            q.worker_complete,
            {
                "ids": "ARRAY[jid_]",
                "worker": "'bench:1'",
                "by_id": "jsonb_build_object(jid_::text, att_)::text",
            },
        )
        return enq + " INTO rec_", claim + " INTO rec_", done + " INTO rec_"
    enq = ARTICLE_ENQUEUE.replace("%s, %s", "'bench', '{}'")
    order = ARTICLE_ORDER if variant == ARTICLE else JOBTUI_ORDER
    claim = CLAIM_ONE.format(order=order).replace("RETURNING id", "RETURNING id, attempts")
    return enq + " INTO rec_", claim + " INTO rec_", COMPLETE_ONE.replace("%s", "jid_")


def in_server_procedure(variant: str) -> str:
    enq, claim, done = in_server_statements(variant)
    return f"""
CREATE PROCEDURE bench_writes(n_ int, INOUT out_ float8[]) LANGUAGE plpgsql AS $proc$
#variable_conflict use_column
DECLARE
  rec_ record; t_ timestamptz; ids_ bigint[] := '{{}}'; atts_ int[] := '{{}}';
  jid_ bigint; att_ int;
BEGIN
  t_ := clock_timestamp();
  FOR k_ IN 1..n_ LOOP {enq}; COMMIT; END LOOP;
  out_[1] := extract(epoch FROM clock_timestamp() - t_);
  t_ := clock_timestamp();
  FOR k_ IN 1..n_ LOOP
    {claim};
    ids_ := ids_ || rec_.id; atts_ := atts_ || rec_.attempts;
    COMMIT;
  END LOOP;
  out_[2] := extract(epoch FROM clock_timestamp() - t_);
  t_ := clock_timestamp();
  FOR k_ IN 1..n_ LOOP jid_ := ids_[k_]; att_ := atts_[k_]; {done}; COMMIT; END LOOP;
  out_[3] := extract(epoch FROM clock_timestamp() - t_);
END
$proc$"""


def in_server_block(conn: psycopg.Connection, n: int, spent: dict[str, float]) -> None:
    row = conn.execute("CALL bench_writes(%s, NULL)", (n,)).fetchone()
    assert row is not None
    for write, seconds in zip(WRITES, row[0], strict=True):
        spent[write] += seconds


def entry(
    per_job: dict[str, dict[str, list[float]]],
    args: argparse.Namespace,
    command: str,
    load: dict[str, list[float]],
    machine: dict[str, object],
) -> dict[str, object]:
    """The run as `--record` keeps it and benchmarks/table.py renders it: per variant, in order,
    each write's µs per job by round, their median and the median's ratio to the article's."""
    from datetime import UTC, datetime

    base = {w: statistics.median(per_job[ARTICLE][w]) for w in WRITES}
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "timed": "inside the server" if args.in_server else "from the client",
        "rounds": args.rounds,
        "jobs": args.jobs,
        "block": args.block,
        "load": load,
        "machine": {k: machine[k] for k in ("cores", "cpu_model", "postgresql")},
        "baseline": ARTICLE,
        "writes": list(WRITES),
        "variants": [
            {
                "variant": v,
                "us_per_job": {w: [round(x, 2) for x in per_job[v][w]] for w in WRITES},
                "median_us": {w: round(statistics.median(per_job[v][w]), 2) for w in WRITES},
                "ratio": {w: round(statistics.median(per_job[v][w]) / base[w], 3) for w in WRITES},
            }
            for v in VARIANTS
        ],
    }


def record(path: Path, run: dict[str, object]) -> None:
    """`run` under the results JSON's write_cost key, the rest of the file as it was."""
    record_entry(path, WRITE_COST, run)
    print(f"recorded the write costs in {path} (make bench-table puts them in the docs)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=4000, help="jobs per variant per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--block", type=int, default=200)
    ap.add_argument("--dsn", default=ADMIN_DSN)
    ap.add_argument(
        "--in-server", action="store_true", help="time the statements inside the server"
    )
    ap.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="keep the run in this results JSON (benchmarks/results.json) for make bench-table",
    )
    args = ap.parse_args(argv)
    if args.record is not None:
        try:  # fail before the run, not after it
            json.loads(args.record.read_text())
        except (OSError, ValueError) as exc:
            ap.error(f"--record: cannot read {args.record}: {exc}")
    bench = Bench(args.dsn, quick=False, runs=args.rounds, origin="JOBTUI_BENCH_DSN")
    machine = machine_info(bench)
    load = {"before": [round(x, 2) for x in os.getloadavg()]}
    per_job: dict[str, dict[str, list[float]]] = {v: {w: [] for w in WRITES} for v in VARIANTS}
    try:
        for r in range(args.rounds):
            with ExitStack() as stack:
                dsns = {
                    v: stack.enter_context(bench.fresh_db(f"writes{i}", migrate=False))
                    for i, v in enumerate(VARIANTS)
                }
                for v, dsn in dsns.items():
                    setup(SETUP_AS.get(v, v), dsn)
                    with psycopg.connect(dsn, autocommit=True) as conn:
                        if v == INDEXES_ONLY:
                            conn.execute("ALTER TABLE jobs ENABLE TRIGGER USER")
                        if v in (AT_0024, AT_0024_NT):
                            for ddl in DROPPED_BY_0025:
                                conn.execute(ddl)
                        if args.in_server:
                            conn.execute(in_server_procedure(v))
                        conn.execute("ANALYZE jobs")
                conns = {
                    v: stack.enter_context(psycopg.connect(dsn, autocommit=True))
                    for v, dsn in dsns.items()
                }
                spent = {v: dict.fromkeys(WRITES, 0.0) for v in VARIANTS}

                def one(
                    v: str, n: int, into: dict[str, float], c: dict[str, psycopg.Connection] = conns
                ) -> None:
                    if args.in_server:
                        in_server_block(c[v], n, into)
                    else:
                        block(c[v], v, n, into)

                for v, conn in conns.items():
                    if args.in_server:
                        conn.execute("SET synchronous_commit = off")
                    one(v, 50, dict.fromkeys(WRITES, 0.0))  # warm up
                for b, start in enumerate(range(0, args.jobs, args.block)):
                    turn = b % len(VARIANTS)
                    for v in VARIANTS[turn:] + VARIANTS[:turn]:
                        one(v, min(args.block, args.jobs - start), spent[v])
                for v in VARIANTS:
                    for w in WRITES:
                        per_job[v][w].append(spent[v][w] / args.jobs * 1e6)
            print(f"  round {r + 1} done", flush=True)
    finally:
        bench.cleanup()
    load["after"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"\nµs per job, median of {args.rounds} round(s) of {args.jobs} jobs per variant "
        + ("timed inside the server " if args.in_server else "")
        + "(a shared 2-core machine: noisy)"
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
    if args.record is not None:
        words = sys.argv[1:] if argv is None else argv
        command = "python -m benchmarks.write_cost " + " ".join(shlex.quote(a) for a in words)
        record(args.record, entry(per_job, args, command, load, machine))


if __name__ == "__main__":
    main()
