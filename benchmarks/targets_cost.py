"""What the console over many databases costs (issue 28): 1, 5 and 20 targets.

For each count N it makes N databases on one server (migrated, each with ready jobs, a few
finished ones and dead letters), then measures the targets overview at a 2 s refresh:

- database time: the overview runs headless for `--seconds`; every target's link adds up the
  wall time of its reads (as the one-database console's `db` figure does). Printed per
  refresh of one target, per refresh round of all N, and per second;
- terminal bytes: the targets overview in a 120x40 pseudo-terminal; start-up output is read
  and discarded, then every byte written while nobody touches a key is counted: `idle` while
  the databases do not change, `busy` while one job a second goes into every one of them
  (every row's depth changes at every refresh).

    python benchmarks/targets_cost.py                        # 1, 5, 20 targets, 10 s each
    python benchmarks/targets_cost.py --counts 1,5 --seconds 5
    python benchmarks/targets_cost.py --server postgresql://root@127.0.0.1:5432/postgres
    python benchmarks/targets_cost.py --docs    # also write the table into the docs page
    python benchmarks/targets_cost.py --dead-target           # stats/check, one target mute

With --docs the Markdown table goes between `<!-- targets-cost:start -->` and
`<!-- targets-cost:end -->` in docs/operating/many-databases.md (with --dead-target, between
the targets-dead markers): nobody types these figures.

`--dead-target` times whole `jobtui` processes (`stats --json`, `stats --prometheus`,
`stats`, `check`) over three targets: two databases and a port that accepts connections and
never answers, at that target's default timeout (5 s) and at `timeout = "2s"`. The others'
figures must come back, in about one target's bound, not the sum.

The databases are named jobtui_tc_<n> and dropped at the end (unless --keep).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import conninfo

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.console_bytes import ConsolePty  # noqa: E402

DOCS_PAGE = ROOT / "docs" / "operating" / "many-databases.md"
DOCS_START, DOCS_END = "<!-- targets-cost:start -->", "<!-- targets-cost:end -->"
DEAD_START, DEAD_END = "<!-- targets-dead:start -->", "<!-- targets-dead:end -->"
from jobtui.console_config import ConsoleConfig  # noqa: E402
from jobtui.schema import migrate  # noqa: E402
from jobtui.targets import Target  # noqa: E402

REFRESH_S = 2.0
TEMPLATE = "jobtui_tc_template"
SEED = """
INSERT INTO jobs (kind, payload, created_at, run_at)
SELECT 'kind_' || (g % 8), '{}', now() - interval '10 minutes', now() - interval '10 minutes'
FROM generate_series(1, 2000) g;
INSERT INTO dead_letters (id, kind, payload, attempts, max_attempts, created_at, run_at,
                          last_error, errors, reason)
