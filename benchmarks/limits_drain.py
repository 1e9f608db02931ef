"""The drain with and without a per-kind limit (issue 13), and before/after a change.

Each run: a fresh database migrated by the tree under test, `--backlog` no-op jobs (and, in
the limited case, `--capped` jobs of `capped5`, limited to 5 running at once across every
worker, each holding its slot `--capped-ms`), all made ready at one moment; `--workers` worker
processes of concurrency `--concurrency` started from that tree. Figures: seconds until every
no-op job is done (the unlimited kinds' drain) and until everything is done.

Cases (interleaved, the order rotating every round, since the machine is shared):
- `plain TREE`: `benchmarks.bench_app:registry` (no limit declared), no-op jobs only;
- `limited TREE`: `benchmarks.bench_app:limited_registry`, the no-op jobs plus the capped ones
  (`--placement mixed`: one capped job every backlog/capped no-op jobs, in enqueue order;
  `ahead`: all capped jobs before the no-op ones, the fast claim's worst case).

    python benchmarks/limits_drain.py [--dsn postgresql://root@127.0.0.1:5432/postgres]
        [--tree before=/tmp/jobtui-before] [--backlog 20000] [--capped 1000] [--runs 3]

`--tree NAME=PATH` (repeatable) runs the plain case from another checkout too (its own jobtui
and benchmarks/bench_app.py, through PYTHONPATH); this tree is always `after`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import conninfo

HERE = Path(__file__).resolve().parent.parent
POLL_S = 0.01
CAP_S = 300.0


def _db(server: str, name: str) -> str:
    return conninfo.make_conninfo(server, dbname=name)


def _python(tree: Path, code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _cli(tree: Path, argv: list[str]) -> list[str]:
    return _python(tree, f"import sys; from jobtui.cli import main; sys.exit(main({argv!r}))")


def _load(dsn: str, backlog: int, capped: int, placement: str, capped_ms: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        later = "now() + interval '1 hour'"
        if capped and placement == "ahead":
            conn.execute(
                f"INSERT INTO jobs (kind, payload, run_at) SELECT 'capped5', "
                f"jsonb_build_object('ms', %s::int), {later} - interval '1 min' "
                "FROM generate_series(1, %s)",
                (capped_ms, capped),
            )
        every = (backlog + capped) // capped if capped and placement == "mixed" else 0
        conn.execute(
            f"INSERT INTO jobs (kind, payload, run_at) "
            f"SELECT CASE WHEN %(every)s > 0 AND i %% %(every)s = 0 THEN 'capped5' ELSE 'noop' END,"
            f" jsonb_build_object('ms', %(ms)s::int), {later} FROM generate_series(1, %(n)s) i",
            {"every": every, "ms": capped_ms, "n": backlog + (capped if every else 0)},
        )
        conn.execute("ANALYZE jobs")


def _wait_ready(dsn: str, procs: list[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a worker exited at start")
            row = conn.execute(
                "SELECT (SELECT count(*) FROM workers), (SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND state = 'idle' "
                "AND query ILIKE 'LISTEN %%')"
            ).fetchone()
            if row and row[0] >= len(procs) and row[1] >= len(procs):
                time.sleep(0.5)  # the probe and the first claims settle
                return
            time.sleep(0.05)
    raise RuntimeError("workers did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def run_once(
    server: str, tree: Path, app: str, args: argparse.Namespace, capped: int, logdir: Path
) -> tuple[float, float]:
    """(seconds until no no-op job is left, seconds until no job is left)."""
    name = f"jobtui_ld_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = _db(server, name)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(
            _cli(tree, ["migrate", "--dsn", dsn]),
            env=_env(tree),
            cwd=tree,
            check=True,
            capture_output=True,
        )
        _load(dsn, args.backlog, capped, args.placement, args.capped_ms)
        for i in range(args.workers):
            argv = ["worker", "--app", app, "--concurrency", str(args.concurrency), "--dsn", dsn]
            log = open(logdir / f"{name}-{i}.log", "wb")  # noqa: SIM115 - closed below
            procs.append(
                subprocess.Popen(
                    _cli(tree, argv),
                    env=_env(tree),
                    cwd=tree,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            log.close()
        _wait_ready(dsn, procs)
        with psycopg.connect(dsn, autocommit=True) as conn:
            channel = f"jobtui_{'public'}"
            with conn.transaction():
                conn.execute("UPDATE jobs SET run_at = now() WHERE finished_at IS NULL")
                conn.execute("ANALYZE jobs")
                conn.execute("SELECT pg_notify(%s, 'noop')", (channel,))
            t0 = time.perf_counter()
            plain_done: float | None = None
            while True:
                row = conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM jobs WHERE finished_at IS NULL AND kind = "
                    "'noop'), EXISTS (SELECT 1 FROM jobs WHERE finished_at IS NULL)"
                ).fetchone()
                elapsed = time.perf_counter() - t0
                assert row is not None
                if plain_done is None and not row[0]:
                    plain_done = elapsed
                if not row[1]:
                    return plain_done or elapsed, elapsed
                if elapsed > CAP_S:
                    raise RuntimeError(f"not drained within {CAP_S:.0f}s")
                if any(p.poll() is not None for p in procs):
                    raise RuntimeError("a worker exited during the drain")
                time.sleep(POLL_S)
    finally:
        for p in procs:
            _stop(p)
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get("JOBTUI_BENCH_DSN", "postgresql://root@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--backlog", type=int, default=20000)
    parser.add_argument("--capped", type=int, default=1000)
    parser.add_argument("--capped-ms", type=int, default=10)
    parser.add_argument("--placement", choices=("mixed", "ahead"), default="mixed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--logs", type=Path, default=Path("/tmp"))
    args = parser.parse_args()
    trees = {"after": HERE}
    for spec in args.tree:
        label, _, path = spec.partition("=")
        if not path or not Path(path, "jobtui").is_dir():
            parser.error(f"--tree {spec!r}: expected NAME=PATH to a jobtui checkout")
        trees[label] = Path(path).resolve()
    cases = [(f"plain {t}", trees[t], "benchmarks.bench_app:registry", 0) for t in trees]
    cases.append(
        (
            f"limited after ({args.placement})",
            HERE,
            "benchmarks.bench_app:limited_registry",
            args.capped,
        )
    )
    print(
        f"drain: {args.backlog} no-op jobs, {args.workers} workers x concurrency "
        f"{args.concurrency}; limited: + {args.capped} capped5 jobs (limit 5, "
        f"{args.capped_ms} ms each)",
        flush=True,
    )
    results: dict[str, list[tuple[float, float]]] = {c[0]: [] for c in cases}
    for r in range(args.runs):
        order = cases[r % len(cases) :] + cases[: r % len(cases)]
        for label, tree, app, capped in order:
            plain, total = run_once(args.dsn, tree, app, args, capped, args.logs)
            results[label].append((plain, total))
            print(
                f"  round {r + 1} {label}: no-op jobs drained in {plain:.2f}s "
                f"({args.backlog / plain:,.0f}/s), everything in {total:.2f}s",
                flush=True,
            )
    print("median of the runs:")
    for label, runs in results.items():
        plain = statistics.median(p for p, _ in runs)
        total = statistics.median(t for _, t in runs)
        print(
            f"  {label:<28} no-op {args.backlog / plain:>8,.0f} jobs/s ({plain:.2f}s); "
            f"all done {total:.2f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