SELECT nextval('jobs_id_seq'), 'kind_1', '{}', 3, 3, now(), now(), 'E: x', '[]', 'failed'
FROM generate_series(1, 20);
ANALYZE;
"""


def with_db(server: str, name: str) -> str:
    return conninfo.make_conninfo(server, dbname=name)


@contextlib.contextmanager
def databases(server: str, n: int, keep: bool) -> Iterator[list[str]]:
    """`n` seeded databases (from one migrated template); their DSNs."""
    names = [f"jobtui_tc_{i}" for i in range(n)]
    with psycopg.connect(server, autocommit=True) as admin:
        for name in [TEMPLATE, *names]:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{TEMPLATE}"')
        with psycopg.connect(with_db(server, TEMPLATE), autocommit=True) as conn:
            migrate(conn, "public")
            conn.execute(SEED)  # type: ignore[arg-type]
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    try:
        yield [with_db(server, name) for name in names]
    finally:
        if not keep:
            with psycopg.connect(server, autocommit=True) as admin:
                for name in [*names, TEMPLATE]:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def write_config(dsns: list[str], path: Path) -> Path:
    body = "".join(f'[targets.t{i}]\ndsn = "{dsn}"\n\n' for i, dsn in enumerate(dsns))
    path.write_text(f'[console]\nrefresh = "{REFRESH_S:g}s"\n\n' + body)
    return path


async def db_time(dsns: list[str], seconds: float) -> tuple[float, int]:
    """(ms spent in the database, refreshes) by the headless overview over `seconds`, after
    every target has been read once."""
    from jobtui.tui.targets_screen import TargetsApp

    targets = [Target(f"t{i}", dsn) for i, dsn in enumerate(dsns)]
    app = TargetsApp(targets, "public", config=ConsoleConfig(refresh_s=REFRESH_S))
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 30
        while not all(w.polls for w in app.watches.values()) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        ms0 = sum(w.link.db_ms for w in app.watches.values())
        polls0 = sum(w.polls for w in app.watches.values())
        await pilot.pause(seconds)
        ms = sum(w.link.db_ms for w in app.watches.values()) - ms0
        polls = sum(w.polls for w in app.watches.values()) - polls0
        troubled = [k for k, w in app.watches.items() if w.row.error]
        if troubled:
            raise SystemExit(f"targets failed during the run: {troubled}")
    return ms, polls


def terminal_bytes(
    config: Path, dsns: list[str], seconds: float, startup: float
) -> tuple[int, float, float]:
    """(start-up bytes, idle B/s, busy B/s) of the targets overview over every target (as
    `jobtui --all-targets console` opens it; with one target that command opens its console
    instead, so the overview is started directly)."""
    code = (
        "import sys; from pathlib import Path; "
        "from jobtui.console_config import load_console_config; "
        "from jobtui.tui.targets_screen import run_targets; "
        f"c = load_console_config(Path({str(config)!r})); "
        "sys.exit(run_targets(list(c.targets.values()), 'public', c))"
    )
    with ConsolePty("", cmd=[sys.executable, "-c", code]) as console:
        first = console.read_for(startup)
        idle = console.read_for(seconds)
        stop = threading.Event()
        feeder = threading.Thread(target=feed, args=(dsns, stop), daemon=True)
        feeder.start()
        try:
            busy = console.read_for(seconds)
        finally:
            stop.set()
            feeder.join()
    return first, idle / seconds, busy / seconds


def feed(dsns: list[str], stop: threading.Event) -> None:
    """One job into every target each second: every row's depth changes every refresh."""
    conns = [psycopg.connect(dsn, autocommit=True) for dsn in dsns]
    try:
        while not stop.wait(1.0):
            for c in conns:
                c.execute("INSERT INTO jobs (kind, payload) VALUES ('fed', '{}')")
    finally:
        for c in conns:
            c.close()


@contextlib.contextmanager
def mute_port() -> Iterator[int]:
    """A local port that accepts connections and never says a word."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def dead_target_times(dsns: list[str], tmp: Path, docs: str | None = None) -> int:
    """Wall time of whole `jobtui` processes with one mute target among three."""
    import subprocess

    table: dict[str, list[str]] = {}

    commands = [["stats", "--json"], ["stats", "--prometheus"], ["stats"], ["check"]]
    print("three targets (two databases, one port that never answers), whole process")
    print(f"{'mute timeout':>12}  {'command':<18}  {'exit':>4}  {'seconds':>7}  others read")
    with mute_port() as port:
        for timeout in (None, "2s"):
            mute = f'[targets.mute]\ndsn = "postgresql://x@127.0.0.1:{port}/db"\n'
            if timeout:
                mute += f'timeout = "{timeout}"\n'
            config = write_config(dsns[:2], tmp / "dead.toml")
            config.write_text(config.read_text() + mute)
            for cmd in commands:
                started = time.monotonic()
                proc = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "jobtui",
                        *cmd,
                        "--all-targets",
                        "--config",
                        str(config),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    cwd=ROOT,
                )
                took = time.monotonic() - started
                others = all(f"t{i}" in proc.stdout for i in range(2))
                print(
                    f"{timeout or 'default 5s':>12}  {' '.join(cmd):<18}  {proc.returncode:>4}"
                    f"  {took:>7.2f}  {'yes' if others else 'NO'}"
                )
                row = "default (5 s)" if timeout is None else f'`timeout = "{timeout}"`'
                cell = f"{took:.2f} s (exit {proc.returncode})" + (
                    "" if others else ", others MISSING"
                )
                table.setdefault(row, []).append(cell)
    if docs:
        lines = [
            f"Printed by `python benchmarks/targets_cost.py --dead-target --docs` on "
            f"{time.strftime('%Y-%m-%d')}:",
            "",
            "| the mute target's timeout | "
            + " | ".join(f"`{' '.join(c)}`" for c in commands)
            + " |",
            "|---|" + "---:|" * len(commands),
            *(f"| {row} | " + " | ".join(cells) + " |" for row, cells in table.items()),
        ]
        write_docs(Path(docs), "\n".join(lines), DEAD_START, DEAD_END)
        print(f"wrote the table into {docs}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default="postgresql://root@127.0.0.1:5432/postgres")
    p.add_argument("--counts", default="1,5,20")
    p.add_argument("--seconds", type=float, default=10.0, help="measuring window per figure")
    p.add_argument("--startup", type=float, default=6.0, help="start-up output discarded (s)")
    p.add_argument("--keep", action="store_true", help="keep the databases")
    p.add_argument(
        "--docs",
        nargs="?",
        const=str(DOCS_PAGE),
        default=None,
        metavar="PAGE",
        help="write the table into PAGE between its markers (default: the many-databases page)",
    )
    p.add_argument("--dead-target", action="store_true", help="time stats/check, one target mute")
    args = p.parse_args()
    if args.dead_target:
        with databases(args.server, 2, args.keep) as dsns, tempfile.TemporaryDirectory() as tmp:
            return dead_target_times(dsns, Path(tmp), args.docs)
    counts = [int(c) for c in args.counts.split(",")]
    rows = []
    with (
        databases(args.server, max(counts), args.keep) as dsns,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for n in counts:
            ms, polls = asyncio.run(db_time(dsns[:n], args.seconds))
            config = write_config(dsns[:n], Path(tmp) / f"config-{n}.toml")
            first, idle, busy = terminal_bytes(config, dsns[:n], args.seconds, args.startup)
            rows.append((n, ms, polls, first, idle, busy))
            print(f"  {n} targets measured", file=sys.stderr, flush=True)
    print(
        f"targets overview, {REFRESH_S:g} s refresh, 120x40, {args.seconds:g} s windows, "
        "2,000 ready jobs (10 minutes old) and 20 dead letters per database"
    )
    print(
        f"{'targets':>7}  {'reads':>5}  {'db ms/read':>10}  {'db ms/round':>11}  "
        f"{'db ms/s':>7}  {'start-up B':>10}  {'idle B/s':>8}  {'busy B/s':>8}"
    )
    for n, ms, polls, first, idle, busy in rows:
        per_read = ms / polls if polls else float("nan")
        print(
            f"{n:>7}  {polls:>5}  {per_read:>10.1f}  {per_read * n:>11.1f}  "
            f"{ms / args.seconds:>7.1f}  {first:>10}  {idle:>8.0f}  {busy:>8.0f}"
        )
    if args.docs:
        write_docs(Path(args.docs), markdown(rows, args.seconds))
        print(f"wrote the table into {args.docs}")
    return 0


def markdown(rows: list[tuple[int, float, int, int, float, float]], seconds: float) -> str:
    """The table as the docs page shows it, with the command that printed it."""
    lines = [
        f"Printed by `python benchmarks/targets_cost.py --docs` on {time.strftime('%Y-%m-%d')}"
        f" ({seconds:g} s windows, {REFRESH_S:g} s refresh, 120×40):",
        "",
        f"| targets | reads in {seconds:g} s | db ms per read | db ms per round (all N) "
        "| db ms per second | start-up bytes | idle B/s | busy B/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, ms, polls, first, idle, busy in rows:
        per_read = ms / polls if polls else float("nan")
        lines.append(
            f"| {n} | {polls} | {per_read:.1f} | {per_read * n:,.1f} | {ms / seconds:,.1f} "
            f"| {first:,} | {idle:,.0f} | {busy:,.0f} |"
        )
    return "\n".join(lines)


def write_docs(page: Path, table: str, start: str = "", end: str = "") -> None:
    """Replace what lies between the page's markers (the cost table's by default)."""
    start, end = start or DOCS_START, end or DOCS_END
    text = page.read_text("utf-8")
    head, sep, rest = text.partition(start)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise SystemExit(f"targets_cost: {page} has no {start} … {end} markers")
    page.write_text(f"{head}{start}\n{table}\n{end}{tail}", "utf-8")


if __name__ == "__main__":
    sys.exit(main())
